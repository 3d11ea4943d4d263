// Launch-side vocabulary shared by the CUDA row kernels (softmax, layer_norm, rms_norm):
// strided row views, chunking, teams of warps per row, and
// the column-sum stage that turns per-program fp32 partials into dW/dB.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace kv::rowcuda {

/// kv::cuda::DT of a storage dtype (F32 = 0, F16 = 1, BF16 = 2).
inline int dt_code(DType d) { return d == DType::f32 ? 0 : d == DType::f16 ? 1 : 2; }

/// A [rows, n] view: element (r, j) at base + r*rs + j*cs (elements). A vector over the
/// columns has rs = 0; a per-row statistic has cs = 0. `vec`: whole chunks of this view
/// can be moved with aligned vector accesses (cs == 1, base and row stride aligned).
struct Mat {
  void* base;
  int dtype;  // kv::cuda::DT
  int vec;
  int64_t rs, cs;
};

/// Elements per chunk for rows of x's dtype: one 16-byte access.
inline int64_t chunk_elems(DType x) { return 16 / static_cast<int64_t>(dtype_size(x)); }

/// Warps per row (a team): the fewest (a power of 2, at most num_warps) whose lanes hold a
/// row of n in `cap` chunks each; num_warps where even those do not (the rest is read again).
inline int warps_per_row(int64_t n, DType x, int num_warps, int cap) {
  const int64_t v = chunk_elems(x), nch = (n + v - 1) / v;
  int w = 1;
  while (w < num_warps && nch > int64_t(32) * w * cap) w *= 2;
  return w;
}

enum DwStrategy : int { per_sm = 0, fixed_partials = 1, atomics = 2 };

/// One column sum of the dW/dB second stage: out[j] = the G partials of column j summed
/// serially in program order ([G][n] fp32), or acc[j] where the programs added their
/// partials atomically.
struct ColSum {
  const float* partials;
  const float* acc;
  void* out;
  int out_dtype;
  int64_t out_stride;
};

/// Finishes `count` (1 or 2) column sums of length n over G partials.
void launch_col_sums(const ColSum* sums, int count, int64_t n, int64_t G, int strategy, cudaStream_t s);

}  // namespace kv::rowcuda
