// Registration of the CUDA softmax impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cuda_softmax(Registry& r);
}
