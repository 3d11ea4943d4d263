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

[[gnu::always_inline]] inline Enc enc_exact(double v) { return Enc{v, 0.0, false}; }

// Special values (DESIGN.md: IEEE rules on the defined computation). Enc{NaN, 0} is a value
// known to be NaN and Enc{±inf, 0} one known to be infinite; an infinite radius around a
// finite midpoint is an unknown value. NaN is sticky; an infinite operand gives the IEEE
// result where the other operand's sign (or zero) is certain, else an unknown value.
namespace enc_detail {
[[gnu::always_inline]] inline bool finite(double x) { return std::fabs(x) < kInf; }
inline Enc nan_value(bool unv) { return Enc{std::numeric_limits<double>::quiet_NaN(), 0.0, unv}; }
inline Enc unknown(bool unv) { return Enc{0.0, kInf, unv}; }
/// a + b with a midpoint that is not finite.
inline Enc special_sum(const Enc& a, const Enc& b) {
  const bool unv = a.unv || b.unv;
  const double m = a.m + b.m;
  if (std::isnan(m) || std::isnan(a.m) || std::isnan(b.m)) return nan_value(unv);
  if ((finite(a.m) && a.r == kInf) || (finite(b.m) && b.r == kInf)) return unknown(unv);
  return Enc{m, 0.0, unv};  // ±inf plus a bounded value, or two infinities of one sign
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
  const bool unv = a.unv || b.unv;
  if (std::isnan(a.m) || std::isnan(b.m)) return nan_value(unv);
  const Enc& inf = finite(a.m) ? b : a;
  const Enc& other = finite(a.m) ? a : b;
  if (!finite(a.m) && !finite(b.m)) return is_div ? nan_value(unv) : Enc{a.m * b.m, 0.0, unv};
  if (is_div && &inf == &b) return other.r == kInf ? unknown(unv) : Enc{a.m / b.m, 0.0, unv};  // finite / inf = ±0
  if (!is_div && other.m == 0 && other.r == 0) return nan_value(unv);                       // inf * 0
  const int s = sure_sign(other);
  if (s == 0) return unknown(unv);
  return Enc{(inf.m > 0) == (s > 0) ? kInf : -kInf, 0.0, unv};
}
}  // namespace enc_detail

/// An enclosure of [a, b] (a <= b, each already an outward bound).
[[gnu::always_inline]] inline Enc enc_from_bounds(double a, double b, bool unv) {
  using namespace enc_detail;
  if (!(a > -kInf) || !(b < kInf)) return Enc{std::isfinite(a) ? a : (std::isfinite(b) ? b : 0.0), kInf, unv};
  if (a == b) return Enc{a, 0.0, unv};
  double m = a + (b - a) * 0.5;
  return Enc{m, rup(std::fmax(b - m, m - a)), unv};
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
  return Enc{m, r, a.unv || b.unv};
}
[[gnu::always_inline]] inline Enc operator-(const Enc& a) { return Enc{-a.m, a.r, a.unv}; }
[[gnu::always_inline]] inline Enc operator-(const Enc& a, const Enc& b) { return a + (-b); }
[[gnu::always_inline]] inline Enc operator*(const Enc& a, const Enc& b) {
  double m = a.m * b.m;
  if (!enc_detail::finite(m)) [[unlikely]]
    return enc_detail::special_mul(a, b, false);
  // An exact zero times anything finite is an exact zero.
  if ((a.m == 0 && a.r == 0 && std::isfinite(b.m) && b.r < enc_detail::kInf) ||
      (b.m == 0 && b.r == 0 && std::isfinite(a.m) && a.r < enc_detail::kInf))
    return Enc{m, 0.0, a.unv || b.unv};
  double r = enc_detail::rup(std::fabs(a.m) * b.r + a.r * std::fabs(b.m) + a.r * b.r + std::fabs(m) * 0x1p-53 + 0x1p-1074);
  if (a.r == 0 && b.r == 0 && enc_detail::product_exact(a.m, b.m, m)) r = 0.0;
  return Enc{m, r, a.unv || b.unv};
}
inline Enc operator/(const Enc& a, const Enc& b) {
  if (!enc_detail::finite(a.m) || !enc_detail::finite(b.m)) return enc_detail::special_mul(a, b, true);
  double den = (std::fabs(b.m) - b.r) * (1.0 - 0x1p-50);
  if (!(den > 0)) return enc_detail::unknown(a.unv || b.unv);
  double q = a.m / b.m;
  double r = enc_detail::rup((a.r + std::fabs(q) * b.r) / den + std::fabs(q) * 0x1p-53 + 0x1p-1074);
  if (a.r == 0 && b.r == 0 && std::fma(q, b.m, -a.m) == 0.0) r = 0.0;  // exact quotient
  return Enc{q, r, a.unv || b.unv};
}

/// Mandated rounding: [lo, hi] maps to [RN(lo), RN(hi)] (rounding is monotone).
[[gnu::always_inline]] inline Enc enc_round_to(const Enc& a, DType d) {
  if (!enc_detail::finite(a.m)) [[unlikely]]
    return a;  // NaN and ±inf are exact in every format
  const double q = round_to(d, a.m);
  if (a.r == 0) return Enc{q, 0.0, a.unv};
  // Quick exit when [m - r, m + r] lies strictly inside q's rounding cell: the neighbours
  // of a nonzero finite q are at least ulp(q)/2 away, so every point within ulp(q)/4 of q
  // rounds to q. m - q is exact (q is m rounded to a narrower format: Sterbenz), and the
  // sum's rounding is covered by the 2^-50 factor.
  if (q != 0 && std::fabs(q) < enc_detail::kInf &&
      (std::fabs(a.m - q) + a.r) * (1.0 + 0x1p-50) < 0.25 * ulp(d, q))
    return Enc{q, 0.0, a.unv};
  return enc_from_bounds(round_to(d, enc_lo(a)), round_to(d, enc_hi(a)), a.unv);
}

/// 1/sqrt over [lo, hi], decreasing; each endpoint evaluation (two RN steps) is pushed
/// outward by 2^-50 relative.
inline Enc enc_rsqrt(const Enc& a) {
  if (std::isnan(a.m) || a.m == -enc_detail::kInf) return enc_detail::nan_value(a.unv);
  if (a.m == enc_detail::kInf) return Enc{0.0, 0.0, a.unv};
  double lo = enc_lo(a), hi = enc_hi(a);
  if (!(lo > 0)) return enc_detail::unknown(a.unv);
  double fa = 1.0 / std::sqrt(hi) * (1.0 - 0x1p-50), fb = 1.0 / std::sqrt(lo) * (1.0 + 0x1p-50);
  return enc_from_bounds(fa, fb, a.unv);
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
  if (mag * (1.0 + u) >= max_finite(d)) return Enc{a.m, enc_detail::kInf, a.unv};
  double eta = ftz ? min_normal(d) : min_subnormal(d) * 0.5;
  return Enc{a.m, enc_detail::rup(a.r + u * mag + eta), a.unv};
}

/// Widening by k ulps of d (one ulp of x is at most 2^(1-p)|x|, or a subnormal step).
inline Enc enc_widen_ulps(const Enc& a, DType d, double k) {
  if (k == 0 || !enc_detail::finite(a.m)) return a;
  double mag = std::fabs(a.m) + a.r;
  double ulp_rel = std::ldexp(1.0, 1 - format_of(d).p);
  return Enc{a.m, enc_detail::rup(a.r + k * (ulp_rel * mag + min_subnormal(d))), a.unv};
}

/// Running sum of enclosures: exact-math sum with the double rounding of the midpoint
/// tracked; under a contract, finish() adds gamma_{n_eff}(u) * sum|t| (Higham, Accuracy
/// and Stability, eq. 4.4 generalized: every term passes through at most n_eff additions).
class EncSum {
 public:
  [[gnu::always_inline]] void add(const Enc& t) {
    double s = m_ + t.m;
    round_err_ += std::fabs(two_sum_err(m_, t.m, s));
    m_ = s;
    r_ += t.r;
    abs_ += std::fabs(t.m) + t.r;
    unv_ = unv_ || t.unv;
    ++n_;
  }
  void merge(const EncSum& o) {
    double s = m_ + o.m_;
    round_err_ += o.round_err_ + std::fabs(two_sum_err(m_, o.m_, s));
    m_ = s;
    r_ += o.r_;
    abs_ += o.abs_;
    unv_ = unv_ || o.unv_;
    n_ += o.n_ + 1;
  }
  /// Without a contract: the exact sum's enclosure. The three running sums of
  /// non-negative terms are themselves rounded n times, so they are scaled up by
  /// (1 + (n+2) 2^-52) before use.
  Enc exact() const {
    if (!enc_detail::finite(m_)) [[unlikely]] {
      if (std::isnan(m_)) return enc_detail::nan_value(unv_);
      // ±inf terms of one sign: exact unless another term is unknown.
      return r_ < enc_detail::kInf ? Enc{m_, 0.0, unv_} : enc_detail::unknown(unv_);
    }
    double k = 1.0 + static_cast<double>(n_ + 2) * 0x1p-52;
    double r = r_ * k + round_err_ * k;
    return Enc{m_, r == 0 ? 0.0 : enc_detail::rup(r), unv_};
  }
  /// Under a contract: accumulated in dtype d with unit roundoff u along n_eff additions.
  /// With ftz (a sum that flushes subnormals), each of the n terms and n_eff additions may
  /// also lose up to d's smallest normal.
  Enc contract(DType d, double u, int64_t n_eff, bool ftz = false) const {
    Enc e = exact();
    if (!enc_detail::finite(e.m)) return e;
    double abs = abs_ * (1.0 + static_cast<double>(n_ + 2) * 0x1p-52);
    if (abs == 0) return e;
    double g = gamma_n(n_eff, u);
    if (!(g < enc_detail::kInf)) return Enc{e.m, enc_detail::kInf, true};
    if (abs * (1.0 + g) >= max_finite(d)) return Enc{e.m, enc_detail::kInf, e.unv};
    const double flush = ftz ? static_cast<double>(n_ + n_eff) * min_normal(d) : 0.0;
    return Enc{e.m, enc_detail::rup(enc_detail::rup(e.r + g * abs) + flush), e.unv};
  }
  int64_t count() const { return n_; }
  /// A sum whose state was built by add()'s operations elsewhere (several columns' sums
  /// side by side in vector lanes: reference/rms_norm_fast.hpp, rms_norm_lanes.inc).
  static EncSum from_state(double m, double r, double round_err, double abs, int64_t n, bool unv) {
    EncSum s;
    s.m_ = m, s.r_ = r, s.round_err_ = round_err, s.abs_ = abs, s.n_ = n, s.unv_ = unv;
    return s;
  }

 private:
  double m_ = 0, r_ = 0, round_err_ = 0, abs_ = 0;
  int64_t n_ = 0;
  bool unv_ = false;
};

}  // namespace kv
