// Math calibration kernels: rsqrtf (nvcc defaults: no fast-math, no flush to zero) against
// a double reference, exhaustively over positive finite fp32 inputs.
//
// Reference: ref = RN(1 / RN(sqrt(x))) in IEEE double (the _rn intrinsics are correctly
// rounded on the GPU and cannot be contracted). Its relative error is below 2^-52, and
// an fp32 ulp at ref is above ref * 2^-24, so ref is within 2^-28 fp32 ulp (< 4e-9 ulp)
// of 1/sqrt(x): every error below is measured to better than 1e-8 ulp. The thresholds
// 0.5 and 1 ulp are decided exactly where that margin could matter (see over()).
#include <cmath>

#include "device/calibrate_kernels.hpp"
#include "device/cuda_check.hpp"

namespace kv::calib {

namespace {

constexpr int kBlock = 256;

/// Power-of-two exponent of a positive normal double.
__device__ __forceinline__ int exponent_of(double v) {
  return static_cast<int>((__double_as_longlong(v) >> 52) & 0x7ff) - 1023;
}
__device__ __forceinline__ double pow2(int e) { return __longlong_as_double(static_cast<long long>(e + 1023) << 52); }

struct Eval {
  float r;
  double ref, ulp, err;
};

/// rsqrtf(x) and its error in fp32 ulps at the reference. 1/sqrt(x) lies in [2^-64, 2^75)
/// (normal in fp32 and double) and is never within 2^-25 relative of a power of two
/// unless it is one (x is then a power of 4 and ref exact), so ref's binade is the exact
/// value's: ulp = 2^(floor(log2 ref) - 23). A correct-ish r lies within a factor 2 of ref,
/// so r - ref is exact (Sterbenz) and scaling by 1/ulp (a power of two) is exact.
__device__ __forceinline__ Eval eval(uint32_t bits) {
  const float x = __uint_as_float(bits);
  Eval v;
  v.r = rsqrtf(x);
  v.ref = __ddiv_rn(1.0, __dsqrt_rn(static_cast<double>(x)));
  const int e = exponent_of(v.ref);
  v.ulp = pow2(e - 23);
  v.err = __dmul_rn(fabs(__dsub_rn(static_cast<double>(v.r), v.ref)), pow2(23 - e));
  if (isnan(v.err)) v.err = INFINITY;  // a NaN result for a positive finite input is unboundedly wrong
  return v;
}

/// Exactly whether |r - 1/sqrt(x)| > k ulp (k = 0.5 or 1). Away from the threshold the
/// measured error decides; within 2^-20 of it (the reference error is < 2^-28) the bound
/// b = r +- k*ulp on ref's side of r is compared with 1/sqrt(x) exactly: t > b iff
/// b^2 x < 1. There r is within ~1 ulp of t, so b has at most 26 significant bits and b^2
/// is exact in double; b^2 x = p + e exactly (fma), p is near 1 so p - 1 is exact, and
/// rounding (p - 1) + e keeps its sign.
__device__ __forceinline__ bool over(const Eval& v, double k, double x) {
  if (fabs(v.err - k) > 0x1p-20) return v.err > k;
  const bool above = v.ref > static_cast<double>(v.r);
  const double ku = __dmul_rn(k, v.ulp);
  const double b = above ? __dadd_rn(v.r, ku) : __dsub_rn(v.r, ku);
  const double b2 = __dmul_rn(b, b);
  const double p = __dmul_rn(b2, x);
  const double s = __dadd_rn(__dsub_rn(p, 1.0), __fma_rn(b2, x, -p));
  return above ? s < 0 : s > 0;
}

/// The order of the max reduction: larger error first, then smaller input bits, so the
/// result does not depend on the grid or the order blocks run in.
__device__ __forceinline__ bool better(double e1, uint32_t b1, double e2, uint32_t b2) {
  return e1 > e2 || (e1 == e2 && b1 < b2);
}

__global__ void __launch_bounds__(kBlock) sweep_kernel(uint32_t first, uint32_t count, RsqrtPartial* out) {
  double best = -1.0;
  uint32_t best_bits = 0xffffffffu;
  unsigned long long n_half = 0, n_one = 0;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    const uint32_t bits = first + static_cast<uint32_t>(i);
    const Eval v = eval(bits);
    const double x = static_cast<double>(__uint_as_float(bits));
    if (better(v.err, bits, best, best_bits)) best = v.err, best_bits = bits;
    n_half += over(v, 0.5, x);
    n_one += over(v, 1.0, x);
  }
  // Warp shuffle tree, then the warp leaders through shared memory: integer sums and a
  // total order, so the block's result is exact and independent of scheduling.
  for (int off = 16; off > 0; off >>= 1) {
    const double e = __shfl_down_sync(0xffffffffu, best, off);
    const uint32_t b = __shfl_down_sync(0xffffffffu, best_bits, off);
    if (better(e, b, best, best_bits)) best = e, best_bits = b;
    n_half += __shfl_down_sync(0xffffffffu, n_half, off);
    n_one += __shfl_down_sync(0xffffffffu, n_one, off);
  }
  __shared__ RsqrtPartial warps[kBlock / 32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps[warp] = RsqrtPartial{best, best_bits, 0, n_half, n_one};
  __syncthreads();
  if (threadIdx.x == 0) {
    RsqrtPartial r = warps[0];
    for (int w = 1; w < kBlock / 32; ++w) {
      if (better(warps[w].max_err, warps[w].worst_bits, r.max_err, r.worst_bits))
        r.max_err = warps[w].max_err, r.worst_bits = warps[w].worst_bits;
      r.over_half += warps[w].over_half;
      r.over_one += warps[w].over_one;
    }
    out[blockIdx.x] = r;
  }
}

__global__ void eval_kernel(const uint32_t* in, uint32_t* out, double* err, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const uint32_t bits = in[i];
  // Specials (zeros, inf, NaN, negatives) only need the result; the error needs a
  // positive finite input.
  const bool positive_finite = bits != 0 && bits < 0x7f800000u;
  out[i] = __float_as_uint(rsqrtf(__uint_as_float(bits)));
  err[i] = positive_finite ? eval(bits).err : 0.0;
}

}  // namespace

int rsqrt_sweep_grid() {
  int dev = 0, sms = 0, per_sm = 0;
  KV_CUDA(cudaGetDevice(&dev));
  KV_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  KV_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, sweep_kernel, kBlock, 0));
  return sms * (per_sm > 0 ? per_sm : 1);
}

void launch_rsqrt_sweep(uint32_t first, uint32_t count, RsqrtPartial* out, int grid) {
  sweep_kernel<<<grid, kBlock>>>(first, count, out);
  KV_CUDA_LAUNCHED();
}

void launch_rsqrt_eval(const uint32_t* in, uint32_t* out, double* err, int n) {
  if (n <= 0) return;
  eval_kernel<<<(n + kBlock - 1) / kBlock, kBlock>>>(in, out, err, n);
  KV_CUDA_LAUNCHED();
}

}  // namespace kv::calib
