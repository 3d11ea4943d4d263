// Host-side launch interface of the CUDA LayerNorm kernels (cuda_kernels.cu). A row is
// owned by a team of `wpr` warps (P = 32*wpr lanes); lane l of the team owns the row's
// chunks l, l+P, l+2P, ... (kernels/cuda_rows.cuh: 16 bytes of x per chunk) and keeps its
// first few in registers between the passes. A block of num_warps warps holds
// num_warps/wpr teams. The team's sums: each lane's terms serially, then a shuffle tree in
// each warp and a tree across the team's warps (row_reduction's shape with P threads).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::lncuda {

using rowcuda::Mat;

/// x, y in x's dtype; w, b any dtype; mean, rstd in the stat dtype.
struct FwdArgs {
  Mat x, w, b, y, mean, rstd;
  int64_t rows, n;
  float eps;  // rounded to fp32 (the definition's mandated rounding)
  int threads;
  int wpr;   // warps per row
  int fast;  // every chunk whole, x, y, w and b aligned for vector accesses
};

/// dy, x, dx in x's dtype; w, dw, db any dtype; mean, rstd in the stat dtype. Each team is a
/// dW/dB program: it sums a contiguous chunk of ceil(rows/programs) rows in fp32
/// (registers; its workspace rows for chunks past the registers), then writes its partial
/// rows (or adds them atomically); the second stage sums the partials in program order.
struct BwdArgs {
  Mat dy, x, w, mean, rstd, dx, dw, db;
  int64_t rows, n;
  int threads;
  int wpr;
  int strategy;      // rowcuda::DwStrategy
  int64_t programs;  // blocks * teams per block
  float *dw_partials, *db_partials;  // [programs][n]
  float *dw_acc, *db_acc;            // [n] (atomics)
  int fast;  // every chunk whole, dy, x, dx and w aligned for vector accesses
};

/// Chunks per lane kept in registers. fwd: x's, 8 for 2-byte x and 4 for fp32 in blocks of
/// up to 256 threads, 2 in larger ones. bwd: dy's and x's, the next row's (loaded while the
/// current one is reduced) and the dW/dB partials: 4, 2 in blocks of up to 256, 512 threads;
/// none in 1024-thread blocks (everything read again, the partials in the workspace).
inline int fwd_chunks(DType x, int threads) { return threads > 256 ? 2 : dtype_size(x) == 2 ? 8 : 4; }
inline int bwd_chunks(int threads) { return threads <= 256 ? 4 : threads <= 512 ? 2 : 0; }
inline int fwd_wpr(int64_t n, DType x, int num_warps) {
  return rowcuda::warps_per_row(n, x, num_warps, fwd_chunks(x, 32 * num_warps));
}
inline int bwd_wpr(int64_t n, DType x, int num_warps) {
  return rowcuda::warps_per_row(n, x, num_warps, bwd_chunks(32 * num_warps));
}

void launch_fwd(DType x, const FwdArgs& a, cudaStream_t s);
void launch_bwd(DType x, const BwdArgs& a, cudaStream_t s);
/// The kernels a block of `threads` runs (the general ones: the same launch bounds), for
/// launch validation.
const void* fwd_kernel(DType x, int threads);
const void* bwd_kernel(DType x, int threads);

}  // namespace kv::lncuda
