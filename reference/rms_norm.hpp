// RMSNorm forward and backward, written once over a scalar policy (OPS.md semantics).
// Mandated roundings: llama rounds x*rstd to x's dtype; m_rounding=x_dtype rounds dy*W'
// to x's dtype; `none` computes in x's dtype. Everything else is implementation latitude.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace kv {

enum class RmsMode { llama, gemma, none };

struct RmsParams {
  RmsMode mode = RmsMode::llama;
  double eps = 1e-6;     // as given; rounded to the compute dtype (a mandated rounding)
  double offset = 0.0;   // W' = offset + w, computed in the compute dtype
  bool m_round_x = false;  // bwd: m = dy * W' rounded to x's dtype (HF autograd) or kept (Liger)
  DType x = DType::f32;    // x's dtype (llama's intermediate rounding, none's compute dtype)
  int64_t rows = 0, n = 0;
  /// fp32, or x's dtype in mode none.
  DType compute() const { return mode == RmsMode::none ? x : DType::f32; }
};

/// Exact input values (low-precision inputs are exact in double), whole.
struct RmsData {
  std::vector<double> x, w, dy, rstd;
};

/// Exact input values with x and dy read a row at a time (large tensors are never
/// expanded to doubles whole).
struct RmsSource {
  std::function<void(int64_t, double*)> x_row, dy_row;
  std::vector<double> w, rstd;
  static RmsSource of(const RmsData& d, int64_t n);
};

template <class T>
struct RmsFwdOut {
  std::vector<T> y, rstd;
};
template <class T>
struct RmsBwdOut {
  std::vector<T> dx, dw;
};

/// rstd from the row's sum of acc(x_j^2) terms.
template <class P, class Sum>
typename P::T rms_rstd_of_sum(const P& p, const RmsParams& q, const Sum& s) {
  using T = typename P::T;
  T ms = p.acc(p.finish(s, "row") / p.c(static_cast<double>(q.n)));
  T eps = p.mand(p.c(q.eps), q.compute());
  T r = p.rsqrt(p.acc(ms + eps));
  // Mode none rounds rsqrtf's fp32 result to x's dtype.
  return q.mode == RmsMode::none && q.x != DType::f32 ? p.acc(r) : r;
}

template <class P>
typename P::T rms_rstd_row(const P& p, const RmsParams& q, const double* x) {
  using T = typename P::T;
  auto s = p.sum();
  for (int64_t j = 0; j < q.n; ++j) {
    T xj = p.c(x[j]);
    s.add(p.acc(xj * xj));
  }
  return rms_rstd_of_sum(p, q, s);
}

/// bwd's row constant c = rstd^3 * sum(m x) / N.
template <class P>
typename P::T rms_bwd_c(const P& p, const RmsParams& q, const typename P::T& r, const typename P::T& sum) {
  return p.acc(p.acc(p.acc(r * r) * r) * p.acc(sum / p.c(static_cast<double>(q.n))));
}

/// W' = offset + w in the compute dtype, once per column.
template <class P>
std::vector<typename P::T> rms_wprime(const P& p, const RmsParams& q, const double* w) {
  std::vector<typename P::T> wp(static_cast<size_t>(q.n));
  for (int64_t j = 0; j < q.n; ++j) wp[j] = p.acc(p.c(q.offset) + p.c(w[j]));
  return wp;
}

template <class P>
void rms_fwd_row(const P& p, const RmsParams& q, const double* x, const typename P::T* wp, typename P::T* y,
                 typename P::T& rstd_out) {
  using T = typename P::T;
  T rstd = rms_rstd_row(p, q, x);
  rstd_out = rstd;
  for (int64_t j = 0; j < q.n; ++j) {
    const T& wj = wp[j];
    // Llama: RN_x(RN_fp32(x * rstd)), both roundings mandated.
    T xr = q.mode == RmsMode::llama ? p.mand(p.mand(p.c(x[j]) * rstd, DType::f32), q.x) : p.acc(p.c(x[j]) * rstd);
    y[j] = p.acc(xr * wj);
  }
}

/// The dx part of one row; dW terms are added to per-column sums `dw` by the caller.
template <class P, class Sum>
void rms_bwd_row(const P& p, const RmsParams& q, const double* dy, const double* x, const typename P::T* wp,
                 double rstd, typename P::T* dx, Sum* dw) {
  using T = typename P::T;
  T r = p.c(rstd);
  auto s = p.sum();
  std::vector<T> m(static_cast<size_t>(q.n));
  for (int64_t j = 0; j < q.n; ++j) {
    T mj = p.c(dy[j]) * wp[j];
    m[j] = q.m_round_x ? p.mand(mj, q.x) : p.acc(mj);
    s.add(p.acc(m[j] * p.c(x[j])));
  }
  T sum = p.finish(s, "row");
  // c = rstd^3 * sum(m x) / N, then dx = rstd*m - c*x.
  T c = rms_bwd_c(p, q, r, sum);
  for (int64_t j = 0; j < q.n; ++j) {
    T xj = p.c(x[j]);
    dx[j] = p.acc(p.acc(r * m[j]) - p.acc(c * xj));
    T t = q.mode == RmsMode::llama ? p.mand(p.mand(xj * r, DType::f32), q.x) : p.acc(xj * r);
    dw[j].add(p.acc(p.c(dy[j]) * t));
  }
}

/// Rows per dW partial sum (fixed, so dW does not depend on the thread count).
inline constexpr int64_t kRmsDwChunkRows = 64;

/// Forward over all rows (in parallel over rows when `parallel`), each output element
/// handed to sink.y(i, value) and sink.rstd(row, value).
template <class P, class Sink>
void rms_fwd_into(const P& p, const RmsParams& q, const RmsSource& d, bool parallel, Sink& sink);
/// Backward over all rows: sink.dx(i, value), sink.dw(j, value). dW sums are taken over
/// fixed row chunks merged in order, so the result does not depend on the thread count.
template <class P, class Sink>
void rms_bwd_into(const P& p, const RmsParams& q, const RmsSource& d, bool parallel, Sink& sink);

/// The same, collected into vectors (for tests and small cases).
template <class P>
RmsFwdOut<typename P::T> rms_fwd(const P& p, const RmsParams& q, const RmsData& d, bool parallel);
template <class P>
RmsBwdOut<typename P::T> rms_bwd(const P& p, const RmsParams& q, const RmsData& d, bool parallel);

}  // namespace kv

#include "reference/rms_norm_impl.hpp"
