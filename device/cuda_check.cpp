// CUDA error checking.
#include "device/cuda_check.hpp"

namespace kv {

void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
  if (e == cudaSuccess) return;
  // A sticky error survives cudaGetLastError and shows again on the next synchronize.
  cudaGetLastError();
  bool sticky = cudaDeviceSynchronize() != cudaSuccess;
  throw CudaError(std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ") at " + call + ", " + file + ":" +
                      std::to_string(line) + (sticky ? " [sticky: the CUDA context is unusable]" : ""),
                  e, sticky);
}

}  // namespace kv
