// Host-side launch interface of the CUDA RMSNorm kernels (kernels in cuda_kernels.cu).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.hpp"
#include "kernels/cuda_rows.hpp"

namespace kv::rmscuda {

enum Mode : int { llama = 0, gemma = 1, none = 2 };
using rowcuda::atomics;  // dW strategies, shared with layer_norm (rowcuda::DwStrategy)
using rowcuda::fixed_partials;
using rowcuda::per_sm;

/// A [rows, n] view: element (r, j) at base + r*rs + j*cs (elements).
struct Mat {
  void* base;
  int dtype;  // kv::cuda::DT
  int64_t rs, cs;
};
struct Vec {
  void* base;
  int dtype;
  int64_t stride;
};

struct FwdArgs {
  Mat x, y;
  Vec w, rstd;
  int64_t rows, n;
  int mode;
  float eps, offset;
  int threads;
};

struct BwdArgs {
  Mat dy, x, dx;
  Vec w, rstd, dw;
  int64_t rows, n;
  int mode;
  bool m_round_x;
  float offset;
  int threads;
  int strategy;
  int64_t partials;    // G: programs, each summing a contiguous chunk of rows
  float* ws_partials;  // [G][n] fp32
  float* ws_acc;       // [n] fp32 (atomics)
};

int dt_code(DType d);
void launch_fwd(DType x, const FwdArgs& a, cudaStream_t s);
void launch_bwd(DType x, const BwdArgs& a, cudaStream_t s);
/// Kernel function pointers for launch validation.
const void* fwd_kernel(DType x);
const void* bwd_kernel(DType x);

}  // namespace kv::rmscuda
