// Math functions over the enclosure type. Endpoint values come from glibc's double
// functions, whose documented worst errors on x86-64 are at most 2 ulps for exp, log,
// tanh, sin and cos (glibc manual, "Errors in Math Functions"); each endpoint is pushed
// outward by 2^-50 relative (8 double ulps) plus the smallest subnormal, which covers that
// with a factor of four to spare. tests/reference checks every function against MPFR.
#pragma once
#include <cmath>

#include "reference/enclosure.hpp"

namespace kv {

namespace enc_detail {
inline double lib_lo(double v) { return v - (std::fabs(v) * 0x1p-50 + 0x1p-1074); }
inline double lib_hi(double v) { return v + (std::fabs(v) * 0x1p-50 + 0x1p-1074); }
/// f increasing: [f(lo), f(hi)] with the library error pushed outward. An unknown
/// argument (±inf included) gives [f(-inf), f(inf)]: tanh maps it to [-1, 1], while a
/// possible NaN stays possible (Enc::nan).
template <class F>
Enc increasing(const Enc& a, F f) {
  if (a.r == 0 || !std::isfinite(a.m)) {  // an exact value, NaN or ±inf: IEEE's f(m)
    double v = f(a.m);
    if (!std::isfinite(v)) return Enc{v, 0.0, a.unv, a.nan};
    return enc_from_bounds(lib_lo(v), lib_hi(v), a.unv, a.nan);
  }
  return enc_from_bounds(lib_lo(f(enc_lo(a))), lib_hi(f(enc_hi(a))), a.unv, a.nan);
}
/// f 1-Lipschitz (sin, cos): |f(x) - f(m)| <= |x - m| <= r.
template <class F>
Enc lipschitz1(const Enc& a, F f) {
  double v = f(a.m);
  if (!std::isfinite(a.m)) return Enc{v, 0.0, a.unv, a.nan};  // NaN (sin and cos of ±inf too)
  double r = a.r + std::fabs(v) * 0x1p-50 + 0x1p-1074;
  return Enc{v, rup(r), a.unv, a.nan || a.r == kInf};  // an unknown argument may be ±inf: NaN
}
}  // namespace enc_detail

/// exp given em = exp(a.m) from the library. For a narrow interval (r <= 2^-20) and em in
/// the normal range one library call does: exp(m - r) >= exp(m) (1 - r) and exp(m + r) <=
/// exp(m) (1 + r + r^2) for 0 <= r <= 1 (Taylor's series of e^r: the terms from r^2/2 on
/// sum to at most r^2 there); the endpoints' library error and the three RN steps after it
/// are covered by lib_lo/lib_hi and a further 2^-50 relative. Wider intervals (or em
/// outside [2^-900, 2^900]) evaluate both endpoints.
inline Enc enc_exp_from(const Enc& a, double em) {
  using namespace enc_detail;
  if (a.r == 0 || !std::isfinite(a.m)) {
    // NaN, exp(+inf) = inf and exp(-inf) = 0 are exact.
    if (!std::isfinite(em) || !std::isfinite(a.m)) return Enc{em, 0.0, a.unv, a.nan};
    return enc_from_bounds(lib_lo(em), lib_hi(em), a.unv, a.nan);
  }
  if (a.r <= 0x1p-20 && em >= 0x1p-900 && em <= 0x1p900)
    return enc_from_bounds(lib_lo(em) * (1.0 - a.r) * (1.0 - 0x1p-50), lib_hi(em) * (1.0 + a.r + a.r * a.r) * (1.0 + 0x1p-50),
                           a.unv, a.nan);
  return increasing(a, [](double x) { return std::exp(x); });
}
inline Enc enc_exp(const Enc& a) { return enc_exp_from(a, std::exp(a.m)); }
inline Enc enc_tanh(const Enc& a) { return enc_detail::increasing(a, [](double x) { return std::tanh(x); }); }
inline Enc enc_log(const Enc& a) {
  if (!std::isfinite(a.m)) return Enc{std::log(a.m), 0.0, a.unv, a.nan};  // NaN, log(inf) = inf, log(-inf) = NaN
  if (!(enc_lo(a) > 0) && a.r != 0) return enc_detail::unknown(a.unv, a.nan || !(enc_lo(a) >= 0));  // log of a negative: NaN
  return enc_detail::increasing(a, [](double x) { return std::log(x); });
}
inline Enc enc_sin(const Enc& a) { return enc_detail::lipschitz1(a, [](double x) { return std::sin(x); }); }
inline Enc enc_cos(const Enc& a) { return enc_detail::lipschitz1(a, [](double x) { return std::cos(x); }); }
/// max over intervals: [max(lo), max(hi)].
inline Enc enc_max(const Enc& a, const Enc& b) {
  // NaN propagates (as torch.max does); max with +inf is +inf, with -inf the other (a
  // possible NaN of either operand stays possible).
  const bool unv = a.unv || b.unv, nan = a.nan || b.nan;
  if (std::isnan(a.m) || std::isnan(b.m)) return enc_detail::nan_value(unv);
  if (a.m == enc_detail::kInf || b.m == -enc_detail::kInf) return Enc{a.m, a.r, a.unv, nan};
  if (b.m == enc_detail::kInf || a.m == -enc_detail::kInf) return Enc{b.m, b.r, b.unv, nan};
  if (a.r == 0 && b.r == 0) return Enc{std::fmax(a.m, b.m), 0.0, unv, nan};
  return enc_from_bounds(std::fmax(enc_lo(a), enc_lo(b)), std::fmax(enc_hi(a), enc_hi(b)), unv, nan);
}

/// x * x: the product of a value with itself is never below 0, which the product of two
/// independent enclosures straddling 0 forgets (a variance of constant rows).
inline Enc enc_sq(const Enc& a) {
  const Enc p = a * a;
  if (!std::isfinite(p.m) || !(enc_lo(p) < 0) || !(enc_hi(p) < enc_detail::kInf)) return p;
  return enc_from_bounds(0.0, enc_hi(p), p.unv, p.nan);
}
/// log a where a >= b > 0 is known (enc_at_least): from the bounds themselves, which
/// keep the cut that a wide midpoint-radius form loses ([0.99, 1e20] has a midpoint and
/// radius whose difference rounds to 0).
inline Enc enc_log_at_least(const Enc& a, double b) {
  const double lo = std::fmax(enc_lo(a), b), hi = enc_hi(a);
  if (std::isnan(a.m) || !(b > 0) || !(hi >= lo) || !(hi < enc_detail::kInf)) return enc_log(a);
  return enc_from_bounds(enc_detail::lib_lo(std::log(lo)), enc_detail::lib_hi(std::log(hi)), a.unv, a.nan);
}
/// a cut below at b, where every correct impl's value is known to be at least b.
inline Enc enc_at_least(const Enc& a, double b) {
  const double lo = enc_lo(a), hi = enc_hi(a);
  if (std::isnan(a.m) || !(lo < b) || !(hi >= b) || !(hi < enc_detail::kInf)) return a;
  return enc_from_bounds(b, hi, a.unv, a.nan);
}

}  // namespace kv
