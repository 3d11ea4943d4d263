// The numerics contract every RMSNorm impl shares: accumulator (x's dtype in mode none),
// rsqrt in fp32 ulps, the row reduction, dW's reduction over rows in fp32, and the
// row-wise determinism claims. Impls pass what differs: their reduction shapes, dW claims.
#pragma once
#include <algorithm>

#include "core/case.hpp"
#include "core/contract.hpp"
#include "core/registry.hpp"
#include "core/tensor.hpp"

namespace kv {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t log2_ceil(int64_t v) {
  int64_t d = 0;
  while ((int64_t(1) << d) < v) ++d;
  return d;
}

/// row: the shape of the sum over N; partials: the dW programs (each summing a
/// contiguous chunk of rows, then the partials summed serially).
inline Contract rms_norm_contract(const Case& c, bool bwd, ReductionShape row, int64_t partials,
                                  DeterminismClaims dw_claims) {
  Contract k;
  k.acc = c.attr("mode") == "none" ? c.dtypes.at("x") : DType::f32;
  // rsqrt in fp32 ulps (checked by calibrate-math on GPUs); mode none's rounding of it to
  // x's dtype is an acc step of the reference.
  k.math_ulps["rsqrt"] = 2.0;
  k.reductions["row"] = row;
  // A row's outputs follow its own sum alone (batch_invariant where the op's rows are
  // independent: with_batch_claim); the sum's shape follows the config, not the device.
  const DeterminismClaims rowwise = {"run_to_run", "gpu_invariant"};
  if (bwd) {
    const int64_t rows = numel(c.shape) / c.shape.back();
    // dW accumulates in fp32 in every mode (as Liger's dW_row does).
    k.reductions["rows"] = {ceil_div(std::max<int64_t>(rows, 1), partials), 0, partials, DType::f32};
    k.determinism["dx"] = with_batch_claim(c, "dx", rowwise);
    k.determinism["dw"] = std::move(dw_claims);
  } else {
    k.determinism["y"] = with_batch_claim(c, "y", rowwise);
    k.determinism["rstd"] = with_batch_claim(c, "rstd", rowwise);
  }
  return k;
}

}  // namespace kv
