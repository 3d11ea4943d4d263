// Registration of the CUDA LayerNorm impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cuda_layer_norm(Registry& r);
}
