// FLCE's matrix products through cuBLAS (cublasGemmEx_64: 64-bit sizes and strides), on the
// caller's stream and workspace. bf16/fp16 operands run on tensor cores with fp32 sums
// (CUBLAS_COMPUTE_32F); fp32 operands as IEEE fp32 products (CUBLAS_COMPUTE_32F_PEDANTIC:
// no TF32 rounding of the operands).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace kv::flcecuda {

/// A column-major operand: its storage, dtype, leading dimension, and whether it is
/// transposed in the product.
struct Operand {
  const void* p;
  DType t;
  int64_t ld;
  bool trans;
};

/// C (m x n, column-major, dtype ct, ldc) = op(A) op(B) + beta C, the sums over k.
void gemm(cudaStream_t s, void* ws, size_t ws_bytes, int64_t m, int64_t n, int64_t k, const Operand& a,
          const Operand& b, float beta, void* c, DType ct, int64_t ldc);

/// The workspace cuBLAS gets for the products (NVIDIA's recommendation on Hopper).
constexpr size_t kGemmWorkspace = size_t(32) << 20;

}  // namespace kv::flcecuda
