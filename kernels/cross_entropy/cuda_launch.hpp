// Host-side launch interface of the CUDA cross-entropy kernels (cuda_kernels.cu), shared by
// the cross_entropy impls and FLCE (which runs them over its fp32 logits chunks).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::cecuda {

using rowcuda::Mat;

/// The attributes as the kernels take them: ls, zl and softcap rounded to fp32 (the
/// definition's mandated roundings); reduction 0 none, 1 mean, 2 sum; empty_nan: mean over
/// rows that are all ignored is NaN (empty_mean=nan); ignored_p: an ignored row's gradient
/// is 0 * p_j (ignored_grad=propagate), else it is written as zeros without reading the row.
struct Params {
  int64_t v = 0;
  int64_t ignore_index = -100;
  float ls = 0, zl = 0, softcap = 0;
  int reduction = 1;
  bool weighted = false;
  bool empty_nan = true;
  bool ignored_p = true;
};

/// One launch over `rows` rows of logits. A row is split into `ctas` segments of `block_v`
/// elements, each summed by one block of `threads`; the blocks of a row form a thread-block
/// cluster (ctas > 1) that exchanges its partial max and sums through distributed shared
/// memory. Pipelined (piped_bytes > 0 and x's rows 16-byte aligned): as many clusters as
/// the GPU holds, each block copying its next row's segment (raw) into one half of
/// `piped_bytes` of shared memory while it works on the other. Staged otherwise: rows read
/// from global memory, their first `cache_bytes` / 16 chunks kept raw in shared memory
/// between passes, the others read again; for aligned rows as many clusters as the GPU
/// holds, each copying its next row's chunks during the current row's last pass, else one
/// row per cluster. The bits are the same either way. Row r of
/// x, g and the per-row tensors is local row r, except target, dloss, loss and row_loss,
/// which are indexed by row0 + r (FLCE's chunks).
struct RowArgs {
  Params q;
  Mat x;         // logits [rows, V] (template dtype X)
  Mat bias;      // a vector over V added to every row (FLCE), base null when none
  const int32_t* target;
  int64_t target_stride;
  Mat weight;    // class weights over V (cs its stride), base null when none
  Mat dloss;     // bwd: per row (none) or one value (cs unused, rs its stride)
  Mat loss;      // fwd, reduction none: the per-row output (rs its stride)
  float* row_loss;      // fwd, mean/sum: per-row losses for rows_reduce
  const float* stats;   // bwd: {wsum, any row not ignored, wbar} from rows_reduce / wbar
  Mat g;         // bwd: the gradient rows (template dtype Y)
  int64_t rows, row0;
  int64_t block_v;
  int ctas, threads;
  int64_t cache_bytes;
  int64_t piped_bytes;
};

/// Sums over the rows (one block of kRowsThreads): the loss total (fwd, from row_loss) and
/// the weight sum of rows not ignored; writes stats {wsum, any} and, for a forward mean or
/// sum, the loss (total, or total / wsum; NaN or 0 as empty_nan says when every row is ignored).
constexpr int kRowsThreads = 256;
struct RowsArgs {
  Params q;
  const int32_t* target;
  int64_t target_stride;
  Mat weight;
  const float* row_loss;  // null: stats only
  Mat loss;
  float* stats;
  int64_t rows;
};

/// wbar = sum_v w_v / V for weighted label smoothing, summed as the row kernel sums a row
/// (segments of block_v, `threads` lanes over chunks of `chunk`, partials in order) into stats[2].
struct WbarArgs {
  Mat weight;
  float* stats;
  int64_t v, block_v, chunk;
  int ctas, threads;
};

/// x and g storage dtypes the row kernel is built for: (X, X) for X in fp32/fp16/bf16, and
/// (fp32, fp16/bf16) for FLCE's gradient in x's dtype.
bool row_kernel_built(DType x, DType g, bool bwd);
const void* row_kernel(DType x, DType g, bool bwd, bool piped);
const void* rows_kernel();
const void* wbar_kernel();
/// Clusters of `ctas` blocks (blocks where ctas = 1) of the staged or pipelined kernel with
/// `smem` bytes of shared memory each that the device can hold at once (0: none).
int max_active_clusters(DType x, DType g, bool bwd, bool piped, int ctas, int threads, int64_t smem);

void launch_rows_reduce(const RowsArgs& a, cudaStream_t s);
void launch_wbar(const WbarArgs& a, cudaStream_t s);
void launch_rows(DType x, DType g, bool bwd, const RowArgs& a, cudaStream_t s);

}  // namespace kv::cecuda
