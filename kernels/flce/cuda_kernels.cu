// FLCE's own CUDA kernels beside cuBLAS: the fp32 (or bf16) sums copied into the outputs
// with one rounding to their dtypes, four elements per thread (vector accesses where the
// output's rows allow them), and dbias's column sums: one thread per column, the chunk's
// rows summed serially in order and added to the running fp32 sum.
#include "device/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/flce/cuda_launch.hpp"

namespace kv::flcecuda {

using namespace kv::rowcuda;

namespace {

__global__ void __launch_bounds__(256) copy_kernel(CopyArgs a) {
  const int64_t groups = (a.cols + 3) / 4;
  for (int64_t r = blockIdx.y; r < a.rows; r += gridDim.y)
    for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
         g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
      const int64_t j = 4 * g;
      const int cnt = a.cols - j < 4 ? static_cast<int>(a.cols - j) : 4;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      const int64_t s = r * a.ld + j;
      if (a.src_dtype == F32 && cnt == 4 && a.ld % 4 == 0) {
        const float4 f = *reinterpret_cast<const float4*>(static_cast<const float*>(a.src) + s);
        v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (i < cnt) v[i] = ld_any(a.src, a.src_dtype, s + i);
      }
      const int64_t o = r * a.dst.rs + j * a.dst.cs;
      if (a.dst.vec && cnt == 4) {
        if (a.dst.dtype == F32) {
          *reinterpret_cast<float4*>(static_cast<float*>(a.dst.base) + o) = make_float4(v[0], v[1], v[2], v[3]);
        } else {
          const bool bf = a.dst.dtype == BF16;
          const uint2 u = bf ? make_uint2(pack2<__nv_bfloat16>(v[0], v[1]), pack2<__nv_bfloat16>(v[2], v[3]))
                             : make_uint2(pack2<__half>(v[0], v[1]), pack2<__half>(v[2], v[3]));
          *reinterpret_cast<uint2*>(static_cast<uint16_t*>(a.dst.base) + o) = u;
        }
        continue;
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (i < cnt) st_any(a.dst.base, a.dst.dtype, o + i * a.dst.cs, v[i]);
    }
}

__global__ void __launch_bounds__(256) colsum_kernel(ColSumArgs a) {
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < a.cols;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float s = 0.0f;
    for (int64_t r = 0; r < a.rows; ++r) s += ld_any(a.g, a.g_dtype, r * a.ld + j);
    a.acc[j] = a.first ? s : a.acc[j] + s;
  }
}

unsigned capped(int64_t n, int64_t cap) { return static_cast<unsigned>(n < cap ? (n < 1 ? 1 : n) : cap); }

}  // namespace

void launch_copy(const CopyArgs& a, cudaStream_t s) {
  if (a.rows == 0 || a.cols == 0) return;
  const dim3 grid(capped((a.cols + 4 * 256 - 1) / (4 * 256), 2147483647), capped(a.rows, 65535));
  copy_kernel<<<grid, 256, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
}

void launch_colsum(const ColSumArgs& a, cudaStream_t s) {
  if (a.cols == 0) return;
  colsum_kernel<<<capped((a.cols + 255) / 256, 2147483647), 256, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
}

}  // namespace kv::flcecuda
