// Host-side interface of the math calibration kernels (in calibrate_kernels.cu): an
// exhaustive sweep of rsqrtf over positive finite fp32 inputs, and a pointwise evaluator.
#pragma once
#include <cstdint>

namespace kv::calib {

/// One block's result of a sweep: the largest error (ties: the smallest input bits) and
/// how many inputs were not correctly rounded (error > 0.5 ulp) or erred by over 1 ulp.
struct RsqrtPartial {
  double max_err;  // ulps; -1 when the block saw no input; +inf for a NaN result
  uint32_t worst_bits;
  uint32_t pad;
  unsigned long long over_half;
  unsigned long long over_one;
};

/// Blocks per sweep launch that fill the current device.
int rsqrt_sweep_grid();
/// Sweeps the inputs with bits first .. first+count-1 (all positive finite) with `grid`
/// blocks; block b writes out[b]. Asynchronous on the default stream.
void launch_rsqrt_sweep(uint32_t first, uint32_t count, RsqrtPartial* out, int grid);
/// For each in[i] (device arrays of n entries): out[i] = bits of rsqrtf, err[i] = its
/// error in ulps measured as the sweep does (0 for inputs that are not positive finite).
void launch_rsqrt_eval(const uint32_t* in, uint32_t* out, double* err, int n);

}  // namespace kv::calib
