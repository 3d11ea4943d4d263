// CUDA row softmax, forward and backward, as reference/softmax.hpp defines it: a block per
// R rows (R = 1 or 2: their loads in flight together, one reduction for all; grid-stride
// past 2^31-1 blocks), x's dtype a template parameter, fp32 arithmetic.
// fwd: m = max x (exact), e_j = expf(x_j - m), d = sum e_j (the block's sum shape,
// cuda_rows.cuh), y_j = e_j / d (IEEE division). bwd: t = sum dy_j*y_j, dx_j = y_j*(dy_j - t).
// The rows are read from global memory once: shared memory keeps them (as fp32) between
// the passes where they fit the budget; otherwise the later passes read them again.
#include "core/cuda/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/softmax/cuda_launch.hpp"

namespace kv::smcuda {

using namespace kv::rowcuda;

namespace {

template <typename X, int R>
__global__ void __launch_bounds__(1024 / R, R == 1 ? 1 : 2) fwd_kernel(Args a) {
  constexpr int V = kV<X>;
  __shared__ float red[R * 32];
  float4* cache = dyn_smem();  // row k of the group: cache tensor k
  const bool cached = a.cache_bytes > 0;
  const int nch = chunks<V>(a.n);
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * R; g < a.rows; g += static_cast<int64_t>(gridDim.x) * R) {
    const RowGroup<R> rg(g, a.rows, a.n);
    float m[R];
#pragma unroll
    for (int k = 0; k < R; ++k) m[k] = -INFINITY;
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      uint4 raw[R];
#pragma unroll
      for (int k = 0; k < R; ++k) raw[k] = load_raw<X>(a.x, rg.row[k], static_cast<int64_t>(c) * V, cnt);
#pragma unroll
      for (int k = 0; k < R; ++k) {
        float v[V];
        unpack_all<X>(raw[k], v);
        for_elems<V>(cnt, [&](int i) { m[k] = fmaxf(m[k], v[i]); });
        if (cached) cache_put<V>(cache, nch, k, c, v);
      }
    }
    block_reduce<MaxOp, R>(m, red);
    float d[R];
#pragma unroll
    for (int k = 0; k < R; ++k) d[k] = 0.0f;
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
#pragma unroll
      for (int k = 0; k < R; ++k) {
        float v[V];
        if (cached) cache_get<V>(cache, nch, k, c, v);
        else load_chunk<X>(a.x, rg.row[k], static_cast<int64_t>(c) * V, cnt, v);
        for_elems<V>(cnt, [&](int i) {
          v[i] = expf(v[i] - m[k]);
          d[k] += v[i];
        });
        if (cached) cache_put<V>(cache, nch, k, c, v);
      }
    }
    block_sum<R>(d, red);
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
#pragma unroll
      for (int k = 0; k < R; ++k) {
        if (!rg.ok[k]) continue;
        float v[V];
        if (cached) {
          cache_get<V>(cache, nch, k, c, v);
        } else {
          load_chunk<X>(a.x, rg.row[k], static_cast<int64_t>(c) * V, cnt, v);  // y may share x's storage: read before written
#pragma unroll
          for (int i = 0; i < V; ++i) v[i] = expf(v[i] - m[k]);
        }
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = __fdiv_rn(v[i], d[k]);
        store_chunk<X>(a.y, rg.row[k], static_cast<int64_t>(c) * V, cnt, v);
      }
    }
  }
}

template <typename X, int R>
__global__ void __launch_bounds__(1024 / R, R == 1 ? 1 : 2) bwd_kernel(Args a) {
  constexpr int V = kV<X>;
  __shared__ float red[R * 32];
  float4* cache = dyn_smem();  // row k of the group: dy as cache tensor 2k, y as 2k+1
  const bool cached = a.cache_bytes > 0;
  const int nch = chunks<V>(a.n);
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * R; g < a.rows; g += static_cast<int64_t>(gridDim.x) * R) {
    const RowGroup<R> rg(g, a.rows, a.n);
    float t[R];
#pragma unroll
    for (int k = 0; k < R; ++k) t[k] = 0.0f;
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      uint4 rdy[R], ry[R];
#pragma unroll
      for (int k = 0; k < R; ++k) {
        rdy[k] = load_raw<X>(a.dy, rg.row[k], static_cast<int64_t>(c) * V, cnt);
        ry[k] = load_raw<X>(a.y, rg.row[k], static_cast<int64_t>(c) * V, cnt);
      }
#pragma unroll
      for (int k = 0; k < R; ++k) {
        float dy[V], y[V];
        unpack_all<X>(rdy[k], dy);
        unpack_all<X>(ry[k], y);
        for_elems<V>(cnt, [&](int i) { t[k] += dy[i] * y[i]; });
        if (cached) {
          cache_put<V>(cache, nch, 2 * k, c, dy);
          cache_put<V>(cache, nch, 2 * k + 1, c, y);
        }
      }
    }
    block_sum<R>(t, red);
    for (int c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
#pragma unroll
      for (int k = 0; k < R; ++k) {
        if (!rg.ok[k]) continue;
        float dy[V], y[V], dx[V];
        if (cached) {
          cache_get<V>(cache, nch, 2 * k, c, dy);
          cache_get<V>(cache, nch, 2 * k + 1, c, y);
        } else {  // dx may share dy's or y's storage: both read before dx is written
          load_chunk<X>(a.dy, rg.row[k], static_cast<int64_t>(c) * V, cnt, dy);
          load_chunk<X>(a.y, rg.row[k], static_cast<int64_t>(c) * V, cnt, y);
        }
#pragma unroll
        for (int i = 0; i < V; ++i) dx[i] = y[i] * (dy[i] - t[k]);
        store_chunk<X>(a.dx, rg.row[k], static_cast<int64_t>(c) * V, cnt, dx);
      }
    }
  }
}

template <typename X, int R>
const void* kernel_r(bool bwd) {
  return bwd ? reinterpret_cast<const void*>(&bwd_kernel<X, R>) : reinterpret_cast<const void*>(&fwd_kernel<X, R>);
}

template <typename X>
const void* kernel_t(bool bwd, int rows_per_block) {
  return rows_per_block == 2 ? kernel_r<X, 2>(bwd) : kernel_r<X, 1>(bwd);
}

template <typename X, int R>
void launch_r(bool bwd, const Args& a, cudaStream_t s) {
  const unsigned grid = grid_rows((a.rows + R - 1) / R);
  const size_t smem = static_cast<size_t>(a.cache_bytes);
  if (bwd) bwd_kernel<X, R><<<grid, a.threads, smem, s>>>(a);
  else fwd_kernel<X, R><<<grid, a.threads, smem, s>>>(a);
  KV_CUDA_LAUNCHED();
}

template <typename X>
void launch_t(bool bwd, const Args& a, cudaStream_t s) {
  if (a.rows == 0) return;
  if (a.rows_per_block == 2) launch_r<X, 2>(bwd, a, s);
  else launch_r<X, 1>(bwd, a, s);
}

}  // namespace

void launch(DType x, bool bwd, const Args& a, cudaStream_t s) {
  if (x == DType::f32) launch_t<float>(bwd, a, s);
  else if (x == DType::f16) launch_t<__half>(bwd, a, s);
  else launch_t<__nv_bfloat16>(bwd, a, s);
}

const void* kernel(DType x, bool bwd, int rows_per_block) {
  if (x == DType::f32) return kernel_t<float>(bwd, rows_per_block);
  if (x == DType::f16) return kernel_t<__half>(bwd, rows_per_block);
  return kernel_t<__nv_bfloat16>(bwd, rows_per_block);
}

}  // namespace kv::smcuda
