// Host-side launch interface of the CUDA softmax kernels (cuda_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::smcuda {

using rowcuda::Mat;

/// fwd: y = softmax(x) per row. bwd: dx = y * (dy - sum(dy * y)) per row. Rows tensors in
/// x's dtype. `cache_bytes`: shared memory holding the row (0: the kernel reads it again).
struct Args {
  Mat x, y, dy, dx;
  int64_t rows, n;
  int threads;
  int64_t cache_bytes;
};

/// Shared memory for the row cache: fwd keeps x (then exp(x - max)), bwd keeps dy and y.
inline int64_t cache_bytes(bool bwd, int64_t n, DType x) {
  return rowcuda::row_cache_bytes(bwd ? 2 : 1, n, rowcuda::chunk_elems(x));
}

void launch(DType x, bool bwd, const Args& a, cudaStream_t s);
/// The kernel's function pointer, for launch validation.
const void* kernel(DType x, bool bwd);

}  // namespace kv::smcuda
