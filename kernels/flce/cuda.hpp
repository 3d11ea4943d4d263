// Registration of the CUDA fused-linear-cross-entropy impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cuda_flce(Registry& r);
}
