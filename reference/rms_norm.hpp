// RMSNorm forward and backward, written once over a scalar policy (OPS.md semantics).
// Mandated roundings: llama rounds x*rstd to x's dtype; m_rounding=x_dtype rounds dy*W'
// to x's dtype; `none` computes in x's dtype. Everything else is implementation latitude.
// ops/rms_norm.cpp runs these rows as the reference, its enclosure and the host impl.
#pragma once
#include <cstdint>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/mutant.hpp"

namespace kv {

enum class RmsMode { llama, gemma, none };

struct RmsParams {
  RmsMode mode = RmsMode::llama;
  double eps = 1e-6;     // as given; rounded to the compute dtype (a mandated rounding)
  double offset = 0.0;   // W' = offset + w, computed in the compute dtype
  bool m_round_x = false;  // bwd: m = dy * W' rounded to m_dtype (HF autograd) or kept (Liger)
  DType m_dtype = DType::f32;  // x's dtype (m_rounding=x_dtype), or the site rms_norm.m's
  std::optional<DType> dw_product;  // site rms_norm.dw_product: each dW term dy * t rounded to it
  DType x = DType::f32;    // x's dtype (llama's intermediate rounding, none's compute dtype)
  int64_t rows = 0, n = 0;
  /// fp32, or x's dtype in mode none.
  DType compute() const { return mode == RmsMode::none ? x : DType::f32; }
};

/// Rows per dW partial sum of the reference (ops/op_base.hpp's kColChunk).
inline constexpr int64_t kRmsDwChunkRows = 64;

namespace rms_detail {
/// v rounded toward zero to d: for a mutant, which fires under the host policy only (T double).
template <class T>
T toward_zero(const T& v, DType d) {
  if constexpr (std::is_same_v<T, double>) return round_toward_zero(d, v);
  else return v;
}
}  // namespace rms_detail

/// rstd from the row's sum of acc(x_j^2) terms.
template <class P, class Sum>
typename P::T rms_rstd_of_sum(const P& p, const RmsParams& q, const Sum& s) {
  using T = typename P::T;
  const T sum = p.finish(s, "row");
  T ms = KV_MUTANT_P(p, rms_h_no_mean) ? sum : p.div(sum, p.c(static_cast<double>(q.n)));
  T eps = p.mand(p.c(q.eps), q.compute());
  if (KV_MUTANT_P(p, rms_h_eps_bf16)) eps = p.acc(p.mand(p.c(q.eps), DType::bf16));
  if (KV_MUTANT_P(p, rms_h_eps_dropped)) eps = p.c(0);
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
    if (KV_MUTANT_P(p, rms_h_x_via_bf16)) xj = p.mand(xj, DType::bf16);
    s.add(p.acc(xj * xj));
  }
  return rms_rstd_of_sum(p, q, s);
}

/// bwd's row constant c = rstd^3 * sum(m x) / N.
template <class P>
typename P::T rms_bwd_c(const P& p, const RmsParams& q, const typename P::T& r, const typename P::T& sum) {
  const auto r3 = KV_MUTANT_P(p, rms_h_c_rstd_squared) ? p.acc(r * r) : p.acc(p.acc(r * r) * r);
  return p.acc(r3 * (KV_MUTANT_P(p, rms_h_c_no_mean) ? sum : p.div(sum, p.c(static_cast<double>(q.n)))));
}

/// W' = offset + w in the compute dtype, once per column.
template <class P>
std::vector<typename P::T> rms_wprime(const P& p, const RmsParams& q, const double* w) {
  std::vector<typename P::T> wp(static_cast<size_t>(q.n));
  const double off = KV_MUTANT_P(p, rms_h_offset_dropped) ? 0.0 : q.offset;
  for (int64_t j = 0; j < q.n; ++j) {
    wp[j] = p.acc(p.c(off) + p.c(w[j]));
    if (KV_MUTANT_P(p, rms_h_wprime_lowp)) wp[j] = p.mand(wp[j], q.x);
  }
  return wp;
}

/// x * rstd as the output and dW take it: llama rounds it to fp32 and then to x's dtype
/// (both mandated), the other modes keep the accumulator's rounding.
template <class P>
typename P::T rms_xr(const P& p, const RmsParams& q, const typename P::T& xr, bool llama) {
  if (!llama) return p.acc(xr);
  if (KV_MUTANT_P(p, rms_h_llama_rz)) return rms_detail::toward_zero(p.mand(xr, DType::f32), q.x);
  return p.mand(p.mand(xr, DType::f32), q.x);
}

/// y of one row from its rstd.
template <class P>
void rms_fwd_scale(const P& p, const RmsParams& q, const double* x, const typename P::T* wp,
                   const typename P::T& rstd, typename P::T* y) {
  for (int64_t j = 0; j < q.n; ++j) y[j] = p.acc(rms_xr(p, q, p.c(x[j]) * rstd, q.mode == RmsMode::llama) * wp[j]);
}

template <class P>
void rms_fwd_row(const P& p, const RmsParams& q, const double* x, const typename P::T* wp, typename P::T* y,
                 typename P::T& rstd_out) {
  rstd_out = rms_rstd_row(p, q, x);
  rms_fwd_scale(p, q, x, wp, rstd_out, y);
}

/// The dx part of one row; each column's dW term goes to dw(j, term).
template <class P, class DwTerm>
void rms_bwd_row(const P& p, const RmsParams& q, const double* dy, const double* x, const typename P::T* wp,
                 double rstd, typename P::T* dx, DwTerm&& dw) {
  using T = typename P::T;
  T r = p.c(rstd);
  auto s = p.sum();
  std::vector<T> m(static_cast<size_t>(q.n));
  const bool m_round = q.m_round_x && !KV_MUTANT_P(p, rms_h_m_rounding_ignored);
  for (int64_t j = 0; j < q.n; ++j) {
    T mj = p.c(dy[j]) * (KV_MUTANT_P(p, rms_h_m_no_w) ? p.c(1) : wp[j]);
    if (KV_MUTANT_P(p, rms_h_m_double_rounding) && m_round) mj = p.mand(mj, DType::f32);
    m[j] = m_round ? p.mand(mj, q.m_dtype) : p.acc(mj);
    s.add(p.acc(m[j] * p.c(x[j])));
  }
  T sum = p.finish(s, "row");
  // c = rstd^3 * sum(m x) / N, then dx = rstd*m - c*x.
  T c = rms_bwd_c(p, q, r, sum);
  const bool llama = q.mode == RmsMode::llama && !KV_MUTANT_P(p, rms_h_dw_llama_unrounded);
  for (int64_t j = 0; j < q.n; ++j) {
    T xj = p.c(x[j]);
    const T a = p.acc(r * m[j]), b = p.acc(c * xj);
    dx[j] = KV_MUTANT_P(p, rms_h_dx_sign) ? p.acc(a + b) : p.acc(a - b);
    T t = rms_xr(p, q, KV_MUTANT_P(p, rms_h_dw_no_rstd) ? xj : xj * r, llama);
    dw(j, q.dw_product ? p.mand(p.c(dy[j]) * t, *q.dw_product) : p.acc(p.c(dy[j]) * t));
  }
}

}  // namespace kv
