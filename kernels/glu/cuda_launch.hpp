// Host-side launch interface of the CUDA SwiGLU/GeGLU kernels (cuda_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"

namespace kv::glucuda {

/// A [rows, n] view: element (r, j) at base + r*rs + j*cs (elements).
struct Mat {
  void* base;
  int64_t rs, cs;
};

/// fwd: c = f(a) b from a, b. bwd: da, db from dc, a, b. Every tensor in the x dtype.
struct Args {
  Mat a, b, c, dc, da, db;
  int64_t rows, n;
  int threads;
  int vec = 0;  // set by launch: every tensor's rows contiguous and 16-byte aligned
};

void launch(DType x, bool geglu, bool bwd, const Args& a, cudaStream_t s);
/// The kernel's function pointer, for launch validation.
const void* kernel(DType x, bool geglu, bool bwd);

}  // namespace kv::glucuda
