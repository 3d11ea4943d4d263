// CUDA SwiGLU and GeGLU (tanh approximation), forward and backward: one thread per element
// (grid-stride, 64-bit indices), every operation in fp32 in the order reference/swiglu.hpp
// and reference/geglu.hpp define (nvcc may fuse a multiply and an add: the contract says
// so), expf/tanhf from CUDA's math library, IEEE division.
#include "core/cuda/cuda_check.hpp"
#include "kernels/cuda_dtype.cuh"
#include "kernels/glu/cuda_launch.hpp"

namespace kv::glucuda {

using namespace kv::cuda;

namespace {

__device__ __forceinline__ float sigmoid(float a) {
  if (a < -88.0f) {  // exp(-a) would overflow: the reference's exp(a) / (1 + exp(a))
    const float e = expf(a);
    return e / (1.0f + e);
  }
  return 1.0f / (1.0f + expf(-a));
}

__device__ __forceinline__ float gelu_tanh_u(float a) {
  const float a3 = (a * a) * a;
  return tanhf(0.7978845608028654f * (a + 0.044715f * a3));
}

template <typename X, bool Geglu, bool Bwd>
__global__ void glu_kernel(Args g) {
  const int64_t total = g.rows * g.n;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / g.n, j = i % g.n;
    auto at = [&](const Mat& m) { return static_cast<X*>(m.base) + r * m.rs + j * m.cs; };
    const float a = ld<X>(at(g.a)), b = ld<X>(at(g.b));
    if constexpr (!Bwd) {
      float f;
      if constexpr (Geglu) f = (0.5f * a) * (1.0f + gelu_tanh_u(a));
      else f = a * sigmoid(a);
      *at(g.c) = cvt<X>(f * b);
    } else {
      const float dc = ld<X>(at(g.dc));
      if constexpr (Geglu) {
        const float th = gelu_tanh_u(a);
        *at(g.db) = cvt<X>(dc * ((0.5f * a) * (1.0f + th)));
        const float t1 = 0.5f * (1.0f + th);
        const float dth = 1.0f - th * th;
        const float poly = 0.7978845608028654f * (1.0f + 0.134145f * (a * a));
        const float t2 = ((0.5f * a) * dth) * poly;
        *at(g.da) = cvt<X>((dc * b) * (t1 + t2));
      } else {
        const float sig = sigmoid(a);
        *at(g.db) = cvt<X>(dc * (a * sig));
        const float inner = 1.0f + a * (1.0f - sig);
        *at(g.da) = cvt<X>((dc * b) * (sig * inner));
      }
    }
  }
}

template <typename X>
const void* kernel_t(bool geglu, bool bwd) {
  if (geglu) return bwd ? reinterpret_cast<const void*>(&glu_kernel<X, true, true>)
                        : reinterpret_cast<const void*>(&glu_kernel<X, true, false>);
  return bwd ? reinterpret_cast<const void*>(&glu_kernel<X, false, true>)
             : reinterpret_cast<const void*>(&glu_kernel<X, false, false>);
}

template <typename X>
void launch_t(bool geglu, bool bwd, const Args& a, cudaStream_t s) {
  const int64_t total = a.rows * a.n;
  if (total == 0) return;
  int64_t blocks = (total + a.threads - 1) / a.threads;
  if (blocks > 65535LL * 32) blocks = 65535LL * 32;  // grid-stride covers the rest
  const unsigned grid = static_cast<unsigned>(blocks);
  if (geglu && bwd) glu_kernel<X, true, true><<<grid, a.threads, 0, s>>>(a);
  else if (geglu) glu_kernel<X, true, false><<<grid, a.threads, 0, s>>>(a);
  else if (bwd) glu_kernel<X, false, true><<<grid, a.threads, 0, s>>>(a);
  else glu_kernel<X, false, false><<<grid, a.threads, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
}

}  // namespace

void launch(DType x, bool geglu, bool bwd, const Args& a, cudaStream_t s) {
  if (x == DType::f32) launch_t<float>(geglu, bwd, a, s);
  else if (x == DType::f16) launch_t<__half>(geglu, bwd, a, s);
  else launch_t<__nv_bfloat16>(geglu, bwd, a, s);
}

const void* kernel(DType x, bool geglu, bool bwd) {
  if (x == DType::f32) return kernel_t<float>(geglu, bwd);
  if (x == DType::f16) return kernel_t<__half>(geglu, bwd);
  return kernel_t<__nv_bfloat16>(geglu, bwd);
}

}  // namespace kv::glucuda
