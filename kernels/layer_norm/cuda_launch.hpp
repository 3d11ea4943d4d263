// Host-side launch interface of the CUDA LayerNorm kernels (cuda_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::lncuda {

using rowcuda::Mat;

/// x, y in x's dtype; w, b any dtype; mean, rstd in the stat dtype. `cache_bytes`: shared
/// memory holding the row (0: the kernel reads x again).
struct FwdArgs {
  Mat x, w, b, y, mean, rstd;
  int64_t rows, n;
  float eps;  // rounded to fp32 (the definition's mandated rounding)
  int threads;
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

inline int64_t fwd_cache_bytes(int64_t n, DType x) { return rowcuda::row_cache_bytes(1, n, rowcuda::chunk_elems(x)); }
inline int64_t bwd_acc_bytes(int64_t n, DType x) { return rowcuda::row_cache_bytes(2, n, rowcuda::chunk_elems(x)); }

void launch_fwd(DType x, const FwdArgs& a, cudaStream_t s);
void launch_bwd(DType x, const BwdArgs& a, cudaStream_t s);
/// Kernel function pointers for launch validation (bwd: the one a block of `threads` runs).
const void* fwd_kernel(DType x);
const void* bwd_kernel(DType x, int threads);

}  // namespace kv::lncuda
