// Registration of the CUDA rope (fwd, bwd) and rope_table impls.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cuda_rope(Registry& r);
}
