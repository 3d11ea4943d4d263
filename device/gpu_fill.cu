// The GPU input generator (device/gpu_fill.hpp). One thread per element: its coordinates
// from the linear index, gen::value (core/draw.hpp, the host's source), RNE to the dtype
// by core/dtype.hpp's round_to (integer operations on the significand), then the bits of
// that representable value (exact conversions). This file is built with --fmad=false
// (CMakeLists.txt), so nvcc fuses no multiply and add that the host computes apart.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <mutex>

#include "device/cuda_check.hpp"
#include "device/cuda_device.hpp"
#include "device/gpu_fill.hpp"

namespace kv {

namespace {

constexpr int kMaxRank = 8;

struct Shape {
  int64_t dims[kMaxRank];
  int rank;
};

/// The bits of r, a value representable in dt (or NaN), as core/dtype.cpp's encode.
__device__ uint32_t bits_of(DType dt, double r) {
  if (r != r) return canonical_nan_bits(dt);
  const float f = __double2float_rn(r);  // exact: r is representable in dt, so in float
  if (dt == DType::f32) return __float_as_uint(f);
  if (dt == DType::bf16) return __float_as_uint(f) >> 16;
  return __half_as_ushort(__float2half_rn(f));  // exact for the same reason
}

__global__ void fill_kernel(gen::Spec s, Shape sh, int64_t n, void* out) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t coords[kMaxRank];
    int64_t rest = i;
    for (int k = sh.rank - 1; k >= 0; --k) {
      coords[k] = rest % sh.dims[k];
      rest /= sh.dims[k];
    }
    const uint32_t b = bits_of(s.dt, round_to(s.dt, gen::value(s, coords, sh.rank)));
    if (s.dt == DType::f32) static_cast<uint32_t*>(out)[i] = b;
    else static_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(b);
  }
}

/// Whether this process has a usable GPU (asked once).
bool have_gpu() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] { ok = cuda_device_count() > 0; });
  return ok;
}

}  // namespace

bool gpu_fill(const gen::Spec& s, const std::vector<int64_t>& shape, uint8_t* dst) {
  if (shape.size() > static_cast<size_t>(kMaxRank) || s.dt == DType::i32 || !have_gpu()) return false;
  Shape sh{};
  sh.rank = static_cast<int>(shape.size());
  int64_t n = 1;
  for (int k = 0; k < sh.rank; ++k) sh.dims[k] = shape[k], n *= shape[k];
  if (n == 0) return true;
  const size_t bytes = static_cast<size_t>(n) * (s.dt == DType::f32 ? 4 : 2);
  void* d = nullptr;
  KV_CUDA(cudaMalloc(&d, bytes));
  try {
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((n + threads - 1) / threads, int64_t(1) << 20);
    fill_kernel<<<static_cast<unsigned>(blocks), threads>>>(s, sh, n, d);
    KV_CUDA_LAUNCHED();
    KV_CUDA(cudaMemcpy(dst, d, bytes, cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(d);
    throw;
  }
  KV_CUDA(cudaFree(d));
  return true;
}

}  // namespace kv
