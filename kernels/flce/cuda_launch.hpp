// Host-side launch interface of FLCE's own CUDA kernels (cuda_kernels.cu): the copies of its
// fp32 (or bf16) sums into the outputs, and dbias's column sums.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda_rows.hpp"

namespace kv::flcecuda {

using rowcuda::Mat;

/// dst (rows x cols, any float dtype, strides rs/cs) = src rounded once (to nearest even)
/// to dst's dtype; src holds rows of ld elements, fp32 or bf16 (src_dtype, a DT code),
/// 16-byte aligned.
struct CopyArgs {
  const void* src;
  int src_dtype;
  int64_t ld;
  Mat dst;
  int64_t rows, cols;
};

/// acc[j] = (first ? 0 : acc[j]) + (the serial sum over rows r of g[r][j]), g's rows of ld
/// elements of dtype g_dtype (a DT code).
struct ColSumArgs {
  const void* g;
  int g_dtype;
  int64_t ld;
  float* acc;
  int64_t rows, cols;
  bool first;
};

void launch_copy(const CopyArgs& a, cudaStream_t s);
void launch_colsum(const ColSumArgs& a, cudaStream_t s);

}  // namespace kv::flcecuda
