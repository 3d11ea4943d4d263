// Registration of the CUDA rope_table impl.
#pragma once
#include "core/registry.hpp"

namespace kv {
void register_cuda_rope_table(Registry& r);
}  // namespace kv
