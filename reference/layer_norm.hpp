// LayerNorm (OPS.md), two-pass: mean = sum(x)/N, var = sum((x-mean)^2)/N,
// rstd = 1/sqrt(var + eps), y = (x - mean) * rstd * w + b. Saved mean and rstd are
// outputs in the stat dtype (their rounding is the output's). bwd takes mean and rstd as
// given: xhat = (x-mean)*rstd, wdy = w*dy, c1 = sum(xhat*wdy)/N, c2 = sum(wdy)/N,
// dx = (wdy - (xhat*c1 + c2)) * rstd; dW = sum dy*xhat, dB = sum dy over rows.
#pragma once
#include <cstdint>
#include <vector>

#include "core/dtype.hpp"

namespace kv {

template <class P>
void layer_norm_fwd_row(const P& p, int64_t n, double eps, const double* x, const double* w, const double* b,
                        typename P::T* y, typename P::T& mean_out, typename P::T& rstd_out) {
  using T = typename P::T;
  const T N = p.c(static_cast<double>(n));
  auto s = p.sum();
  for (int64_t j = 0; j < n; ++j) s.add(p.c(x[j]));
  T mean = p.acc(p.finish(s, "row") / N);
  auto v = p.sum();
  for (int64_t j = 0; j < n; ++j) {
    y[j] = p.acc(p.c(x[j]) - mean);  // d_j, kept for the output pass
    v.add(p.acc(y[j] * y[j]));
  }
  T var = p.acc(p.finish(v, "row") / N);
  T rstd = p.rsqrt(p.acc(var + p.mand(p.c(eps), DType::f32)));
  for (int64_t j = 0; j < n; ++j) y[j] = p.acc(p.acc(p.acc(y[j] * rstd) * p.c(w[j])) + p.c(b[j]));
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
    xhat[j] = p.acc(p.acc(p.c(x[j]) - M) * R);
    wdy[j] = p.acc(p.c(w[j]) * p.c(dy[j]));
    s1.add(p.acc(xhat[j] * wdy[j]));
    s2.add(wdy[j]);
    dw[j].add(p.acc(p.c(dy[j]) * xhat[j]));
    db[j].add(p.c(dy[j]));
  }
  T c1 = p.acc(p.finish(s1, "row") / N), c2 = p.acc(p.finish(s2, "row") / N);
  for (int64_t j = 0; j < n; ++j) dx[j] = p.acc(p.acc(wdy[j] - p.acc(p.acc(xhat[j] * c1) + c2)) * R);
}

}  // namespace kv
