// Registration of the CUDA rope (fwd, bwd) and rope_table impls.
#pragma once
#include <cstdint>

#include "core/registry.hpp"
#include "core/tensor.hpp"

namespace kv {
void register_cuda_rope(Registry& r);
/// Whether the rope kernels move this q/k tensor (first element at address addr) in whole,
/// aligned 16-byte chunks: D stride 1, the address and the strides of dims longer than 1 in
/// whole 16 bytes, D/2 (rotate_half) or D (interleaved) a multiple of 16 bytes. Otherwise
/// (for any one tensor) the launch goes element by element.
bool rope_whole_chunks(const TensorDesc& d, uintptr_t addr, bool interleaved);
}  // namespace kv
