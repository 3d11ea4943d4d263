// Mutation points in device code (core/mutant.hpp): in the kverify-mutate build a .cu that
// includes this holds its own __constant__ copy of the active mutant, which
// KV_MUTANT_UPLOAD(stream) sets before its launches. In normal builds both are nothing.
#pragma once
#include "core/mutant.hpp"
#include "kernels/cuda_dtype.cuh"

#ifdef KV_MUTANTS
#include "device/cuda_check.hpp"
static __constant__ int kv_dev_mutant;
#define KV_MUTANT_UPLOAD(stream)                                                                          \
  KV_CUDA(cudaMemcpyToSymbolAsync(kv_dev_mutant, &::kv::g_mutant, sizeof(int), 0, cudaMemcpyHostToDevice, \
                                  stream))
#else
#define KV_MUTANT_UPLOAD(stream) ((void)0)
#endif

namespace kv::cuda {

/// v rounded toward zero to the runtime dtype dt (a mutant's store; unused otherwise).
__device__ __forceinline__ float rz_any(int dt, float v) {
  if (dt == F16) return __half2float(__float2half_rz(v));
  if (dt == BF16) return __bfloat162float(__float2bfloat16_rz(v));
  return v;
}

}  // namespace kv::cuda
