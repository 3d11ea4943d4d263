// CUDA rope_table, as reference/rope_table.hpp defines it.
// One thread per (position, pair): angle = __fmul_rn(pos, inv_freq) (the
// mandated fp32 rounding), cosf/sinf of it (CUDA's full-range versions, 2 ulp), stored to
// both elements of the pair in the table's dtype.
#include "device/cuda_check.hpp"
#include "kernels/cuda_rows.cuh"
#include "kernels/rope_table/cuda_launch.hpp"

namespace kv::ropetablecuda {

using namespace kv::rowcuda;

namespace {

__global__ void __launch_bounds__(1024) table_kernel_fn(TableArgs a) {
  const int64_t half = a.d / 2, total = a.s * half;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t s, p;
    divmod(i, half, s, p);
    const float pos = static_cast<float>(a.pos[s * a.pos_s]);  // exact: |pos| <= 2^24
    const float ang = __fmul_rn(pos, ld_any(a.inv, a.inv_dtype, p * a.inv_s));
    const float c = cosf(ang), sn = sinf(ang);
    const int64_t j0 = a.interleaved ? 2 * p : p, j1 = a.interleaved ? 2 * p + 1 : p + half;
    st_any(a.cos, a.cos_dtype, s * a.cos_rs + j0 * a.cos_cs, c);
    st_any(a.cos, a.cos_dtype, s * a.cos_rs + j1 * a.cos_cs, c);
    st_any(a.sin, a.sin_dtype, s * a.sin_rs + j0 * a.sin_cs, sn);
    st_any(a.sin, a.sin_dtype, s * a.sin_rs + j1 * a.sin_cs, sn);
  }
}

}  // namespace

const void* table_kernel() { return reinterpret_cast<const void*>(&table_kernel_fn); }

void launch_table(const TableArgs& a, cudaStream_t s) {
  const int64_t total = a.s * (a.d / 2);
  if (total == 0) return;
  int64_t blocks = (total + a.threads - 1) / a.threads;
  if (blocks > 65535LL * 32) blocks = 65535LL * 32;  // grid-stride covers the rest
  table_kernel_fn<<<static_cast<unsigned>(blocks), a.threads, 0, s>>>(a);
  KV_CUDA_LAUNCHED();
}

}  // namespace kv::ropetablecuda
