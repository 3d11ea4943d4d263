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
  int cache_wb;  // w and b in the cache too
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

/// How the forward runs: rows per block and what the cache holds (the block's rows, x then
/// x - mean; w and b). Two rows where blocks of up to 512 threads leave the registers for
/// them and the cache holds both with w and b (4 measured slower on an H100: fewer blocks
/// fit); else one row with w and b, else the row alone, else nothing.
struct FwdPlan {
  int rows_per_block;
  bool cache_wb;
  int64_t cache_bytes;
};
inline FwdPlan fwd_plan(int64_t n, DType x, int threads) {
  const int64_t v = rowcuda::chunk_elems(x);
  if (threads <= 512)
    if (const int64_t b = rowcuda::row_cache_bytes(4, n, v)) return {2, true, b};
  if (const int64_t b = rowcuda::row_cache_bytes(3, n, v)) return {1, true, b};
  return {1, false, rowcuda::row_cache_bytes(1, n, v)};
}
/// The backward's dW and dB partials in shared memory (0: in the workspaces).
inline int64_t bwd_acc_bytes(int64_t n, DType x) { return rowcuda::row_cache_bytes(2, n, rowcuda::chunk_elems(x)); }

void launch_fwd(DType x, const FwdArgs& a, cudaStream_t s);
void launch_bwd(DType x, const BwdArgs& a, cudaStream_t s);
/// Kernel function pointers for launch validation (the ones these launches run).
const void* fwd_kernel(DType x, int rows_per_block);
const void* bwd_kernel(DType x, int threads);

}  // namespace kv::lncuda
