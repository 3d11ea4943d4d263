// Host-side launch interface of the CUDA rope kernels (cuda_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace kv::ropecuda {

/// q, k (or their gradients) as B x S x H x D: element (b, s, h, j) at
/// base + b*sb + s*ss + h*sh + j*sd (elements).
struct Heads {
  void* base;
  int64_t sb, ss, sh, sd;
};

/// One table (cos or sin) of one section: the value for sample b, token s, position pos
/// (3d) and column col at base + b*sb + s*ss + pos*sp + col*sc (elements of `dtype`, a
/// kv::cuda::DT). 1d: one section, (1,S,D) indexed by s and the element. mrope: section k
/// is table k of (3,B,S,D). 3d: section a is axis a's (S, c_a) table indexed by the
/// token's position on that axis and the pair's index inside the axis.
struct Table {
  const void* base;
  int dtype;
  int64_t sb, ss, sp, sc;
};

/// Pairs per section (1d: {D/2, 0, 0}); 3d also reads the per-sample grid (B,3) and
/// sequence length (B), i32.
struct Args {
  Heads in[2], out[2];  // q, k (fwd) / dq_out, dk_out (bwd) -> q_out, k_out / dq, dk
  int64_t heads[2];     // Hq, Hk
  int64_t b, s, d;
  Table cos[3], sin[3];
  int sec[3];
  int mode3d;           // positions from the grid (and column = index inside the axis)
  const int32_t* grid;  // (B,3) at grid[b*grid_sb + a*grid_sa]
  int64_t grid_sb, grid_sa;
  const int32_t* seq_len;  // (B) at seq_len[b*len_sb]
  int64_t len_sb;
  int warps;  // per block; each warp rotates one token at a time
  // 1: every q/k tensor and output moves in whole 16-byte chunks (sd == 1; the base and the
  // strides of dims longer than 1 in whole 16 bytes; D/2 (rotate_half) or D (interleaved) a
  // multiple of the chunk); 0: element by element (the same operations, the same bits).
  int vec;
};

/// A unit of work is a 16-byte chunk of V = 16 / sizeof(x) elements from each half
/// (rotate_half: V pairs) or one such chunk (interleaved: V/2 pairs), of one head.
__host__ __device__ inline int pairs_per_unit(int v, bool interleaved) { return interleaved ? v / 2 : v; }
/// Units per head.
inline int64_t units_per_head(int64_t d, DType x, bool interleaved) {
  const int64_t v = 16 / int64_t(dtype_size(x)), span = interleaved ? d : d / 2;
  return (span + v - 1) / v;
}
/// Dynamic shared memory per block: each warp stages its token's cos and sin as one
/// float4 per pair, for whole units.
inline int64_t smem_bytes(int64_t d, DType x, bool interleaved, int warps) {
  const int v = 16 / static_cast<int>(dtype_size(x));
  return int64_t(warps) * units_per_head(d, x, interleaved) * pairs_per_unit(v, interleaved) * 16;
}

void launch(DType x, bool interleaved, bool bwd, const Args& a, cudaStream_t s);
/// The kernel's function pointer (vec: the one moving 16-byte chunks), for launch validation.
const void* kernel(DType x, bool interleaved, bool bwd, bool vec);

}  // namespace kv::ropecuda
