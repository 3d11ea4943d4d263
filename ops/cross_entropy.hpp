// Registration of cross_entropy (ops and host impls), and its planted-fault impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cross_entropy_ops(Registry& r);
void register_cross_entropy_faults(Registry& r);
}  // namespace kv
