// Registration of layer_norm (ops and host impls), and its planted-fault impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_layer_norm_ops(Registry& r);
void register_layer_norm_faults(Registry& r);
}  // namespace kv
