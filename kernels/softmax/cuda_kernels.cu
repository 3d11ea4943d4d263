// CUDA row softmax, forward and backward, as reference/softmax.hpp defines it: one block
// per row (grid-stride past 2^31-1 rows), x's dtype a template parameter, fp32 arithmetic.
// fwd: m = max x (exact), e_j = expf(x_j - m), d = sum e_j (the block's sum shape,
// cuda_rows.cuh), y_j = e_j / d (IEEE division). bwd: t = sum dy_j*y_j, dx_j = y_j*(dy_j - t).
// The row is read from global memory once: shared memory keeps it (as fp32) between the
// passes where it fits the budget; otherwise the later passes read it again.
#include "core/cuda/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/softmax/cuda_launch.hpp"

namespace kv::smcuda {

using namespace kv::rowcuda;

namespace {

template <typename X>
__global__ void __launch_bounds__(1024) fwd_kernel(Args a) {
  constexpr int V = kV<X>;
  __shared__ float red[32];
  float4* cache = dyn_smem();
  const bool cached = a.cache_bytes > 0;
  const int64_t nch = (a.n + V - 1) / V;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      float v[V];
      load_chunk<X>(a.x, row, c * V, cnt, v);
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (i < cnt) m = fmaxf(m, v[i]);
      if (cached) cache_put<V>(cache, nch, 0, c, v);
    }
    m = block_max(m, red);
    float d[1] = {0.0f};
    for (int64_t c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      float v[V];
      if (cached) cache_get<V>(cache, nch, 0, c, v);
      else load_chunk<X>(a.x, row, c * V, cnt, v);
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (i < cnt) {
          v[i] = expf(v[i] - m);
          d[0] += v[i];
        }
      if (cached) cache_put<V>(cache, nch, 0, c, v);
    }
    block_sum<1>(d, red);
    for (int64_t c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      float v[V];
      if (cached) {
        cache_get<V>(cache, nch, 0, c, v);
      } else {
        load_chunk<X>(a.x, row, c * V, cnt, v);  // y may share x's storage: read before written
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = expf(v[i] - m);
      }
#pragma unroll
      for (int i = 0; i < V; ++i) v[i] = __fdiv_rn(v[i], d[0]);
      store_chunk<X>(a.y, row, c * V, cnt, v);
    }
  }
}

template <typename X>
__global__ void __launch_bounds__(1024) bwd_kernel(Args a) {
  constexpr int V = kV<X>;
  __shared__ float red[32];
  float4* cache = dyn_smem();
  const bool cached = a.cache_bytes > 0;
  const int64_t nch = (a.n + V - 1) / V;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    float t[1] = {0.0f};
    for (int64_t c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      float dy[V], y[V];
      load_chunk<X>(a.dy, row, c * V, cnt, dy);
      load_chunk<X>(a.y, row, c * V, cnt, y);
#pragma unroll
      for (int i = 0; i < V; ++i)
        if (i < cnt) t[0] += dy[i] * y[i];
      if (cached) {
        cache_put<V>(cache, nch, 0, c, dy);
        cache_put<V>(cache, nch, 1, c, y);
      }
    }
    block_sum<1>(t, red);
    for (int64_t c = threadIdx.x; c < nch; c += blockDim.x) {
      const int cnt = chunk_count<V>(a.n, c);
      float dy[V], y[V], dx[V];
      if (cached) {
        cache_get<V>(cache, nch, 0, c, dy);
        cache_get<V>(cache, nch, 1, c, y);
      } else {  // dx may share dy's or y's storage: both read before dx is written
        load_chunk<X>(a.dy, row, c * V, cnt, dy);
        load_chunk<X>(a.y, row, c * V, cnt, y);
      }
#pragma unroll
      for (int i = 0; i < V; ++i) dx[i] = y[i] * (dy[i] - t[0]);
      store_chunk<X>(a.dx, row, c * V, cnt, dx);
    }
  }
}

template <typename X>
const void* kernel_t(bool bwd) {
  return bwd ? reinterpret_cast<const void*>(&bwd_kernel<X>) : reinterpret_cast<const void*>(&fwd_kernel<X>);
}

template <typename X>
void launch_t(bool bwd, const Args& a, cudaStream_t s) {
  if (a.rows == 0) return;
  const size_t smem = static_cast<size_t>(a.cache_bytes);
  if (bwd) bwd_kernel<X><<<grid_rows(a.rows), a.threads, smem, s>>>(a);
  else fwd_kernel<X><<<grid_rows(a.rows), a.threads, smem, s>>>(a);
  KV_CUDA_LAUNCHED();
}

}  // namespace

void launch(DType x, bool bwd, const Args& a, cudaStream_t s) {
  if (x == DType::f32) launch_t<float>(bwd, a, s);
  else if (x == DType::f16) launch_t<__half>(bwd, a, s);
  else launch_t<__nv_bfloat16>(bwd, a, s);
}

const void* kernel(DType x, bool bwd) {
  if (x == DType::f32) return kernel_t<float>(bwd);
  if (x == DType::f16) return kernel_t<__half>(bwd);
  return kernel_t<__nv_bfloat16>(bwd);
}

}  // namespace kv::smcuda
