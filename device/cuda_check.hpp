// CUDA error discipline: every runtime call and launch goes through KV_CUDA, which
// throws with the call, file and line; sticky errors (the context is lost) are marked so
// the worker ends and is restarted.
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "core/error.hpp"

namespace kv {

struct CudaError : DeviceError {
  CudaError(const std::string& what, cudaError_t code, bool sticky) : DeviceError(what, sticky), code(code) {}
  cudaError_t code;
};

/// Throws CudaError when e is not cudaSuccess; probes whether the error is sticky.
void cuda_check(cudaError_t e, const char* call, const char* file, int line);

}  // namespace kv

#define KV_CUDA(call) ::kv::cuda_check((call), #call, __FILE__, __LINE__)
/// After a kernel launch: the launch's own error, then (in checked builds) completion.
#define KV_CUDA_LAUNCHED() ::kv::cuda_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
