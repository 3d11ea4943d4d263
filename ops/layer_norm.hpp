// Registration of layer_norm (ops and host impls).
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_layer_norm_ops(Registry& r);
}  // namespace kv
