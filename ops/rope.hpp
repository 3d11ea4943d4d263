// Registration of rope (ops and host impls), and its planted-fault impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_rope_ops(Registry& r);
void register_rope_faults(Registry& r);
}  // namespace kv
