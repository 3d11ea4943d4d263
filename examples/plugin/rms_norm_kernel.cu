// The example plugin's CUDA rms_norm.fwd: one block of T = 32*num_warps threads per row.
// Each thread sums the squares of columns tid, tid+T, ... serially (fmaf, fp32); warps then
// add their lanes by a shuffle tree (depth 5) and the warp sums meet in a shared-memory
// tree (depth log2 num_warps): serial ceil(N/T), depth log2 T, as the contract says.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "rms_norm_kernel.h"

namespace kvp {

namespace {

template <typename T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f32<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_f32<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

/// RN to T and back: llama's mandated rounding of x * rstd to x's dtype.
template <typename T>
__device__ __forceinline__ float round_to(float v);
template <>
__device__ __forceinline__ float round_to<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float round_to<__half>(float v) {
  return __half2float(__float2half_rn(v));
}
template <>
__device__ __forceinline__ float round_to<__nv_bfloat16>(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

// w and y take their dtypes at run time (a uniform branch), so only x's dtype multiplies
// the kernels compiled per architecture.
__device__ __forceinline__ float load_any(const void* p, int dt, int64_t i) {
  if (dt == KV_F16) return __half2float(static_cast<const __half*>(p)[i]);
  if (dt == KV_BF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

__device__ __forceinline__ void store_any(void* p, int dt, int64_t i, float v) {
  if (dt == KV_F16)
    static_cast<__half*>(p)[i] = __float2half_rn(v);
  else if (dt == KV_BF16)
    static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v);
  else
    static_cast<float*>(p)[i] = v;
}

// __launch_bounds__(1024): every num_warps up to 32 fits the register file.
template <typename X>
__global__ void __launch_bounds__(1024) rms_norm_fwd_kernel(RmsFwdArgs a) {
  __shared__ float warp_sum[32];
  __shared__ float row_rstd;
  const int tid = static_cast<int>(threadIdx.x), T = static_cast<int>(blockDim.x);
  const int lane = tid & 31, warp = tid >> 5, nw = T >> 5;
  for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const X* x = static_cast<const X*>(a.x) + row_offset(a, a.x_lead, r);
    float s = 0.0f;
    for (int64_t j = tid; j < a.n; j += T) {
      const float v = to_f32(x[j * a.x_col]);
      s = fmaf(v, v, s);  // explicit, so the bits do not hang on nvcc's contraction choice
    }
    for (int o = 16; o > 0; o >>= 1) s = __fadd_rn(s, __shfl_down_sync(0xffffffffu, s, o));
    if (lane == 0) warp_sum[warp] = s;
    __syncthreads();
    for (int width = nw >> 1; width > 0; width >>= 1) {
      if (tid < width) warp_sum[tid] = __fadd_rn(warp_sum[tid], warp_sum[tid + width]);
      __syncthreads();
    }
    if (tid == 0) {
      // n <= 2^24 (checked), so float(n) is exact and this is RN(sum / N).
      const float ms = __fdiv_rn(warp_sum[0], static_cast<float>(a.n));
      const float rstd = rsqrtf(__fadd_rn(ms, a.eps));  // CUDA: max 2 ulp
      row_rstd = rstd;
      a.rstd[row_offset(a, a.r_lead, r)] = rstd;
    }
    __syncthreads();
    const float rstd = row_rstd;
    char* y = static_cast<char*>(a.y);
    const int64_t y_row = row_offset(a, a.y_lead, r);
    for (int64_t j = tid; j < a.n; j += T) {
      const float wp = __fadd_rn(a.offset, load_any(a.w, a.w_dt, j * a.w_col));  // W' in fp32
      float t = __fmul_rn(to_f32(x[j * a.x_col]), rstd);
      if (a.mode == kLlama) t = round_to<X>(t);
      store_any(y, a.y_dt, y_row + j * a.y_col, __fmul_rn(t, wp));
    }
    __syncthreads();  // warp_sum and row_rstd are reused by this block's next row
  }
}

template <typename X>
cudaError_t launch_t(const RmsFwdArgs& a, int threads, cudaStream_t s) {
  const int64_t max_grid = 0x7fffffff;
  const unsigned grid = static_cast<unsigned>(a.rows < max_grid ? a.rows : max_grid);
  rms_norm_fwd_kernel<X><<<grid, static_cast<unsigned>(threads), 0, s>>>(a);
  return cudaGetLastError();
}

}  // namespace

int rms_norm_fwd_cuda(const RmsFwdArgs& a, int threads, void* stream, char* msg, size_t cap) {
  if (a.rows == 0) return KV_OK;  // nothing to compute; a 0-block grid is a launch error
  // This plugin links its own (static) CUDA runtime: an error left in its state by an
  // earlier call is not this launch's.
  (void)cudaGetLastError();
  cudaStream_t s = static_cast<cudaStream_t>(stream);
  cudaError_t e = a.x_dt == KV_F16    ? launch_t<__half>(a, threads, s)
                  : a.x_dt == KV_BF16 ? launch_t<__nv_bfloat16>(a, threads, s)
                                      : launch_t<float>(a, threads, s);
  if (e == cudaSuccess) return KV_OK;
  if (msg && cap)
    snprintf(msg, cap, "rms_norm_fwd_kernel launch (%d threads, %lld rows): %s: %s", threads,
             static_cast<long long>(a.rows), cudaGetErrorName(e), cudaGetErrorString(e));
  return KV_ERROR;
}

}  // namespace kvp
