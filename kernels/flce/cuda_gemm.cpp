// FLCE's matrix products through cuBLAS: one handle per host thread, created once (its
// creation allocates; a launch must not), bound to the caller's stream and workspace.
#include "kernels/flce/cuda_gemm.hpp"

#include <cublas_v2.h>

#include <string>

#include "core/error.hpp"

namespace kv::flcecuda {

namespace {

void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw DeviceError(std::string("cuBLAS ") + what + " failed: " + cublasGetStatusString(s), false);
}

struct Handle {
  cublasHandle_t h = nullptr;
  Handle() { check(cublasCreate(&h), "cublasCreate"); }
  ~Handle() {
    if (h) cublasDestroy(h);  // at thread exit; the context may already be gone
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

cudaDataType cuda_type(DType t) {
  switch (t) {
    case DType::f32: return CUDA_R_32F;
    case DType::f16: return CUDA_R_16F;
    case DType::bf16: return CUDA_R_16BF;
    default: throw HarnessError("FLCE products take fp32, fp16 or bf16 operands");
  }
}

}  // namespace

void gemm(cudaStream_t s, void* ws, size_t ws_bytes, int64_t m, int64_t n, int64_t k, const Operand& a,
          const Operand& b, float beta, void* c, DType ct, int64_t ldc) {
  thread_local Handle handle;
  cublasHandle_t h = handle.h;
  check(cublasSetStream(h, s), "cublasSetStream");
  check(cublasSetWorkspace(h, ws, ws_bytes), "cublasSetWorkspace");
  const float alpha = 1.0f;
  const cublasComputeType_t compute = a.t == DType::f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  check(cublasGemmEx_64(h, a.trans ? CUBLAS_OP_T : CUBLAS_OP_N, b.trans ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &alpha, a.p,
                        cuda_type(a.t), a.ld, b.p, cuda_type(b.t), b.ld, &beta, c, cuda_type(ct), ldc, compute,
                        CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx_64");
}

}  // namespace kv::flcecuda
