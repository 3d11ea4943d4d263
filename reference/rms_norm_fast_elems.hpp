// The RMSNorm fast pass's scalar parts (reference/rms_norm_fast.hpp): its inputs and
// output buffers, the element code that the vector lanes fall back on, and the row and
// column buffers it reuses. Each function does the generic pass's Enc operations for
// one element, in the same order.
#pragma once
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

#include "reference/dual_fast.hpp"
#include "reference/rms_norm.hpp"


namespace kv {

/// Exact input values (low-precision inputs are exact in double), x and dy read a row at
/// a time (large tensors are never expanded to doubles whole).
struct RmsSource {
  std::function<void(int64_t, double*)> x_row, dy_row;
  std::vector<double> w, rstd;
};

/// One output tensor's buffers: the reference value and its error bound, the enclosure
/// under the contract and its unverifiable and NaN-admissible flags (put_ref / put_enc of
/// ops/op_base.hpp).
struct RmsOut {
  double *v, *err, *lo, *hi;
  uint8_t *unv, *nan;
  void put(int64_t i, const Dual& e) const {
    v[i] = e.ref.m, err[i] = e.ref.r;
    lo[i] = enc_lo(e.con), hi[i] = enc_hi(e.con), unv[i] = e.con.unv, nan[i] = e.con.nan;
  }
};

namespace rms_fast {

using fast_detail::AccIn;
using fast_detail::round_enc;

/// operator*(a, b), taking first the case of two exact values with significands of at
/// most 26 bits and a product in [2^-1000, 2^1000] (every product of two fp32/fp16/bf16
/// values): there operator* returns {a.m * b.m, 0} (product_exact's quick accept).
[[gnu::always_inline]] inline Enc fmul(const Enc& a, const Enc& b) {
  if (a.r == 0 && b.r == 0) {
    const double p = a.m * b.m;
    constexpr uint64_t low27 = (uint64_t(1) << 27) - 1;
    const double ap = std::fabs(p);
    if (((fast_detail::bits_of(a.m) | fast_detail::bits_of(b.m)) & low27) == 0 && ap >= 0x1p-1000 && ap <= 0x1p1000)
      return Enc{p, 0.0, a.unv || b.unv, a.nan || b.nan};
  }
  return a * b;
}

/// An Enc's flags in one byte of the row buffers (bit 0 unverifiable, bit 1 NaN
/// admissible), and an Enc from a buffer's value, radius and flags.
[[gnu::always_inline]] inline uint8_t flags_of(const Enc& e) {
  return static_cast<uint8_t>((e.unv ? 1 : 0) | (e.nan ? 2 : 0));
}
[[gnu::always_inline]] inline Enc enc_of(double m, double r, uint8_t f) { return Enc{m, r, (f & 1) != 0, (f & 2) != 0}; }

/// A Dual sum (DualPolicy::Sum) whose two halves get terms of the same value, as where
/// one half's term is acc() of the other's (acc() keeps the value): EncSum::add's
/// operations, with the running sum and its TwoSum error, the same numbers on both
/// halves, kept once.
struct TwinSum {
  double m = 0, err = 0, r[2] = {0, 0}, abs[2] = {0, 0};
  uint8_t f[2] = {0, 0};  // flags_of, or-ed over the terms
  int64_t n = 0;
  /// Adds {tm, r0} (flags f0) to the first half and {tm, r1} (flags f1) to the second.
  [[gnu::always_inline]] void add(double tm, double r0, uint8_t f0, double r1, uint8_t f1) {
    const double s = m + tm;
    err += std::fabs(two_sum_err(m, tm, s));
    m = s;
    r[0] += r0, abs[0] += enc_detail::abs_term(tm, r0), f[0] |= f0;
    r[1] += r1, abs[1] += enc_detail::abs_term(tm, r1), f[1] |= f1;
    ++n;
  }
  DualPolicy::Sum sums() const {
    auto half = [&](int h) { return EncSum::from_state(m, r[h], err, abs[h], n, (f[h] & 1) != 0, (f[h] & 2) != 0); };
    return {half(0), half(1)};
  }
};

/// rms_rstd_row's operations (x_j^2 by fmul; its acc() keeps the value).
inline Dual rstd_row(const FastDualPolicy& p, const RmsParams& q, const double* x) {
  TwinSum s;
  for (int64_t j = 0; j < q.n; ++j) {
    const Enc e = enc_exact(x[j]);
    const Enc t = fmul(e, e), tc = p.in(t);
    s.add(t.m, t.r, flags_of(t), tc.r, flags_of(tc));
  }
  return rms_rstd_of_sum(p, q, s.sums());
}

// The scalar code: rms_fwd_row's and rms_bwd_row's operations on one element.

/// y_j.
template <DType X, bool L>
Dual fwd_elem(const FastDualPolicy& p, const Dual& rstd, double x, const Dual& w) {
  const Enc xe = enc_exact(x);
  Dual xr;
  if constexpr (L)
    xr = Dual{round_enc<X>(round_enc<DType::f32>(fmul(xe, rstd.ref))),
              round_enc<X>(round_enc<DType::f32>(fmul(xe, rstd.con)))};
  else
    xr = Dual{fmul(xe, rstd.ref), p.in(fmul(xe, rstd.con))};
  return Dual{fmul(xr.ref, w.ref), p.in(fmul(xr.con, w.con))};
}

/// m_j and the row sum's term acc(m_j x_j).
template <DType X>
void bwd_m_elem(const FastDualPolicy& p, bool m_round_x, double dy, double x, const Dual& w, Dual& m, Dual& term) {
  const Enc d = enc_exact(dy);
  const Enc mr = fmul(d, w.ref), mc = fmul(d, w.con);
  m = m_round_x ? Dual{round_enc<X>(mr), round_enc<X>(mc)} : Dual{mr, p.in(mc)};
  const Enc xe = enc_exact(x);
  term = Dual{fmul(m.ref, xe), p.in(fmul(m.con, xe))};
}

/// dx_j and dW's term acc(dy_j t_j).
template <DType X, bool L>
void bwd_dx_elem(const FastDualPolicy& p, const Enc& R, const Dual& c, double dy, double x, const Dual& m, Dual& dx,
                 Dual& g) {
  const Enc xe = enc_exact(x);
  const Enc ar = fmul(R, m.ref), ac = p.in(fmul(R, m.con));
  const Enc br = fmul(c.ref, xe), bc = p.in(fmul(c.con, xe));
  dx = Dual{ar - br, p.in(ac - bc)};
  Dual t;  // x_j * rstd: the same exact product on both sides, llama's roundings too
  if constexpr (L) {
    const Enc tt = round_enc<X>(round_enc<DType::f32>(fmul(xe, R)));
    t = Dual{tt, tt};
  } else {
    const Enc tt = fmul(xe, R);
    t = Dual{tt, p.in(tt)};
  }
  const Enc d = enc_exact(dy);
  g = Dual{fmul(d, t.ref), p.in(fmul(d, t.con))};
}

/// A finite enclosure of positive radius with no flag (the lanes write none).
[[gnu::always_inline]] inline bool lean(const Enc& e) {
  return std::isfinite(e.m) && e.r > 0 && e.r < enc_detail::kInf && !e.unv && !e.nan;
}

/// Buffers hold rows rounded up to a multiple of the widest lanes.
inline int64_t padded(int64_t n) { return (n + 3) / 4 * 4; }

/// Per-column W' = offset + w, both halves, as lanes: the vector kernels take columns
/// whose W' halves are short exact nonzero values (r = 0, at most 26 bits, finite, not
/// unverifiable, no NaN admitted: lanes.inc's terms); `ok` marks them.
struct Cols {
  std::vector<double> wr, wc;
  std::vector<int64_t> ok;
  Cols(const std::vector<Dual>& wp, int64_t n_pad) : wr(n_pad, 0.0), wc(n_pad, 0.0), ok(n_pad, 0) {
    auto usable = [](const Enc& e) {
      return e.r == 0 && e.m != 0 && std::isfinite(e.m) && !e.unv && !e.nan &&
             (fast_detail::bits_of(e.m) & ((uint64_t(1) << 27) - 1)) == 0;
    };
    for (size_t j = 0; j < wp.size(); ++j) {
      wr[j] = wp[j].ref.m, wc[j] = wp[j].con.m;
      ok[j] = usable(wp[j].ref) && usable(wp[j].con) ? -1 : 0;
    }
  }
};

/// One backward row: m, m_j; t, the row sum's terms (dW's go straight into ColSums); r/c
/// the reference and contract halves (value m, radius r, flags u as flags_of: only
/// scalar-computed elements can carry one).
struct BwdBufs {
  std::vector<double> x, dy, mrm, mrr, mcm, mcr, trm, trr, tcm, tcr;
  std::vector<uint8_t> mru, mcu, tru, tcu;
  std::vector<int64_t> ok;  // lanes the vector code of pass 1 took
  explicit BwdBufs(int64_t n_pad) {
    for (auto* v : {&x, &dy, &mrm, &mrr, &mcm, &mcr, &trm, &trr, &tcm, &tcr})
      v->assign(static_cast<size_t>(n_pad), 0.0);
    for (auto* v : {&mru, &mcu, &tru, &tcu}) v->assign(static_cast<size_t>(n_pad), 0);
    ok.assign(static_cast<size_t>(n_pad), 0);
  }
};

/// dW's per-chunk column sums, both halves (h = 0 reference, 1 contract), side by side:
/// EncSum::add's operations (here, and on lanes in rms_norm_lanes.inc's sums_add;
/// EncSum::from_state turns a column back into an EncSum). Every column gets one term per row. The two halves' terms acc(dy t) have the
/// same value (c(dy) times t's value, which both halves share: llama's roundings act on
/// the same exact product, acc() keeps values), so their running sums and TwoSum errors
/// are the same numbers and are kept once; add() checks that.
struct ColSums {
  std::vector<double> m, err, r[2], abs[2];
  std::vector<uint8_t> unv[2], nan[2];
  int64_t n = 0;  // terms added to every column
  explicit ColSums(int64_t n_pad) { reset(n_pad); }
  void reset(int64_t n_pad) {
    for (auto* v : {&m, &err, &r[0], &r[1], &abs[0], &abs[1]}) v->assign(static_cast<size_t>(n_pad), 0.0);
    for (auto* v : {&unv[0], &unv[1], &nan[0], &nan[1]}) v->assign(static_cast<size_t>(n_pad), 0);
    n = 0;
  }
  /// EncSum::add of t.ref and t.con to column j's halves.
  void add(int64_t j, const Dual& t) {
    if (fast_detail::bits_of(t.ref.m) != fast_detail::bits_of(t.con.m))
      throw std::logic_error("rms_norm fast pass: dW term values differ between the halves");
    const double s = m[j] + t.ref.m;
    err[j] += std::fabs(two_sum_err(m[j], t.ref.m, s));
    m[j] = s;
    const Enc* h[2] = {&t.ref, &t.con};
    for (int k = 0; k < 2; ++k) {
      r[k][j] += h[k]->r;
      abs[k][j] += enc_detail::abs_term(h[k]->m, h[k]->r);
      unv[k][j] |= h[k]->unv ? 1 : 0;
      nan[k][j] |= h[k]->nan ? 1 : 0;
    }
  }
  DualPolicy::Sum column(int64_t j) const {
    auto half = [&](int h) {
      return EncSum::from_state(m[j], r[h][j], err[j], abs[h][j], n, unv[h][j] != 0, nan[h][j] != 0);
    };
    return DualPolicy::Sum{half(0), half(1)};
  }
};

/// rho of collapse() for the enclosure s (sm > 0).
inline double collapse_rho(const Enc& s) { return (s.r + s.m * 0x1p-52) * (1.0 + 0x1p-45); }

}  // namespace rms_fast
}  // namespace kv
