// Host-side launch interface of the CUDA softmax kernels (cuda_kernels.cu). A row is owned
// by a team of `wpr` warps (P = 32*wpr lanes); lane l of the team owns the row's chunks
// l, l+P, l+2P, ... (kernels/cuda_rows.cuh: 16 bytes of x per chunk) and keeps its first
// few in registers between the passes. A block of num_warps warps holds num_warps/wpr
// teams. The team's sums: each lane's terms serially, then a shuffle tree in each warp and
// a tree across the team's warps (row_reduction's shape with P threads).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::smcuda {

using rowcuda::Mat;

/// fwd: y = softmax(x) per row. bwd: dx = y * (dy - sum(dy * y)) per row. Rows tensors in
/// x's dtype.
struct Args {
  Mat x, y, dy, dx;
  int64_t rows, n;
  int threads;
  int wpr;   // warps per row
  int fast;  // every chunk whole and every rows tensor aligned for vector accesses
};

/// Chunks per lane kept in registers in blocks of up to 256 threads: fwd keeps x's, then
/// exp(x - max) as fp32 (6 for 2-byte x, 4 for fp32; 128 registers, two blocks an SM), bwd
/// dy's and y's (8 for 2-byte x, 4 for fp32). Larger blocks (64 registers a thread in
/// 1024-thread blocks): fwd 1, bwd 2.
inline int kept_chunks(DType x, bool bwd, int threads) {
  if (threads > 256) return bwd ? 2 : 1;
  return dtype_size(x) == 4 ? 4 : bwd ? 8 : 6;
}
inline int wpr(int64_t n, DType x, bool bwd, int num_warps) {
  return rowcuda::warps_per_row(n, x, num_warps, kept_chunks(x, bwd, 32 * num_warps));
}

void launch(DType x, bool bwd, const Args& a, cudaStream_t s);
/// The kernel a block of `threads` runs (the general one: the same launch bounds), for
/// launch validation.
const void* kernel(DType x, bool bwd, int threads);

}  // namespace kv::smcuda
