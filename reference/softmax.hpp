// Row softmax (OPS.md): m = max x (exact), e_j = exp(x_j - m), y_j = e_j / sum e;
// bwd: dx_j = y_j * (dy_j - sum(dy * y)). The subtraction x_j - m is an fp32 operation,
// exp an fp32 math function with declared ulps, the sums run along axis "row".
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

template <class P>
void softmax_fwd_row(const P& p, int64_t n, const double* x, typename P::T* y) {
  using T = typename P::T;
  T m = p.c(x[0]);
  for (int64_t j = 1; j < n - KV_MUTANT_P(p, sm_max_tail); ++j) m = p.max(m, p.c(x[j]));
  auto s = p.sum();
  for (int64_t j = 0; j < n; ++j) {
    T z = KV_MUTANT_P(p, sm_exp_swapped) ? p.acc(m - p.c(x[j])) : p.acc(p.c(x[j]) - m);
    if (KV_MUTANT_P(p, sm_diff_bf16)) z = p.mand(z, DType::bf16);
    y[j] = p.exp(KV_MUTANT_P(p, sm_no_max_sub) ? p.c(x[j]) : z);
    if (!KV_MUTANT_P(p, sm_sum_tail) || j + 1 < n) s.add(y[j]);
  }
  T d = p.finish(s, "row");
  if (KV_MUTANT_P(p, sm_no_normalize)) return;
  for (int64_t j = 0; j < n; ++j) y[j] = KV_MUTANT_P(p, sm_recip) ? p.acc(y[j] * p.acc(p.c(1) / d)) : p.div(y[j], d);
}

/// Backward. dy_y: site softmax.bwd_dy_y (each product dy*y rounded to that dtype);
/// distributed: form softmax.bwd_dx = distributed, dx = dy*y - y*t with both dy*y the same
/// (rounded) product, as ATen evaluates it (in exact arithmetic the same as y*(dy - t)).
template <class P>
void softmax_bwd_row(const P& p, int64_t n, const double* dy, const double* y, typename P::T* dx,
                     std::optional<DType> dy_y = std::nullopt, bool distributed = false) {
  auto prod = [&](int64_t j) {
    return dy_y ? p.mand(p.c(dy[j]) * p.c(y[j]), *dy_y) : p.acc(p.c(dy[j]) * p.c(y[j]));
  };
  auto s = p.sum();
  for (int64_t j = 0; j < n - KV_MUTANT_P(p, sm_b_sum_tail); ++j) {
    auto q = KV_MUTANT_P(p, sm_b_sum_of_dy) ? p.c(dy[j]) : prod(j);
    s.add(KV_MUTANT_P(p, sm_b_prod_bf16) ? p.mand(q, DType::bf16) : q);
  }
  auto t = p.finish(s, "row");
  if (KV_MUTANT_P(p, sm_b_t_bf16)) t = p.mand(t, DType::bf16);
  if (distributed) {
    for (int64_t j = 0; j < n; ++j) dx[j] = p.acc(prod(j) - p.acc(p.c(y[j]) * t));
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    auto g = KV_MUTANT_P(p, sm_b_sign) ? p.acc(t - p.c(dy[j])) : p.acc(p.c(dy[j]) - t);
    if (KV_MUTANT_P(p, sm_b_swapped)) g = p.acc(p.c(y[j]) - t);
    dx[j] = KV_MUTANT_P(p, sm_b_no_y) ? g : p.acc((KV_MUTANT_P(p, sm_b_swapped) ? p.c(dy[j]) : p.c(y[j])) * g);
  }
}

}  // namespace kv
