// CUDA cross-entropy over given logits, forward and backward, as reference/cross_entropy.hpp
// defines it, operation for operation (the _rn intrinsics keep nvcc from fusing what the
// definition rounds separately): z = x (+ b), or s*tanh(x/s) under softcap; m = max z;
// d = sum expf(z - m); lse = m + logf(d); then the loss or the gradient.
//
// A row of V logits is split into segments of block_v elements, one block each; the blocks
// of a row form a thread-block cluster (sm_90+) and exchange their partial max and sums
// through distributed shared memory: each block writes its partial into a slot, and after
// the cluster barrier every thread folds the slots in rank order, so every block holds the
// same bits. Inside a block, thread t takes 16-byte chunks t, t+T, ... of the segment and
// sums serially, then block_reduce's tree (kernels/cuda_rows.cuh). Each block keeps as much
// of its segment raw in shared memory between the passes as the plan gives room for and
// reads the rest again; the per-element transform is recomputed from the raw values in
// every pass. Rows past the grid are taken in a grid-stride loop.
#include <cooperative_groups.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "device/cuda_check.hpp"
#include "kernels/cross_entropy/cuda_launch.hpp"
#include "kernels/cross_entropy/cuda_row_parts.cuh"
#include "kernels/cuda_rows.cuh"

namespace kv::cecuda {

using namespace kv::rowcuda;

namespace {

/// Row r of the launch (its segment in this block, values from `src`): the loss or the
/// gradient, as the file's header says. Every block of the cluster takes the same branches.
/// Returns whether the row used the cluster's slots of parity `par` (not for an ignored
/// row written as zeros): the caller flips the parity after those rows only, so a block writes a set of
/// slots again only after the cluster passed a barrier of the row between. P: the launch is
/// plain (no bias, softcap, class weights, label smoothing or z-loss), which the compiler
/// then drops from the per-element work; the operations left are the same.
template <typename X, typename Y, bool BWD, bool P, class Src>
__device__ __forceinline__ bool process_row(const RowArgs& a, const Transform& tf, const Segment<kV<X>>& sg, int64_t r,
                                            unsigned rank, int par, const Src& src, Shared& sh) {
  constexpr int VX = kV<X>;
  Params q = a.q;
  if constexpr (P) q.weighted = false, q.ls = 0.0f, q.zl = 0.0f;
  const int C = a.ctas;
  const float V = static_cast<float>(q.v);  // exact: the host takes V <= 2^24
  const int64_t gr = a.row0 + r;
  const int64_t t = a.target[gr * a.target_stride];
  const bool ign = t == q.ignore_index;  // loss 0; gradient 0 * p_j under ignored_p, else 0
  if (ign && !(BWD && q.ignored_p)) {
    if constexpr (BWD) {
      const float zero[VX] = {};
      for (int lc = threadIdx.x; lc < sg.nch; lc += blockDim.x) store_n<Y, VX>(a.g, r, sg.j0(lc), sg.cnt(lc), zero);
    } else if (rank == 0 && threadIdx.x == 0) {
      if (a.row_loss) a.row_loss[gr] = 0.0f;
      else st_any(a.loss.base, a.loss.dtype, gr * a.loss.rs, 0.0f);
    }
    return false;
  }
  const bool bad = !ign && (t < 0 || t >= q.v);  // not a class: NaN, never a plausible value
  float zt = 0.0f;
  if (!BWD && !bad) {  // read before anything of the row is written
    float c[VX];
    load_chunk<X>(a.x, r, t, 1, c);
    zt = tf.z<P>(tf.cached<P>(c[0], t));
  }
  float m[1] = {src.template max_pass<P>()};
  block_reduce<MaxOp, 1>(m, sh.red);
  const float mx = cluster_fold<MaxOp>(m[0], &sh.slots[par][0], &sh.bcast[0], C);
  float d[1] = {0.0f};
  const bool sum_last = !BWD && !(q.ls > 0.0f);  // the forward's last pass without smoothing
  for (int lc = threadIdx.x; lc < sg.nch; lc += blockDim.x) {
    float c[VX];
    src.template chunk<P>(lc, c, sum_last);
    for_elems<VX>(sg.cnt(lc), [&](int i) {
      c[i] = expf(__fsub_rn(tf.z<P>(c[i]), mx));
      d[0] += c[i];
    });
  }
  if (sum_last) src.last_pass_done();
  block_sum<1>(d, sh.red);
  const float den = cluster_fold<SumOp>(d[0], &sh.slots[par][1], &sh.bcast[1], C);
  const float lse = __fadd_rn(mx, logf(den));
  const float wt = q.weighted && !bad && !ign ? ld_any(a.weight.base, a.weight.dtype, t * a.weight.cs) : 1.0f;
  if constexpr (!BWD) {
    float loss = __fsub_rn(lse, zt);
    if (q.weighted) loss = __fmul_rn(wt, loss);
    if (q.ls > 0.0f) {
      float s[1] = {0.0f};
      for (int lc = threadIdx.x; lc < sg.nch; lc += blockDim.x) {
        float c[VX];
        src.template chunk<P>(lc, c, true);
        const int64_t j0 = sg.j0(lc);
        for_elems<VX>(sg.cnt(lc), [&](int i) {
          const float dj = __fsub_rn(lse, tf.z<P>(c[i]));
          s[0] += q.weighted ? __fmul_rn(ld_any(a.weight.base, a.weight.dtype, (j0 + i) * a.weight.cs), dj) : dj;
        });
      }
      src.last_pass_done();
      block_sum<1>(s, sh.red);
      const float smooth = __fdiv_rn(cluster_fold<SumOp>(s[0], &sh.slots[par][2], &sh.bcast[2], C), V);
      loss = __fadd_rn(__fmul_rn(__fsub_rn(1.0f, q.ls), loss), __fmul_rn(q.ls, smooth));
    }
    if (q.zl > 0.0f) loss = __fadd_rn(loss, __fmul_rn(q.zl, __fmul_rn(lse, lse)));
    if (bad) loss = NAN;
    if (rank == 0 && threadIdx.x == 0) {
      if (a.row_loss) a.row_loss[gr] = loss;
      else st_any(a.loss.base, a.loss.dtype, gr * a.loss.rs, loss);
    }
  } else {
    const float dl = ld_any(a.dloss.base, a.dloss.dtype, q.reduction == 0 ? gr * a.dloss.rs : 0);
    float scale = q.reduction != 1 ? dl : (a.stats[1] > 0.0f ? __fdiv_rn(dl, a.stats[0]) : 0.0f);
    if (bad) scale = NAN;
    const float one_ls = __fsub_rn(1.0f, q.ls), inv_v = __fdiv_rn(1.0f, V);
    const float zlse2 = __fmul_rn(__fmul_rn(2.0f, q.zl), lse), wbar = q.weighted && q.ls > 0.0f ? a.stats[2] : 1.0f;
    const Divider div = Divider::of(den);
    for (int lc = threadIdx.x; lc < sg.nch; lc += blockDim.x) {
      float c[VX];
      src.template chunk<P>(lc, c, true);
      const int64_t j0 = sg.j0(lc);
      const int cnt = sg.cnt(lc);
      const int it = t >= j0 && t < j0 + VX ? static_cast<int>(t - j0) : -1;  // the target's place in the chunk
      float g[VX];
#pragma unroll
      for (int i = 0; i < VX; ++i) {
        const float pj = div(expf(__fsub_rn(tf.z<P>(c[i]), mx)));
        if (ign) {  // the definition's 0 * p_j: NaN where the row's softmax is
          g[i] = __fmul_rn(0.0f, pj);
          continue;
        }
        float gj = i == it ? __fsub_rn(pj, 1.0f) : pj;  // the definition's p_t - 1, as it rounds
        if (q.weighted) gj = __fmul_rn(wt, gj);
        if (q.ls > 0.0f) {
          float sm;
          if (q.weighted && i < cnt)
            sm = __fsub_rn(__fmul_rn(pj, wbar), __fdiv_rn(ld_any(a.weight.base, a.weight.dtype, (j0 + i) * a.weight.cs), V));
          else
            sm = __fsub_rn(pj, inv_v);
          gj = __fadd_rn(__fmul_rn(one_ls, gj), __fmul_rn(q.ls, sm));
        }
        if (q.zl > 0.0f) gj = __fadd_rn(gj, __fmul_rn(zlse2, pj));
        if (!P && tf.cap) gj = __fmul_rn(gj, __fsub_rn(1.0f, __fmul_rn(c[i], c[i])));
        g[i] = __fmul_rn(gj, scale);
      }
      store_n<Y, VX>(a.g, r, j0, cnt, g);
    }
    src.last_pass_done();
  }
  return true;
}

/// Whether the launch is plain (process_row's P).
__device__ __forceinline__ bool is_plain(const RowArgs& a) {
  return !a.bias.base && !(a.q.softcap > 0.0f) && !a.q.weighted && !(a.q.ls > 0.0f) && !(a.q.zl > 0.0f);
}

/// Rows r, r + clusters, ... per cluster (as many clusters as rows, or as the GPU holds for
/// aligned rows), read from global memory (StagedSource).
template <typename X, typename Y, bool BWD>
__global__ void __launch_bounds__(1024, 1) row_kernel_t(RowArgs a) {
  __shared__ Shared sh;
  const unsigned rank = cta_rank(a.ctas);
  const Segment<kV<X>> sg(rank, a.block_v, a.q.v);
  const Transform tf{a.bias, a.q.softcap, a.q.softcap > 0.0f};
  const int64_t nclus = gridDim.x / a.ctas;
  uint4* cache = reinterpret_cast<uint4*>(dyn_smem());
  const int ncache = static_cast<int>(a.cache_bytes / 16);
  const bool plain = is_plain(a);
  int par = 0;
  int filled = 0;
  for (int64_t r = blockIdx.x / a.ctas; r < a.rows; r += nclus) {
    const StagedSource<X> src{a, tf, sg, r, cache, ncache, &filled};
    const bool used = plain ? process_row<X, Y, BWD, true>(a, tf, sg, r, rank, par, src, sh)
                            : process_row<X, Y, BWD, false>(a, tf, sg, r, rank, par, src, sh);
    if (!used) filled = 0;  // an ignored row: its fill (if any) is not this row's
    par ^= used ? 1 : 0;
  }
  copy_async_wait_all();  // a fill for an ignored last row lands before the block leaves
  cluster_sync(a.ctas);  // no block leaves while another may still read its slots
}

/// As many clusters as the GPU holds, each taking rows r, r + clusters, ...: while a block
/// works on one row's segment in shared memory, the next row's segment is copied into the
/// other half asynchronously (cp.async, 16 bytes per thread and chunk; a last partial chunk
/// reads only its elements and zero-fills the rest). The rows must be 16-byte aligned.
template <typename X, typename Y, bool BWD>
__global__ void __launch_bounds__(1024, 1) piped_kernel_t(RowArgs a) {
  constexpr int VX = kV<X>;
  __shared__ Shared sh;
  const unsigned rank = cta_rank(a.ctas);
  const Segment<VX> sg(rank, a.block_v, a.q.v);
  const Transform tf{a.bias, a.q.softcap, a.q.softcap > 0.0f};
  const int64_t nclus = gridDim.x / a.ctas;
  uint4* raw = reinterpret_cast<uint4*>(dyn_smem());  // [2][sg.nch] chunks
  auto fetch = [&](int64_t row, int half) {
    const X* src = static_cast<const X*>(a.x.base) + row * a.x.rs;
    for (int lc = threadIdx.x; lc < sg.nch; lc += blockDim.x)
      copy_async16(raw + half * sg.nch + lc, src + sg.j0(lc), sg.cnt(lc) * static_cast<int>(sizeof(X)));
    copy_async_commit();
  };
  int64_t r = blockIdx.x / a.ctas;
  if (r < a.rows) fetch(r, 0);
  const bool plain = is_plain(a);
  int par = 0;
  for (int it = 0; r < a.rows; r += nclus, ++it) {
    const int cur = it & 1;
    if (r + nclus < a.rows) fetch(r + nclus, cur ^ 1);
    else copy_async_commit();  // an empty group keeps the count: the current row's is the one before
    copy_async_wait_all_but_one();
    __syncthreads();  // every thread's copies of the current row have landed
    const PipedSource<X> src{tf, sg, raw + cur * sg.nch};
    const bool used = plain ? process_row<X, Y, BWD, true>(a, tf, sg, r, rank, par, src, sh)
                            : process_row<X, Y, BWD, false>(a, tf, sg, r, rank, par, src, sh);
    par ^= used ? 1 : 0;
    __syncthreads();  // the half is read out before the next iteration refills it
  }
  cluster_sync(a.ctas);
}

__global__ void __launch_bounds__(kRowsThreads) rows_reduce_kernel(RowsArgs a) {
  __shared__ float red[64];
  __shared__ unsigned long long valid;
  if (threadIdx.x == 0) valid = 0;
  float v[2] = {0.0f, 0.0f};  // loss total, weight sum
  unsigned long long n = 0;
  for (int64_t r = threadIdx.x; r < a.rows; r += blockDim.x) {
    if (a.row_loss) v[0] += a.row_loss[r];
    const int64_t t = a.target[r * a.target_stride];
    if (t == a.q.ignore_index) continue;
    ++n;
    if (!a.q.weighted) v[1] += 1.0f;
    else v[1] += t >= 0 && t < a.q.v ? ld_any(a.weight.base, a.weight.dtype, t * a.weight.cs) : NAN;
  }
  __syncthreads();
  if (n) atomicAdd(&valid, n);
  block_sum<2>(v, red);  // its barriers order the atomics before the read below
  if (threadIdx.x != 0) return;
  a.stats[0] = v[1];
  a.stats[1] = valid > 0 ? 1.0f : 0.0f;
  if (!a.row_loss) return;
  const float out = a.q.reduction == 2 ? v[0] : (valid > 0 ? __fdiv_rn(v[0], v[1]) : a.q.empty_nan ? NAN : 0.0f);
  st_any(a.loss.base, a.loss.dtype, 0, out);
}

__global__ void __launch_bounds__(1024) wbar_kernel_t(WbarArgs a) {
  __shared__ float red[32];
  float total = 0.0f;
  for (int k = 0; k < a.ctas; ++k) {
    const int64_t s0 = k * a.block_v, len = a.v - s0 < a.block_v ? a.v - s0 : a.block_v;
    const int64_t nch = (len + a.chunk - 1) / a.chunk;
    float s[1] = {0.0f};
    for (int64_t lc = threadIdx.x; lc < nch; lc += blockDim.x)
      for (int64_t j = lc * a.chunk; j < len && j < (lc + 1) * a.chunk; ++j)
        s[0] += ld_any(a.weight.base, a.weight.dtype, (s0 + j) * a.weight.cs);
    block_sum<1>(s, red);
    total = k == 0 ? s[0] : total + s[0];
  }
  if (threadIdx.x == 0) a.stats[2] = __fdiv_rn(total, static_cast<float>(a.v));
}

/// f.template operator()<X, Y, BWD>() for the built combination.
template <class F>
void dispatch(DType x, DType g, bool bwd, F&& f) {
  if (!row_kernel_built(x, g, bwd)) throw HarnessError("cross-entropy kernel not built for these dtypes");
  if (!bwd) {
    if (x == DType::f32) return f.template operator()<float, float, false>();
    if (x == DType::f16) return f.template operator()<__half, __half, false>();
    return f.template operator()<__nv_bfloat16, __nv_bfloat16, false>();
  }
  if (x == DType::f32) {
    if (g == DType::f16) return f.template operator()<float, __half, true>();
    if (g == DType::bf16) return f.template operator()<float, __nv_bfloat16, true>();
    return f.template operator()<float, float, true>();
  }
  if (x == DType::f16) return f.template operator()<__half, __half, true>();
  return f.template operator()<__nv_bfloat16, __nv_bfloat16, true>();
}

/// The row kernel of a combination: pipelined or staged.
template <typename X, typename Y, bool BWD>
auto kernel_fn(bool piped) {
  return piped ? &piped_kernel_t<X, Y, BWD> : &row_kernel_t<X, Y, BWD>;
}

cudaLaunchConfig_t launch_config(int ctas, int threads, int64_t clusters, int64_t smem, cudaStream_t s,
                                 cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(clusters * ctas));
  cfg.blockDim = dim3(static_cast<unsigned>(threads));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = s;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(ctas);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = ctas > 1 ? 1 : 0;
  return cfg;
}

/// Clusters of `ctas` blocks of kernel k the device holds at once (blocks where ctas = 1).
template <class K>
int resident(K k, int ctas, int threads, int64_t smem) {
  int n = 0;
  KV_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  if (ctas == 1) {
    int per_sm = 0, dev = 0, sms = 0;
    KV_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, threads, static_cast<size_t>(smem)));
    KV_CUDA(cudaGetDevice(&dev));
    KV_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return per_sm * sms;
  }
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t cfg = launch_config(ctas, threads, 1, smem, nullptr, &attr);
  KV_CUDA(cudaOccupancyMaxActiveClusters(&n, k, &cfg));
  return n;
}

/// resident() remembered per kernel and launch shape (a launch must not wait on the query).
template <class K>
int resident_cached(K k, int ctas, int threads, int64_t smem) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int, int64_t>, int> seen;
  const auto key = std::make_tuple(reinterpret_cast<const void*>(k), ctas, threads, smem);
  std::lock_guard<std::mutex> lock(mu);
  auto it = seen.find(key);
  if (it == seen.end()) it = seen.emplace(key, resident(k, ctas, threads, smem)).first;
  return it->second;
}

}  // namespace

bool row_kernel_built(DType x, DType g, bool bwd) {
  if (x == DType::i32 || g == DType::i32) return false;
  return !bwd || g == x || x == DType::f32;
}

const void* row_kernel(DType x, DType g, bool bwd, bool piped) {
  const void* p = nullptr;
  dispatch(x, g, bwd, [&]<typename X, typename Y, bool B>() { p = reinterpret_cast<const void*>(kernel_fn<X, Y, B>(piped)); });
  return p;
}

const void* rows_kernel() { return reinterpret_cast<const void*>(&rows_reduce_kernel); }
const void* wbar_kernel() { return reinterpret_cast<const void*>(&wbar_kernel_t); }

int max_active_clusters(DType x, DType g, bool bwd, bool piped, int ctas, int threads, int64_t smem) {
  int n = 0;
  dispatch(x, g, bwd, [&]<typename X, typename Y, bool B>() { n = resident(kernel_fn<X, Y, B>(piped), ctas, threads, smem); });
  return n;
}

void launch_rows_reduce(const RowsArgs& a, cudaStream_t s) {
  rows_reduce_kernel<<<1, kRowsThreads, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
}

void launch_wbar(const WbarArgs& a, cudaStream_t s) {
  wbar_kernel_t<<<1, a.threads, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
}

void launch_rows(DType x, DType g, bool bwd, const RowArgs& a, cudaStream_t s) {
  if (a.rows == 0) return;
  dispatch(x, g, bwd, [&]<typename X, typename Y, bool B>() {
    // Pipelined where the rows allow 16-byte copies and the two halves fit; else staged.
    const bool piped = a.piped_bytes > 0 && a.x.vec;
    const auto k = kernel_fn<X, Y, B>(piped);
    const int64_t smem = piped ? a.piped_bytes : a.cache_bytes;
    int64_t clusters = std::min<int64_t>(a.rows, 2147483647 / a.ctas);
    // Aligned rows: as many clusters as the GPU holds, each taking rows in turn (pipelined,
    // or staged with the next row started during the last pass); else one per row.
    if (a.x.vec) clusters = std::min<int64_t>(clusters, std::max(1, resident_cached(k, a.ctas, a.threads, smem)));
    KV_CUDA(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = launch_config(a.ctas, a.threads, clusters, smem, s, &attr);
    KV_CUDA(cudaLaunchKernelEx(&cfg, k, a));
  });
}

}  // namespace kv::cecuda
