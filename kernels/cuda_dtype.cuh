// Device-side loads, stores and roundings for the storage dtypes. Stores round to
// nearest even (the __float2*_rn intrinsics); `rnd<T>` rounds a float to T's precision.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace kv::cuda {

enum DT : int { F32 = 0, F16 = 1, BF16 = 2 };

template <typename T>
__device__ __forceinline__ float ld(const T* p);
template <>
__device__ __forceinline__ float ld<float>(const float* p) { return *p; }
template <>
__device__ __forceinline__ float ld<__half>(const __half* p) { return __half2float(*p); }
template <>
__device__ __forceinline__ float ld<__nv_bfloat16>(const __nv_bfloat16* p) { return __bfloat162float(*p); }

template <typename T>
__device__ __forceinline__ T cvt(float v);
template <>
__device__ __forceinline__ float cvt<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half cvt<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 cvt<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/// One rounding of an exact double (e.g. a product of two storage values) to T.
template <typename T>
__device__ __forceinline__ float rnd_from_double(double v);
template <>
__device__ __forceinline__ float rnd_from_double<float>(double v) { return __double2float_rn(v); }
template <>
__device__ __forceinline__ float rnd_from_double<__half>(double v) { return __half2float(__double2half(v)); }
template <>
__device__ __forceinline__ float rnd_from_double<__nv_bfloat16>(double v) { return __bfloat162float(__double2bfloat16(v)); }

template <typename T>
__device__ __forceinline__ void st(T* p, float v) { *p = cvt<T>(v); }
template <typename T>
__device__ __forceinline__ float rnd(float v) {
  T t = cvt<T>(v);
  return ld<T>(&t);
}

/// Runtime-dtype access for tensors whose dtype is not a template parameter.
__device__ __forceinline__ float ld_any(const void* base, int dt, int64_t i) {
  if (dt == F32) return static_cast<const float*>(base)[i];
  if (dt == F16) return __half2float(static_cast<const __half*>(base)[i]);
  return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
}
__device__ __forceinline__ void st_any(void* base, int dt, int64_t i, float v) {
  if (dt == F32) static_cast<float*>(base)[i] = v;
  else if (dt == F16) static_cast<__half*>(base)[i] = __float2half_rn(v);
  else static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
}

}  // namespace kv::cuda
