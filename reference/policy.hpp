// Scalar policies a reference is written against: the primitives of DESIGN.md
// (arithmetic, acc() for an accumulator-precision operation, mand() for a mandated
// rounding, math functions, sums along a named reduced axis).
#pragma once
#include <qd/dd_real.h>

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/contract.hpp"
#include "core/dtype.hpp"
#include "reference/enc_math.hpp"
#include "reference/enclosure.hpp"

namespace kv {

using mpfr_float = boost::multiprecision::mpfr_float;

/// Sets mpfr_float's default precision in bits (Boost counts decimal digits).
inline void set_mpfr_bits(unsigned bits) {
  mpfr_float::default_precision(static_cast<unsigned>(std::ceil(bits * 0.30102999566398120)) + 1);
}

/// Splits a high-precision value into hi + lo doubles whose sum has the value's sign
/// beyond hi exactly (enough to round it to any format of at most 24 bits).
inline void split_hi_lo(double x, double& hi, double& lo) { hi = x, lo = 0; }
inline void split_hi_lo(const dd_real& x, double& hi, double& lo) { hi = x.x[0], lo = x.x[1]; }
inline void split_hi_lo(const mpfr_float& x, double& hi, double& lo) {
  hi = x.convert_to<double>();
  mpfr_float rest = x - hi;
  lo = rest.convert_to<double>();
}

inline double to_double(double x) { return x; }
inline double to_double(const dd_real& x) { return x.x[0]; }
inline double to_double(const mpfr_float& x) { return x.convert_to<double>(); }

/// The defined computation in a high-precision type S: accumulator operations are exact,
/// mandated roundings are exact RNE.
template <class S>
struct ValuePolicy {
  using T = S;
  static constexpr bool kEnclosure = false;
  T c(double v) const { return T(v); }
  T acc(const T& x) const { return x; }
  /// a / b (an approximate division, Contract math_ulps "div", only widens enclosures).
  T div(const T& a, const T& b) const { return a / b; }
  T mand(const T& x, DType d) const {
    double hi, lo;
    split_hi_lo(x, hi, lo);
    return T(round_to(d, hi, lo));
  }
  T rsqrt(const T& x) const {
    using std::sqrt;
    return T(1) / sqrt(x);
  }
  // Math functions found by argument-dependent lookup: std for double, qd for dd_real
  // (its documented error is a few dd ulps), MPFR (correctly rounded) for mpfr_float.
  T exp(const T& x) const {
    using std::exp;
    return exp(x);
  }
  T log(const T& x) const {
    using std::log;
    return log(x);
  }
  T tanh(const T& x) const {
    if constexpr (std::is_same_v<S, dd_real>) {
      // qd's tanh overflows in exp(2x) for large |x| (NaN); (1 - t)/(1 + t) with
      // t = exp(-2|x|) is the same function and never overflows.
      if (abs(x) > 1.0) {
        dd_real t = exp(-2.0 * abs(x));
        dd_real r = (1.0 - t) / (1.0 + t);
        return x < 0.0 ? -r : r;
      }
      return ::tanh(x);
    } else {
      using std::tanh;
      return tanh(x);
    }
  }
  T sin(const T& x) const {
    using std::sin;
    return sin(x);
  }
  T cos(const T& x) const {
    using std::cos;
    return cos(x);
  }
  T max(const T& a, const T& b) const { return a < b ? b : a; }
  T sq(const T& x) const { return x * x; }
  /// x, which the definition keeps at or above b (a mean of squares): values need no cut.
  T at_least(const T& x, double b) const {
    (void)b;
    return x;
  }
  /// d = sum_j exp(z_j - max z) and log d: a value needs no cut (see EncPolicy::max_sub_den).
  T max_sub_den(const T& d) const { return d; }
  T max_sub_log(const T& d) const { return log(d); }
  /// Where an fp32 intermediate may overflow to inf and IEEE rules then give 0 (sigmoid of
  /// a very negative argument), an impl's result may be 0: only enclosures widen to it.
  T or_zero(const T& x) const { return x; }
  struct Sum {
    T s = T(0);
    void add(const T& t) { s += t; }
    void merge(const Sum& o) { s += o.s; }
  };
  Sum sum() const { return Sum{}; }
  T finish(const Sum& s, const char* axis) const {
    (void)axis;
    return s.s;
  }
};

/// The enclosure type. With k == nullptr it encloses the exact defined value (the
/// certified bound of the double reference); with a contract it encloses every output a
/// correct impl under k may produce.
struct EncPolicy {
  using T = Enc;
  static constexpr bool kEnclosure = true;
  const Contract* k = nullptr;
  [[gnu::always_inline]] T c(double v) const { return enc_exact(v); }
  [[gnu::always_inline]] T acc(const T& x) const { return k ? enc_round_in(x, k->acc, k->unit(), k->ftz) : x; }
  [[gnu::always_inline]] T mand(const T& x, DType d) const { return enc_round_to(x, d); }
  /// a / b: one acc rounding, unless the contract declares an approximate division ("div":
  /// within its ulps of the quotient, or via "rcp": a times rcp(b) within those ulps).
  T div(const T& a, const T& b) const {
    const MathError* e = k ? k->op_error("div") : nullptr;
    if (!e) return acc(a / b);
    if (e->via == "rcp") return acc(a * enc_widen_ulps(enc_exact(1.0) / b, e->in, e->ulps));
    return acc(enc_widen_ulps(a / b, e->in, e->ulps));
  }
  /// rsqrtf: its declared ulps are in the unit the contract names (fp32 ulps by default, as
  /// calibrate-math measures them); any further rounding is the caller's acc().
  T rsqrt(const T& x) const { return fn(enc_rsqrt(x), "rsqrt"); }
  /// The other math functions likewise.
  T fn(const T& r, const char* name) const {
    if (!k) return r;
    const MathError& e = k->math(name);
    return enc_widen_ulps(r, e.in, e.ulps);
  }
  /// exp's argument as an impl evaluating exp(x) = exp2(x * log2 e) rounds it: the fp32
  /// product and log2 e's own fp32 rounding each cost 2^-24 relative, so the argument is
  /// x (1 + t) with |t| <= 2^-23 (with room for the rounding of this bound).
  bool exp_via_exp2() const { return k && k->math("exp").via == "exp2"; }
  static T exp2_arg(const T& x) {
    const double t = 0x1.01p-23;
    return Enc{x.m, enc_detail::rup(x.r + (std::fabs(x.m) + x.r) * t), x.unv, x.nan};
  }
  T exp(const T& x) const { return fn(enc_exp(exp_via_exp2() ? exp2_arg(x) : x), "exp"); }
  /// The same with exp(x.m) already evaluated.
  T exp_from(const T& x, double em) const { return exp_via_exp2() ? exp(x) : fn(enc_exp_from(x, em), "exp"); }
  T log(const T& x) const { return fn(enc_log(x), "log"); }
  T tanh(const T& x) const { return fn(enc_tanh(x), "tanh"); }
  T sin(const T& x) const { return fn(enc_sin(x), "sin"); }
  T cos(const T& x) const { return fn(enc_cos(x), "cos"); }
  T max(const T& a, const T& b) const { return enc_max(a, b); }
  T sq(const T& x) const { return enc_sq(x); }
  /// x cut at b where every correct impl's value is at least b: a sum of terms that are
  /// each >= 0 is >= 0 in any order under any monotone rounding, which the contract's
  /// widening by gamma * sum|t| (relative to the terms' upper ends) forgets.
  T at_least(const T& x, double b) const { return enc_at_least(x, b); }
  /// d = sum_j exp(z_j - m), m = max_j z_j, the z_j as the impl computed them: the max's own
  /// term is exp(0) and the others are >= 0, so d >= exp(0) (1 in exact math). Independent
  /// enclosures of z_j and m forget that z_k - m = 0 (logits whose contract radius is a few
  /// units, as FLCE's at |z| ~ 1e5, reach d's lower bound 0 and log d is unbounded). Under a
  /// contract: exp(0) within its ulps, times another exp(0) where an online form rescales
  /// the max's partial sum, with 2^-7 of slack for that product's rounding and an impl that
  /// computes a logit twice.
  double max_sub_floor() const {
    if (!k) return 1.0;
    const double e0 = enc_lo(exp(c(0)));
    return e0 * e0 * (1.0 - 0x1p-7);
  }
  T max_sub_den(const T& d) const { return enc_at_least(d, max_sub_floor()); }
  /// log d with the same cut, taken from d's bounds (a wide d's midpoint form loses it).
  T max_sub_log(const T& d) const { return fn(enc_log_at_least(d, max_sub_floor()), "log"); }
  T or_zero(const T& x) const {
    if (!k) return x;
    return enc_from_bounds(std::fmin(0.0, enc_lo(x)), std::fmax(0.0, enc_hi(x)), x.unv, x.nan);
  }
  using Sum = EncSum;
  Sum sum() const { return Sum{}; }
  T finish(const Sum& s, const char* axis) const {
    if (!k) return s.exact();
    const ReductionShape& r = k->reduction(axis);
    return s.contract(k->acc_of(axis), k->unit_of(axis), r.n_eff(), r.ftz);
  }
};

}  // namespace kv
