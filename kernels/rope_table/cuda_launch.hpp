// Host-side launch interface of the CUDA rope_table kernel (cuda_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace kv::ropetablecuda {

/// rope_table: positions (S) i32 and inv_freq (D/2) -> cos, sin (S, D): angle =
/// RN_fp32(pos * inv_freq[i]) (positions exact in fp32: |pos| <= 2^24, which the op
/// checks), cosf/sinf of it, each written to both elements of pair i. Strides in elements,
/// dtypes as kv::cuda::DT.
struct TableArgs {
  const int32_t* pos;
  int64_t pos_s;
  const void* inv;
  int inv_dtype;
  int64_t inv_s;
  void* cos;
  int cos_dtype;
  int64_t cos_rs, cos_cs;
  void* sin;
  int sin_dtype;
  int64_t sin_rs, sin_cs;
  int64_t s, d;
  int interleaved;
  int threads;
};

void launch_table(const TableArgs& a, cudaStream_t s);
const void* table_kernel();

}  // namespace kv::ropetablecuda
