// The defined computation over MPFI intervals (Boost.Multiprecision's mpfi_float): every
// operation is outward-rounded, so the result interval contains the exact defined value.
// Mandated roundings map [lo, hi] to [RN(lo), RN(hi)] (rounding is monotone).
#pragma once
#include <boost/multiprecision/mpfi.hpp>

#include "reference/policy.hpp"

namespace kv {

using mpfi_float = boost::multiprecision::mpfi_float;

inline void set_mpfi_bits(unsigned bits) {
  mpfi_float::default_precision(static_cast<unsigned>(std::ceil(bits * 0.30102999566398120)) + 1);
}

struct MpfiPolicy {
  using T = mpfi_float;
  static constexpr bool kEnclosure = false;
  T c(double v) const { return T(v); }
  T acc(const T& x) const { return x; }
  T div(const T& a, const T& b) const { return a / b; }
  static double rn(const mpfr_float& v, DType d) {
    double hi, lo;
    split_hi_lo(v, hi, lo);
    return round_to(d, hi, lo);
  }
  T mand(const T& x, DType d) const {
    return T(rn(boost::multiprecision::lower(x), d), rn(boost::multiprecision::upper(x), d));
  }
  T rsqrt(const T& x) const { return T(1) / sqrt(x); }
  T exp(const T& x) const { return boost::multiprecision::exp(x); }
  T log(const T& x) const { return boost::multiprecision::log(x); }
  T tanh(const T& x) const { return boost::multiprecision::tanh(x); }
  T sin(const T& x) const { return boost::multiprecision::sin(x); }
  T cos(const T& x) const { return boost::multiprecision::cos(x); }
  T max(const T& a, const T& b) const {
    using boost::multiprecision::lower, boost::multiprecision::upper;
    mpfr_float lo = lower(a) < lower(b) ? lower(b) : lower(a), hi = upper(a) < upper(b) ? upper(b) : upper(a);
    return T(lo, hi);
  }
  T or_zero(const T& x) const { return x; }
  /// x * x cut at 0 (mpfi's product treats its operands as independent).
  T sq(const T& x) const {
    T r = x * x;
    if (boost::multiprecision::lower(r) < 0) r = T(mpfr_float(0), boost::multiprecision::upper(r));
    return r;
  }
  T max_sub_den(const T& d) const { return d; }
  T max_sub_log(const T& d) const { return log(d); }
  T at_least(const T& x, double) const { return x; }
  struct Sum {
    T s = T(0);
    void add(const T& t) { s += t; }
    void merge(const Sum& o) { s += o.s; }
  };
  Sum sum() const { return Sum{}; }
  T finish(const Sum& s, const char*) const { return s.s; }
};

}  // namespace kv
