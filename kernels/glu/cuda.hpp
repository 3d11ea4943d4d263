// Registration of the CUDA SwiGLU/GeGLU impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cuda_glu(Registry& r);
}
