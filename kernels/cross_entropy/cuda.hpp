// Registration of the CUDA cross-entropy impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cuda_cross_entropy(Registry& r);
}
