// Registration of the CUDA RMSNorm impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cuda_rms_norm(Registry& r);
}
