// The dW/dB second stage shared by the CUDA norm backward kernels: each column's G fp32
// partials summed serially in program order (per_sm, fixed_partials: the order, hence
// the bits, is fixed by G), or the atomically accumulated sum read back (atomics), then
// one rounding to the output dtype.
#include "device/cuda_check.hpp"
#include "kernels/cuda_dtype.cuh"
#include "kernels/cuda_rows.hpp"

namespace kv::rowcuda {

namespace {

constexpr int kBatch = 16;  // partials loaded at once per column
constexpr int kColThreads = 64;  // small blocks: more SMs share the partials' loads

__global__ void col_sums_kernel(ColSum s0, ColSum s1, int64_t n, int64_t G, int strategy) {
  // Field by field (a reference to either parameter would copy both to local memory).
  const bool first = blockIdx.y == 0;
  const float* partials = first ? s0.partials : s1.partials;
  const float* acc = first ? s0.acc : s1.acc;
  void* out = first ? s0.out : s1.out;
  const int out_dtype = first ? s0.out_dtype : s1.out_dtype;
  const int64_t out_stride = first ? s0.out_stride : s1.out_stride;
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float v;
    if (strategy == atomics) {
      v = acc[j];
    } else {  // loads a batch ahead of the serial adds (the order of the adds is unchanged)
      v = 0.0f;
      int64_t b = 0;
      for (; b + kBatch <= G; b += kBatch) {
        float t[kBatch];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) t[u] = partials[(b + u) * n + j];
#pragma unroll
        for (int u = 0; u < kBatch; ++u) v += t[u];
      }
      for (; b < G; ++b) v += partials[b * n + j];
    }
    cuda::st_any(out, out_dtype, j * out_stride, v);
  }
}

}  // namespace

void launch_col_sums(const ColSum* sums, int count, int64_t n, int64_t G, int strategy, cudaStream_t st) {
  if (n == 0 || count == 0) return;
  const int64_t blocks = (n + kColThreads - 1) / kColThreads;
  const dim3 grid(static_cast<unsigned>(blocks < 65535 ? blocks : 65535), static_cast<unsigned>(count));
  col_sums_kernel<<<grid, kColThreads, 0, st>>>(sums[0], count > 1 ? sums[1] : sums[0], n, G, strategy);
  KV_CUDA_LAUNCHED();
}

}  // namespace kv::rowcuda
