// Host-side launch interface of the CUDA softmax kernels (cuda_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::smcuda {

using rowcuda::Mat;

/// fwd: y = softmax(x) per row. bwd: dx = y * (dy - sum(dy * y)) per row. Rows tensors in
/// x's dtype. A block takes `rows_per_block` rows at a time (their loads in flight
/// together, one reduction for all; the bits do not depend on it). `cache_bytes`: shared
/// memory holding those rows (0: the kernel reads them again).
struct Args {
  Mat x, y, dy, dx;
  int64_t rows, n;
  int threads;
  int rows_per_block;
  int64_t cache_bytes;
};

/// Shared memory for the row caches: fwd keeps x (then exp(x - max)), bwd keeps dy and y.
inline int64_t cache_bytes(bool bwd, int64_t n, DType x, int rows_per_block) {
  return rowcuda::row_cache_bytes((bwd ? 2 : 1) * rows_per_block, n, rowcuda::chunk_elems(x));
}
/// Two rows at a time where blocks of up to 512 threads leave the registers for them and
/// the cache holds both; else one (4 measured slower on an H100: fewer blocks fit).
inline int rows_per_block(bool bwd, int64_t n, DType x, int threads) {
  return threads <= 512 && cache_bytes(bwd, n, x, 2) > 0 ? 2 : 1;
}

void launch(DType x, bool bwd, const Args& a, cudaStream_t s);
/// The kernel's function pointer, for launch validation.
const void* kernel(DType x, bool bwd, int rows_per_block);

}  // namespace kv::smcuda
