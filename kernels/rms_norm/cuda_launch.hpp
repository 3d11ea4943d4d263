// Host-side launch interface of the CUDA RMSNorm kernels (kernels in cuda_kernels.cu).
// A row is owned by a team of `wpr` warps (P = 32*wpr lanes); lane l of the team owns the
// row's chunks l, l+P, l+2P, ... (kernels/cuda_rows.cuh: 16 bytes of x per chunk) and keeps
// its first few in registers between the sum and the second pass. A block of num_warps
// warps holds num_warps/wpr teams. The team's sum: each lane's terms serially, then a
// shuffle tree in each warp and a tree across the team's warps (row_reduction's shape with
// P threads).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::rmscuda {

enum Mode : int { llama = 0, gemma = 1, none = 2 };
using rowcuda::atomics;  // dW strategies, shared with layer_norm (rowcuda::DwStrategy)
using rowcuda::fixed_partials;
using rowcuda::per_sm;
using rowcuda::Mat;

/// x in the kernel's dtype; y, w any dtype; rstd in the stat dtype.
struct FwdArgs {
  Mat x, w, y, rstd;
  int64_t rows, n;
  int mode;
  float eps, offset;
  int threads;
  int wpr;   // warps per row
  int fast;  // every chunk whole, x, y (in x's dtype) and w aligned for vector accesses
};

/// x in the kernel's dtype; dy, dx, w, dw any dtype. Each team is a dW program: it sums a
/// contiguous chunk of ceil(rows/programs) rows in fp32 (registers), then writes its
/// partial row (or adds it atomically); the second stage sums the partials in program order.
struct BwdArgs {
  Mat dy, x, w, rstd, dx, dw;
  int64_t rows, n;
  int mode;
  bool m_round_x;
  float offset;
  int threads;
  int wpr;
  int strategy;
  int64_t programs;    // blocks * teams per block
  float* ws_partials;  // [programs][n] fp32
  float* ws_acc;       // [n] fp32 (atomics)
};

/// Chunks per lane kept in registers: the forward keeps x's (8 for 2-byte x, 4 for fp32,
/// 2 in 1024-thread blocks: 64 registers); the backward keeps dy's and x's and its dW
/// partials (none in 1024-thread blocks: everything is read again and the partials live in
/// the workspace).
constexpr int kBwdChunks = 2;
inline int fwd_chunks(DType x, int threads) { return threads > 256 ? 2 : dtype_size(x) == 2 ? 8 : 4; }
inline int bwd_chunks(int threads) { return threads <= 512 ? kBwdChunks : 0; }

using rowcuda::warps_per_row;
inline int fwd_wpr(int64_t n, DType x, int num_warps) {
  return warps_per_row(n, x, num_warps, fwd_chunks(x, 32 * num_warps));
}
inline int bwd_wpr(int64_t n, DType x, int num_warps) {
  return warps_per_row(n, x, num_warps, bwd_chunks(32 * num_warps));
}

void launch_fwd(DType x, const FwdArgs& a, cudaStream_t s);
void launch_bwd(DType x, const BwdArgs& a, cudaStream_t s);
/// Kernel function pointers for launch validation (the ones these launches run).
const void* fwd_kernel(DType x, int threads, int mode);
const void* bwd_kernel(DType x, int threads, int mode, bool m_round_x);

}  // namespace kv::rmscuda
