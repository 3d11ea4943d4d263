// Registration of fused_linear_cross_entropy (ops and host impls), and its planted faults.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_flce_ops(Registry& r);
void register_flce_faults(Registry& r);
}  // namespace kv
