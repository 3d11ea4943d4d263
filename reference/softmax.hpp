// Row softmax (OPS.md): m = max x (exact), e_j = exp(x_j - m), y_j = e_j / sum e;
// bwd: dx_j = y_j * (dy_j - sum(dy * y)). The subtraction x_j - m is an fp32 operation,
// exp an fp32 math function with declared ulps, the sums run along axis "row".
#pragma once
#include <cstdint>
#include <vector>

namespace kv {

template <class P>
void softmax_fwd_row(const P& p, int64_t n, const double* x, typename P::T* y) {
  using T = typename P::T;
  T m = p.c(x[0]);
  for (int64_t j = 1; j < n; ++j) m = p.max(m, p.c(x[j]));
  auto s = p.sum();
  for (int64_t j = 0; j < n; ++j) {
    y[j] = p.exp(p.acc(p.c(x[j]) - m));
    s.add(y[j]);
  }
  T d = p.finish(s, "row");
  for (int64_t j = 0; j < n; ++j) y[j] = p.acc(y[j] / d);
}

template <class P>
void softmax_bwd_row(const P& p, int64_t n, const double* dy, const double* y, typename P::T* dx) {
  auto s = p.sum();
  for (int64_t j = 0; j < n; ++j) s.add(p.acc(p.c(dy[j]) * p.c(y[j])));
  auto t = p.finish(s, "row");
  for (int64_t j = 0; j < n; ++j) dx[j] = p.acc(p.c(y[j]) * p.acc(p.c(dy[j]) - t));
}

}  // namespace kv
