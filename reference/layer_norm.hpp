// LayerNorm (OPS.md), two-pass: mean = sum(x)/N, var = sum((x-mean)^2)/N,
// rstd = 1/sqrt(var + eps), y = (x - mean) * rstd * w + b. Saved mean and rstd are
// outputs in the stat dtype (their rounding is the output's). bwd takes mean and rstd as
// given: xhat = (x-mean)*rstd, wdy = w*dy, c1 = sum(xhat*wdy)/N, c2 = sum(wdy)/N,
// dx = (wdy - (xhat*c1 + c2)) * rstd; dW = sum dy*xhat, dB = sum dy over rows.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

template <class P>
void layer_norm_fwd_row(const P& p, int64_t n, double eps, const double* x, const double* w, const double* b,
                        typename P::T* y, typename P::T& mean_out, typename P::T& rstd_out) {
  using T = typename P::T;
  const T N = p.c(static_cast<double>(n));
  auto s = p.sum();
  for (int64_t j = 0; j < n - KV_MUTANT_P(p, ln_mean_tail); ++j) s.add(p.c(x[j]));
  T mean = p.div(p.finish(s, "row"), N);
  if (KV_MUTANT_P(p, ln_mean_bf16)) mean = p.mand(mean, DType::bf16);
  auto v = p.sum();
  for (int64_t j = 0; j < n; ++j) {
    y[j] = p.acc(p.c(x[j]) - mean);  // d_j, kept for the output pass
    v.add(p.acc(p.sq(y[j])));
  }
  // A mean of squares is never below 0 (the cut keeps var + eps > 0 for constant rows).
  T var = p.at_least(p.div(p.finish(v, "row"), KV_MUTANT_P(p, ln_var_bessel) ? p.c(n - 1.0) : N), 0.0);
  if (KV_MUTANT_P(p, ln_var_one_pass)) {  // E[x^2] - mean^2
    auto q = p.sum();
    for (int64_t j = 0; j < n; ++j) q.add(p.acc(p.c(x[j]) * p.c(x[j])));
    var = p.acc(p.div(p.finish(q, "row"), N) - p.acc(mean * mean));
  }
  const T e = p.mand(p.c(eps), DType::f32);
  T rstd = p.rsqrt(p.acc(var + (KV_MUTANT_P(p, ln_eps_dropped) ? p.c(0) : e)));
  if (KV_MUTANT_P(p, ln_eps_outside_sqrt)) rstd = p.acc(p.c(1) / p.acc(p.acc(p.c(1) / p.rsqrt(var)) + e));
  if (KV_MUTANT_P(p, ln_w_b_swapped)) std::swap(w, b);
  for (int64_t j = 0; j < n; ++j)
    y[j] = p.acc(p.acc(p.acc(y[j] * rstd) * p.c(w[j])) + p.c(KV_MUTANT_P(p, ln_bias_dropped) ? 0.0 : b[j]));
  mean_out = mean;
  rstd_out = rstd;
}

/// dx of one row; dW and dB terms go to sums dw[j] and db[j].
template <class P, class Sum>
void layer_norm_bwd_row(const P& p, int64_t n, const double* dy, const double* x, const double* w, double mean,
                        double rstd, typename P::T* dx, Sum* dw, Sum* db) {
  using T = typename P::T;
  const T N = p.c(static_cast<double>(n)), M = p.c(mean), R = p.c(rstd);
  auto s1 = p.sum(), s2 = p.sum();
  std::vector<T> xhat(static_cast<size_t>(n)), wdy(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    const T d = KV_MUTANT_P(p, ln_b_mean_sign) ? p.acc(p.c(x[j]) + M) : p.acc(p.c(x[j]) - M);
    xhat[j] = KV_MUTANT_P(p, ln_b_xhat_no_rstd) ? d : p.acc(d * R);
    wdy[j] = KV_MUTANT_P(p, ln_b_wdy_no_w) ? p.c(dy[j]) : p.acc(p.c(w[j]) * p.c(dy[j]));
    s1.add(p.acc(xhat[j] * wdy[j]));
    s2.add(KV_MUTANT_P(p, ln_b_c2_of_dy) ? p.c(dy[j]) : wdy[j]);
    dw[j].add(p.acc((KV_MUTANT_P(p, ln_b_dw_of_wdy) ? wdy[j] : p.c(dy[j])) * xhat[j]));
    if (!KV_MUTANT_P(p, ln_b_db_last_col) || j + 1 < n) db[j].add(p.c(dy[j]));
  }
  T c1 = p.div(p.finish(s1, "row"), N), c2 = p.div(p.finish(s2, "row"), N);
  if (KV_MUTANT_P(p, ln_b_c1_dropped)) c1 = p.c(0);
  if (KV_MUTANT_P(p, ln_b_c2_dropped)) c2 = p.c(0);
  for (int64_t j = 0; j < n; ++j) {
    const T g = p.acc(wdy[j] - p.acc(p.acc(xhat[j] * c1) + c2));
    dx[j] = KV_MUTANT_P(p, ln_b_dx_no_rstd) ? g : p.acc(g * R);
  }
}

}  // namespace kv
