// CUDA RMSNorm, forward and backward. One block per row (forward) or per chunk of rows
// (backward); a block of T = 32*num_warps threads sums a row as T serial runs followed by
// a shuffle tree within warps and a tree across warps (depth log2 T), which is the
// reduction shape the contract declares. The x dtype is a template parameter (it is also
// the compute dtype of mode none); other tensors are addressed with runtime dtypes.
#include "core/cuda/cuda_check.hpp"
#include "kernels/cuda_dtype.cuh"
#include "kernels/mutant.cuh"
#include "kernels/rms_norm/cuda_launch.hpp"

namespace kv::rmscuda {

using namespace kv::cuda;

namespace {

/// Rounds to the compute dtype in mode none; identity otherwise.
template <typename X>
__device__ __forceinline__ float cr(float v, bool none) {
  return none ? rnd<X>(v) : v;
}

/// Block-wide sum: shuffle tree in each warp, then across warps. Every lane returns the total.
template <typename X>
__device__ float block_sum(float v, bool none, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  for (int off = KV_MUTANT(cu_shfl_short) ? 8 : 16; off > 0; off >>= 1)
    v = cr<X>(v + __shfl_xor_sync(0xffffffffu, v, off), none);
  if (!KV_MUTANT(cu_barrier_war)) __syncthreads();  // red[] may still be read from the previous call
  if (lane == 0) red[warp] = v;
  if (!KV_MUTANT(cu_barrier_raw)) __syncthreads();
  v = lane < nw - KV_MUTANT(cu_last_warp) ? red[lane] : 0.0f;
  for (int off = 16; off > 0; off >>= 1) v = cr<X>(v + __shfl_xor_sync(0xffffffffu, v, off), none);
  return v;
}

template <typename X>
__global__ void fwd_kernel_t(FwdArgs a) {
  __shared__ float red[32];
  const bool none = a.mode == Mode::none, llama = a.mode == Mode::llama;
  for (int64_t row = blockIdx.x; row < a.rows - KV_MUTANT(cu_fwd_last_row); row += gridDim.x) {
    const X* xr = static_cast<const X*>(a.x.base) + row * a.x.rs;
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < a.n - KV_MUTANT(cu_sq_tail); j += blockDim.x) {
      float v = ld<X>(xr + j * a.x.cs);
      acc = none ? rnd<X>(acc + rnd<X>(v * v)) : acc + v * v;
    }
    float total = block_sum<X>(acc, none, red);
    float ms = cr<X>(total / static_cast<float>(a.n), none);
    float rstd = cr<X>(rsqrtf(cr<X>(ms + (KV_MUTANT(cu_eps_after_rsqrt) ? 0.0f : a.eps), none)), none);
    if (KV_MUTANT(cu_eps_after_rsqrt)) rstd = cr<X>(rstd + a.eps, none);
    if (threadIdx.x == 0) st_any(a.rstd.base, a.rstd.dtype, row * a.rstd.stride, rstd);
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) {
      const float w = ld_any(a.w.base, a.w.dtype, KV_MUTANT(cu_w_stride_ignored) ? j : j * a.w.stride);
      float wp = cr<X>(__fadd_rn(KV_MUTANT(cu_offset_dropped) ? 0.0f : a.offset, w), none);
      float xn = cr<X>(__fmul_rn(ld<X>(xr + j * a.x.cs), rstd), none);
      if (llama && !KV_MUTANT(cu_llama_unrounded)) xn = rnd<X>(xn);
      float yv = cr<X>(__fmul_rn(xn, wp), none);
      if (KV_MUTANT(cu_y_rz)) yv = rz_any(a.y.dtype, yv);
      st_any(a.y.base, a.y.dtype, row * a.y.rs + j * a.y.cs, yv);
    }
  }
}

/// m = dy * W' at (row, j), W' = offset + w in the compute dtype, m rounded per
/// m_rounding (one rounding of the exact product to x's dtype, or a compute-dtype
/// product); dy is returned too.
template <typename X>
__device__ __forceinline__ float grad_m(const BwdArgs& a, int64_t row, int64_t j, bool none, float& dyv) {
  const float wp = cr<X>(__fadd_rn(a.offset, ld_any(a.w.base, a.w.dtype, j * a.w.stride)), none);
  dyv = ld_any(a.dy.base, a.dy.dtype, row * a.dy.rs + j * a.dy.cs);
  if (KV_MUTANT(cu_m_double_rounding) && a.m_round_x) return rnd<X>(__fmul_rn(dyv, wp));
  return a.m_round_x && !KV_MUTANT(cu_m_rounding_ignored)
             ? rnd_from_double<X>(static_cast<double>(dyv) * static_cast<double>(wp))
             : cr<X>(__fmul_rn(dyv, wp), none);
}

template <typename X>
__global__ void bwd_kernel_t(BwdArgs a) {
  __shared__ float red[32];
  const bool none = a.mode == Mode::none, llama = a.mode == Mode::llama;
  const int64_t per = KV_MUTANT(cu_rows_per_program_floor) ? a.rows / a.partials : (a.rows + a.partials - 1) / a.partials;
  const int64_t r0 = blockIdx.x * per, r1 = min(a.rows, r0 + per);
  float* part = a.ws_partials + static_cast<int64_t>(blockIdx.x) * a.n;
  for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) part[j] = 0.0f;
  const X* xb = static_cast<const X*>(a.x.base);
  for (int64_t row = r0; row < r1; ++row) {
    const float r = ld_any(a.rstd.base, a.rstd.dtype, row * a.rstd.stride);
    float acc = 0.0f;
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) {
      float dyv;
      const float m = grad_m<X>(a, row, j, none, dyv);
      float xv = ld<X>(xb + row * a.x.rs + j * a.x.cs);
      acc = none ? rnd<X>(acc + rnd<X>(m * xv)) : acc + m * xv;
    }
    const float s = block_sum<X>(acc, none, red);
    const float r2 = cr<X>(__fmul_rn(r, r), none), r3 = KV_MUTANT(cu_c_rstd_squared) ? r2 : cr<X>(__fmul_rn(r2, r), none);
    const float c = cr<X>(__fmul_rn(r3, cr<X>(s / static_cast<float>(a.n), none)), none);
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) {
      // dy is read before dx is written: dx may live in dy's storage. m is recomputed
      // rather than kept: a row of any N needs no per-thread storage.
      float dyv;
      const float m = grad_m<X>(a, row, j, none, dyv);
      float xv = ld<X>(xb + row * a.x.rs + j * a.x.cs);
      float t = KV_MUTANT(cu_dw_no_rstd) ? xv : cr<X>(__fmul_rn(xv, r), none);
      if (llama) t = rnd<X>(t);
      part[j] = part[j] + cr<X>(dyv * t, none);  // dW accumulates in fp32 in every mode
      const float rm = cr<X>(__fmul_rn(r, m), none), cx = cr<X>(__fmul_rn(c, xv), none);
      float dx = cr<X>(KV_MUTANT(cu_dx_sign) ? rm + cx : rm - cx, none);
      st_any(a.dx.base, a.dx.dtype, row * a.dx.rs + j * a.dx.cs, dx);
    }
  }
  if (a.strategy == atomics)
    for (int64_t j = threadIdx.x; j < a.n; j += blockDim.x) atomicAdd(a.ws_acc + j, part[j]);
}

int64_t grid_for(int64_t rows) { return rows < 2147483647 ? rows : 2147483647; }

template <typename X>
void fwd_t(const FwdArgs& a, cudaStream_t s) {
  if (a.rows == 0) return;
  KV_MUTANT_UPLOAD(s);
  fwd_kernel_t<X><<<static_cast<unsigned>(grid_for(a.rows)), a.threads, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
}

template <typename X>
void bwd_t(BwdArgs a, cudaStream_t s) {
  KV_MUTANT_UPLOAD(s);
  if (KV_MUTANT(cu_dw_atomics) && a.strategy == fixed_partials) a.strategy = atomics;  // still claims run_to_run
  if (a.strategy == atomics) KV_CUDA(cudaMemsetAsync(a.ws_acc, 0, sizeof(float) * a.n, s));
  bwd_kernel_t<X><<<static_cast<unsigned>(a.partials), a.threads, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
  // Second stage (cuda_rows.cu): the G partials of each column summed serially in program order.
  const rowcuda::ColSum dw{a.ws_partials, a.ws_acc, a.dw.base, a.dw.dtype, a.dw.stride};
  rowcuda::launch_col_sums(&dw, 1, a.n, a.partials, a.strategy, s);
}

}  // namespace

int dt_code(DType d) { return d == DType::f32 ? F32 : d == DType::f16 ? F16 : BF16; }

void launch_fwd(DType x, const FwdArgs& a, cudaStream_t s) {
  if (x == DType::f32) fwd_t<float>(a, s);
  else if (x == DType::f16) fwd_t<__half>(a, s);
  else fwd_t<__nv_bfloat16>(a, s);
}

void launch_bwd(DType x, const BwdArgs& a, cudaStream_t s) {
  if (x == DType::f32) bwd_t<float>(a, s);
  else if (x == DType::f16) bwd_t<__half>(a, s);
  else bwd_t<__nv_bfloat16>(a, s);
}

const void* fwd_kernel(DType x) {
  if (x == DType::f32) return reinterpret_cast<const void*>(&fwd_kernel_t<float>);
  if (x == DType::f16) return reinterpret_cast<const void*>(&fwd_kernel_t<__half>);
  return reinterpret_cast<const void*>(&fwd_kernel_t<__nv_bfloat16>);
}

const void* bwd_kernel(DType x) {
  if (x == DType::f32) return reinterpret_cast<const void*>(&bwd_kernel_t<float>);
  if (x == DType::f16) return reinterpret_cast<const void*>(&bwd_kernel_t<__half>);
  return reinterpret_cast<const void*>(&bwd_kernel_t<__nv_bfloat16>);
}

}  // namespace kv::rmscuda
