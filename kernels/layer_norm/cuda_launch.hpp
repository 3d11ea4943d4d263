// Host-side launch interface of the CUDA LayerNorm kernels (cuda_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::lncuda {

using rowcuda::Mat;

/// x, y in x's dtype; w, b any dtype; mean, rstd in the stat dtype. A block takes
/// `rows_per_block` rows at a time (their loads in flight together, one reduction for all;
/// the bits do not depend on it). `cache_bytes`: shared memory holding those rows and w, b
/// as fp32 (0: the kernel reads them again).
struct FwdArgs {
  Mat x, w, b, y, mean, rstd;
  int64_t rows, n;
  float eps;  // rounded to fp32 (the definition's mandated rounding)
  int threads;
  int rows_per_block;
  int64_t cache_bytes;
};

/// dy, x, dx in x's dtype; w, dw, db any dtype; mean, rstd in the stat dtype. G programs
/// sum contiguous chunks of rows into fp32 partials of dW and dB: in shared memory where
/// `acc_bytes` > 0, else in their rows of the workspaces.
struct BwdArgs {
  Mat dy, x, w, mean, rstd, dx, dw, db;
  int64_t rows, n;
  int threads;
  int strategy;       // rowcuda::DwStrategy
  int64_t partials;   // G
  float *dw_partials, *db_partials;  // [G][n]
  float *dw_acc, *db_acc;            // [n] (atomics)
  int64_t acc_bytes;
};

/// The forward's cache: the block's rows (x, then x - mean), w and b.
inline int64_t fwd_cache_bytes(int64_t n, DType x, int rows_per_block) {
  return rowcuda::row_cache_bytes(rows_per_block + 2, n, rowcuda::chunk_elems(x));
}
/// Two rows at a time where blocks of up to 512 threads leave the registers for them and
/// the cache holds both; else one (4 measured slower on an H100: fewer blocks fit).
inline int fwd_rows_per_block(int64_t n, DType x, int threads) {
  return threads <= 512 && fwd_cache_bytes(n, x, 2) > 0 ? 2 : 1;
}
/// The backward's dW and dB partials in shared memory (0: in the workspaces).
inline int64_t bwd_acc_bytes(int64_t n, DType x) { return rowcuda::row_cache_bytes(2, n, rowcuda::chunk_elems(x)); }

void launch_fwd(DType x, const FwdArgs& a, cudaStream_t s);
void launch_bwd(DType x, const BwdArgs& a, cudaStream_t s);
/// Kernel function pointers for launch validation (the ones these launches run).
const void* fwd_kernel(DType x, int rows_per_block);
const void* bwd_kernel(DType x, int threads);

}  // namespace kv::lncuda
