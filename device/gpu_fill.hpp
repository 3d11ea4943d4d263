// Generated inputs computed on the GPU (core/inputs.hpp's GpuFiller): core/draw.hpp's
// arithmetic in a kernel built with --fmad=false, each element's bits the host loop's.
#pragma once
#include <cstdint>
#include <vector>

#include "core/draw.hpp"

namespace kv {

/// The bits of every element of a contiguous tensor of `shape` (rank <= 8) in s.dt, in
/// logical order, into host memory at dst. False (nothing written) where no GPU is usable
/// or the rank is over 8; throws CudaError on a failing CUDA call.
bool gpu_fill(const gen::Spec& s, const std::vector<int64_t>& shape, uint8_t* dst);

}  // namespace kv
