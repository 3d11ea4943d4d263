// The enclosure scalar: midpoint-radius in double with the radius rounded outward.
// Run with no contract it encloses the exact value of the defined computation (the
// certified reference bound); run with a contract it encloses every output a correct
// impl under that contract may produce before the final rounding.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "core/contract.hpp"
#include "core/dtype.hpp"

namespace kv {

struct Enc {
  double m = 0;
  double r = 0;
  bool unv = false;  // the contract admits no useful bound (n_eff u >= 1)
  /// NaN admissible: under the contract an intermediate may overflow to ±inf and then meet
  /// inf - inf, inf * 0 or inf / inf, so a correct impl may produce NaN here. [m - r, m + r]
  /// still bounds every other outcome: softcap of a logit whose sum may overflow either way
  /// lies in [-s, s] or is NaN. It spreads like NaN itself (every result of an operand
  /// that carries it carries it), and an output element that carries it is unverifiable.
  bool nan = false;
};

namespace enc_detail {
inline constexpr double kInf = std::numeric_limits<double>::infinity();
/// Rounds a radius computed with a few RN operations up, so it stays a bound (each RN
/// step errs by at most 2^-53 relative; 2^-50 covers eight of them). NaN becomes +inf.
[[gnu::always_inline]] inline double rup(double x) {
  if (!(x < kInf)) return kInf;
  return x * (1.0 + 0x1p-50) + 0x1p-1074;
}
/// Steps below / above an RN-computed value far enough to cover its rounding error:
/// 2^-52 |x| is at least one ulp of x, so RN(x - that) <= x - ulp/2 (2^-1074 covers
/// subnormals). No libm call: this is on the hot path of every enclosure element.
[[gnu::always_inline]] inline double down(double x) { return x - (std::fabs(x) * 0x1p-52 + 0x1p-1074); }
[[gnu::always_inline]] inline double up(double x) { return x + (std::fabs(x) * 0x1p-52 + 0x1p-1074); }

/// Whether a * b is exact in double (Dekker's product with Veltkamp splitting, + - *
/// only: the rounding error of RN(a*b) is zero). Quick accept first: two significands of
/// at most 26 bits (the low 27 of the 52 stored bits zero, as for every fp32, fp16 and
/// bf16 value) have a product of at most 52 bits, exact unless it leaves the normal range.
[[gnu::always_inline]] inline bool product_exact(double a, double b, double p) {
  uint64_t ba, bb;
  std::memcpy(&ba, &a, 8);
  std::memcpy(&bb, &b, 8);
  constexpr uint64_t low27 = (uint64_t(1) << 27) - 1;
  const double ap = std::fabs(p);
  if (((ba | bb) & low27) == 0 && ap >= 0x1p-1000 && ap <= 0x1p1000) return true;
  if (!std::isfinite(p) || p == 0 || std::fabs(p) < 0x1p-900 || std::fabs(p) > 0x1p900) return std::fma(a, b, -p) == 0.0;
  const double c = 134217729.0;  // 2^27 + 1
  double ga = c * a, ah = ga - (ga - a), al = a - ah;
  double gb = c * b, bh = gb - (gb - b), bl = b - bh;
  return ((ah * bh - p) + ah * bl + al * bh) + al * bl == 0.0;
}
}  // namespace enc_detail

[[gnu::always_inline]] inline Enc enc_exact(double v) { return Enc{v, 0.0, false, false}; }

// Special values (DESIGN.md: IEEE rules on the defined computation). Enc{NaN, 0} is a value
// known to be NaN and Enc{±inf, 0} one known to be infinite; an infinite radius around a
// finite midpoint is an unknown value (±inf included: an intermediate that may overflow).
// NaN is sticky; an infinite operand gives the IEEE result where the other operand's sign
// (or zero) is certain, else an unknown value. Where operands that may be infinite (or
// zero) could meet as inf - inf, inf * 0, 0 / 0 or inf / inf, the result admits NaN (Enc::nan).
namespace enc_detail {
[[gnu::always_inline]] inline bool finite(double x) { return std::fabs(x) < kInf; }
inline Enc nan_value(bool unv) { return Enc{std::numeric_limits<double>::quiet_NaN(), 0.0, unv, false}; }
inline Enc unknown(bool unv, bool nan) { return Enc{0.0, kInf, unv, nan}; }
/// Whether an enclosure with a finite midpoint may hold 0 (an unknown one may).
inline bool may_zero(const Enc& e) { return !(std::fabs(e.m) > e.r); }
/// a + b with a midpoint that is not finite.
inline Enc special_sum(const Enc& a, const Enc& b) {
  const bool unv = a.unv || b.unv;
  const double m = a.m + b.m;
  if (std::isnan(m) || std::isnan(a.m) || std::isnan(b.m)) return nan_value(unv);
  // An unknown operand beside an infinity may be the opposite infinity.
  if ((finite(a.m) && a.r == kInf) || (finite(b.m) && b.r == kInf)) return unknown(unv, true);
  return Enc{m, 0.0, unv, a.nan || b.nan};  // ±inf plus a bounded value, or two infinities of one sign
}
/// Whether an enclosure's sign is certain and nonzero (or it is an infinity).
inline int sure_sign(const Enc& e) {
  if (!finite(e.m)) return e.m > 0 ? 1 : -1;
  if (e.r == kInf) return 0;
  if (e.m - e.r > 0) return 1;
  if (e.m + e.r < 0) return -1;
  return 0;
}
/// a * b (is_div: a / b) with a midpoint that is not finite.
inline Enc special_mul(const Enc& a, const Enc& b, bool is_div) {
  const bool unv = a.unv || b.unv, nan = a.nan || b.nan;
  if (std::isnan(a.m) || std::isnan(b.m)) return nan_value(unv);
  const Enc& inf = finite(a.m) ? b : a;
  const Enc& other = finite(a.m) ? a : b;
  if (!finite(a.m) && !finite(b.m)) return is_div ? nan_value(unv) : Enc{a.m * b.m, 0.0, unv, nan};
  // finite / inf = ±0; an unknown numerator may be infinite too (inf / inf).
  if (is_div && &inf == &b) return other.r == kInf ? unknown(unv, true) : Enc{a.m / b.m, 0.0, unv, nan};
  if (!is_div && other.m == 0 && other.r == 0) return nan_value(unv);  // inf * 0
  const int s = sure_sign(other);
  // A factor of open sign may be zero (inf * 0); inf over one may be ±inf (inf / 0), or
  // NaN where it may be infinite too.
  if (s == 0) return unknown(unv, nan || !is_div || other.r == kInf);
  return Enc{(inf.m > 0) == (s > 0) ? kInf : -kInf, 0.0, unv, nan};
}
}  // namespace enc_detail

/// An enclosure of [a, b] (a <= b, each already an outward bound).
[[gnu::always_inline]] inline Enc enc_from_bounds(double a, double b, bool unv, bool nan) {
  using namespace enc_detail;
  if (!(a > -kInf) || !(b < kInf)) return Enc{std::isfinite(a) ? a : (std::isfinite(b) ? b : 0.0), kInf, unv, nan};
  if (a == b) return Enc{a, 0.0, unv, nan};
  double m = a + (b - a) * 0.5;
  return Enc{m, rup(std::fmax(b - m, m - a)), unv, nan};
}

[[gnu::always_inline]] inline double enc_lo(const Enc& e) { return e.r == 0 ? e.m : enc_detail::down(e.m - e.r); }
[[gnu::always_inline]] inline double enc_hi(const Enc& e) { return e.r == 0 ? e.m : enc_detail::up(e.m + e.r); }

// Exact-math operations: the only error is the double rounding of the midpoint.
/// Knuth's TwoSum: the exact rounding error of s = RN(a + b) under RN.
[[gnu::always_inline]] inline double two_sum_err(double a, double b, double s) {
  double bb = s - a;
  return (a - (s - bb)) + (b - bb);
}

[[gnu::always_inline]] inline Enc operator+(const Enc& a, const Enc& b) {
  double m = a.m + b.m;
  if (!enc_detail::finite(m)) [[unlikely]]
    return enc_detail::special_sum(a, b);
  double e = std::fabs(two_sum_err(a.m, b.m, m));
  double r = (a.r == 0 && b.r == 0 && e == 0) ? 0.0 : enc_detail::rup(a.r + b.r + e);
  Enc s{m, r, a.unv || b.unv, a.nan || b.nan};
  // Two operands that may both be infinite may be opposite infinities.
  if (r == enc_detail::kInf) [[unlikely]]
    s.nan = s.nan || (a.r == enc_detail::kInf && b.r == enc_detail::kInf);
  return s;
}
[[gnu::always_inline]] inline Enc operator-(const Enc& a) { return Enc{-a.m, a.r, a.unv, a.nan}; }
[[gnu::always_inline]] inline Enc operator-(const Enc& a, const Enc& b) { return a + (-b); }
[[gnu::always_inline]] inline Enc operator*(const Enc& a, const Enc& b) {
  double m = a.m * b.m;
  if (!enc_detail::finite(m)) [[unlikely]]
    return enc_detail::special_mul(a, b, false);
  const bool unv = a.unv || b.unv, nan = a.nan || b.nan;
  // An exact zero times anything finite is an exact zero.
  if ((a.m == 0 && a.r == 0 && std::isfinite(b.m) && b.r < enc_detail::kInf) ||
      (b.m == 0 && b.r == 0 && std::isfinite(a.m) && a.r < enc_detail::kInf))
    return Enc{m, 0.0, unv, nan};
  double r = enc_detail::rup(std::fabs(a.m) * b.r + a.r * std::fabs(b.m) + a.r * b.r + std::fabs(m) * 0x1p-53 + 0x1p-1074);
  if (a.r == 0 && b.r == 0 && enc_detail::product_exact(a.m, b.m, m)) r = 0.0;
  Enc p{m, r, unv, nan};
  // A factor that may be infinite times one that may be zero (inf * 0).
  if (r == enc_detail::kInf) [[unlikely]]
    p.nan = nan || (a.r == enc_detail::kInf && enc_detail::may_zero(b)) || (b.r == enc_detail::kInf && enc_detail::may_zero(a));
  return p;
}
inline Enc operator/(const Enc& a, const Enc& b) {
  if (!enc_detail::finite(a.m) || !enc_detail::finite(b.m)) return enc_detail::special_mul(a, b, true);
  const bool unv = a.unv || b.unv, nan = a.nan || b.nan;
  double den = (std::fabs(b.m) - b.r) * (1.0 - 0x1p-50);
  // A denominator that may be zero (or infinite): x / 0 is ±inf, 0 / 0 and inf / inf NaN
  // (a numerator that may be infinite may be zero too).
  if (!(den > 0)) return enc_detail::unknown(unv, nan || enc_detail::may_zero(a));
  double q = a.m / b.m;
  double r = enc_detail::rup((a.r + std::fabs(q) * b.r) / den + std::fabs(q) * 0x1p-53 + 0x1p-1074);
  if (a.r == 0 && b.r == 0 && std::fma(q, b.m, -a.m) == 0.0) r = 0.0;  // exact quotient
  return Enc{q, r, unv, nan};
}

/// Mandated rounding: [lo, hi] maps to [RN(lo), RN(hi)] (rounding is monotone).
[[gnu::always_inline]] inline Enc enc_round_to(const Enc& a, DType d) {
  if (!enc_detail::finite(a.m)) [[unlikely]]
    return a;  // NaN and ±inf are exact in every format
  const double q = round_to(d, a.m);
  if (a.r == 0) return Enc{q, 0.0, a.unv, a.nan};
  // Quick exit when [m - r, m + r] lies strictly inside q's rounding cell: the neighbours
  // of a nonzero finite q are at least ulp(q)/2 away, so every point within ulp(q)/4 of q
  // rounds to q. m - q is exact (q is m rounded to a narrower format: Sterbenz), and the
  // sum's rounding is covered by the 2^-50 factor.
  if (q != 0 && std::fabs(q) < enc_detail::kInf &&
      (std::fabs(a.m - q) + a.r) * (1.0 + 0x1p-50) < 0.25 * ulp(d, q))
    return Enc{q, 0.0, a.unv, a.nan};
  return enc_from_bounds(round_to(d, enc_lo(a)), round_to(d, enc_hi(a)), a.unv, a.nan);
}

/// 1/sqrt over [lo, hi], decreasing; each endpoint evaluation (two RN steps) is pushed
/// outward by 2^-50 relative.
inline Enc enc_rsqrt(const Enc& a) {
  if (std::isnan(a.m) || a.m == -enc_detail::kInf) return enc_detail::nan_value(a.unv);
  if (a.m == enc_detail::kInf) return Enc{0.0, 0.0, a.unv, a.nan};
  double lo = enc_lo(a), hi = enc_hi(a);
  if (!(lo > 0)) return enc_detail::unknown(a.unv, a.nan || !(lo >= 0));  // 1/sqrt of a negative is NaN
  double fa = 1.0 / std::sqrt(hi) * (1.0 - 0x1p-50), fb = 1.0 / std::sqrt(lo) * (1.0 + 0x1p-50);
  return enc_from_bounds(fa, fb, a.unv, a.nan);
}

/// Widening by one rounding in a low-precision dtype with unit roundoff u: |RN(x) - x| <=
/// u|x| + eta, eta the absolute error below the normal range (half the smallest
/// subnormal, or the smallest normal when results flush to zero). Overflow admits ±inf.
[[gnu::always_inline]] inline Enc enc_round_in(const Enc& a, DType d, double u, bool ftz) {
  if (!enc_detail::finite(a.m)) [[unlikely]]
    return a;
  // fp32 (the usual accumulator): a value is an fp32 number iff converting it to float
  // and back gives it again (exact in any rounding mode); the other formats use round_to.
  if (a.r == 0 && (d == DType::f32 ? static_cast<double>(static_cast<float>(a.m)) == a.m : round_to(d, a.m) == a.m) &&
      !(ftz && a.m != 0 && std::fabs(a.m) < min_normal(d)))
    return a;
  double mag = std::fabs(a.m) + a.r;
  if (mag * (1.0 + u) >= max_finite(d)) return Enc{a.m, enc_detail::kInf, a.unv, a.nan};  // RN may overflow to ±inf
  double eta = ftz ? min_normal(d) : min_subnormal(d) * 0.5;
  return Enc{a.m, enc_detail::rup(a.r + u * mag + eta), a.unv, a.nan};
}

/// Widening by k ulps of d (one ulp of x is at most 2^(1-p)|x|, or a subnormal step): a
/// math function of d with k ulps of error. Its result is a number of d, so where the
/// widened value may leave d's range it may be ±inf.
inline Enc enc_widen_ulps(const Enc& a, DType d, double k) {
  if (k == 0 || !enc_detail::finite(a.m)) return a;
  double mag = std::fabs(a.m) + a.r;
  double ulp_rel = std::ldexp(1.0, 1 - format_of(d).p);
  const double r = enc_detail::rup(a.r + k * (ulp_rel * mag + min_subnormal(d)));
  if (!(std::fabs(a.m) + r < max_finite(d))) [[unlikely]]
    return Enc{a.m, enc_detail::kInf, a.unv, a.nan};
  return Enc{a.m, r, a.unv, a.nan};
}

namespace enc_detail {
/// A term's contribution to a sum's magnitude bound: |m| + r. An infinite term adds
/// nothing (the sum is then that infinity, or NaN): the bound stays that of the finite
/// terms, whose partial sums may still overflow.
[[gnu::always_inline]] inline double abs_term(double m, double r) { return finite(m) ? std::fabs(m) + r : 0.0; }
/// Whether a sum accumulated with error bound gamma = g may overflow d to both +inf and -inf
/// (then inf - inf may follow: NaN), given its exact-math enclosure e and a bound abs on
/// its terms' magnitudes (midpoints plus radii). The terms' positive parts sum to at most
/// P = (abs + e.m + e.r) / 2 and their negative parts to N = (abs - e.m + e.r) / 2; a
/// partial sum of any subset in any order the shape permits is sum t_i (1 + theta_i) with
/// |theta_i| <= g (Higham, Accuracy and Stability, Lemma 3.1 and eq. (4.4)), so it lies in
/// [-N (1 + g), P (1 + g)]: +inf needs P (1 + g) >= max_finite, -inf N (1 + g) >= max_finite.
inline bool sum_may_overflow_both(const Enc& e, double abs, double g, DType d) {
  const double P = rup(rup(0.5 * (abs + e.m + e.r)) * (1.0 + g)), N = rup(rup(0.5 * (abs - e.m + e.r)) * (1.0 + g));
  return P >= max_finite(d) && N >= max_finite(d);
}
}  // namespace enc_detail

/// Running sum of enclosures: exact-math sum with the double rounding of the midpoint
/// tracked; under a contract, finish() adds gamma_{n_eff}(u) * sum|t| (Higham, Accuracy
/// and Stability, eq. 4.4 generalized: every term passes through at most n_eff additions).
/// A sum that may overflow its accumulator admits ±inf (an infinite radius), and NaN where
/// its partial sums may overflow both ways.
class EncSum {
 public:
  [[gnu::always_inline]] void add(const Enc& t) {
    double s = m_ + t.m;
    round_err_ += std::fabs(two_sum_err(m_, t.m, s));
    m_ = s;
    r_ += t.r;
    abs_ += enc_detail::abs_term(t.m, t.r);
    unv_ = unv_ || t.unv;
    nan_ = nan_ || t.nan;
    ++n_;
  }
  void merge(const EncSum& o) {
    double s = m_ + o.m_;
    round_err_ += o.round_err_ + std::fabs(two_sum_err(m_, o.m_, s));
    m_ = s;
    r_ += o.r_;
    abs_ += o.abs_;
    unv_ = unv_ || o.unv_;
    nan_ = nan_ || o.nan_;
    n_ += o.n_ + 1;
  }
  /// Without a contract: the exact sum's enclosure. The three running sums of
  /// non-negative terms are themselves rounded n times, so they are scaled up by
  /// (1 + (n+2) 2^-52) before use.
  Enc exact() const {
    if (!enc_detail::finite(m_)) [[unlikely]] {
      if (std::isnan(m_)) return enc_detail::nan_value(unv_);
      // ±inf terms of one sign: exact unless another term is unknown (it may be the
      // opposite infinity).
      return r_ < enc_detail::kInf ? Enc{m_, 0.0, unv_, nan_} : enc_detail::unknown(unv_, true);
    }
    double k = 1.0 + static_cast<double>(n_ + 2) * 0x1p-52;
    double r = r_ * k + round_err_ * k;
    return Enc{m_, r == 0 ? 0.0 : enc_detail::rup(r), unv_, nan_};
  }
  /// Under a contract: accumulated in dtype d with unit roundoff u along n_eff additions.
  /// With ftz (a sum that flushes subnormals), each of the n terms and n_eff additions may
  /// also lose up to d's smallest normal.
  Enc contract(DType d, double u, int64_t n_eff, bool ftz = false) const {
    Enc e = exact();
    double abs = abs_ * (1.0 + static_cast<double>(n_ + 2) * 0x1p-52);
    if (!enc_detail::finite(e.m)) [[unlikely]] {
      // ±inf terms: the finite terms' partial sums may still overflow, to the opposite
      // infinity too (the order is the impl's).
      if (std::isinf(e.m) && !(abs * (1.0 + gamma_n(n_eff, u)) < max_finite(d))) e.nan = true;
      return e;
    }
    if (abs == 0) return e;
    double g = gamma_n(n_eff, u);
    if (!(g < enc_detail::kInf)) return Enc{e.m, enc_detail::kInf, true, true};  // nothing bounds the partial sums
    if (abs * (1.0 + g) >= max_finite(d)) [[unlikely]]
      return Enc{e.m, enc_detail::kInf, e.unv, e.nan || enc_detail::sum_may_overflow_both(e, abs, g, d)};
    const double flush = ftz ? static_cast<double>(n_ + n_eff) * min_normal(d) : 0.0;
    return Enc{e.m, enc_detail::rup(enc_detail::rup(e.r + g * abs) + flush), e.unv, e.nan};
  }
  int64_t count() const { return n_; }
  /// A sum whose state was built by add()'s operations elsewhere (several columns' sums
  /// side by side in vector lanes: reference/rms_norm_fast.hpp, rms_norm_lanes.inc).
  static EncSum from_state(double m, double r, double round_err, double abs, int64_t n, bool unv, bool nan) {
    EncSum s;
    s.m_ = m, s.r_ = r, s.round_err_ = round_err, s.abs_ = abs, s.n_ = n, s.unv_ = unv, s.nan_ = nan;
    return s;
  }

 private:
  double m_ = 0, r_ = 0, round_err_ = 0, abs_ = 0;
  int64_t n_ = 0;
  bool unv_ = false, nan_ = false;
};

}  // namespace kv
