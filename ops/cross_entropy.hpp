// Registration of cross_entropy (ops and host impls).
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cross_entropy_ops(Registry& r);
}  // namespace kv
