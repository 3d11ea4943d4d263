// DualPolicy's primitives with the dtype known at compile time: the same results, bit
// for bit, as DualPolicy (EncPolicy{} and EncPolicy{&k} side by side), only cheaper.
// The generic mandated rounding (enc_round_to) calls round_to, whose three-way branch on
// the dropped bits is taken at random, and ulp(), out of line; here a value in the
// target's normal range is rounded by an integer add on its bits (branch-free), and the
// contract's constants of acc() (unit roundoff, eta, max_finite) are read once per pass.
// Everything else (operators, sums, rsqrt, finish) is DualPolicy's own.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "reference/dual_policy.hpp"

namespace kv {

namespace fast_detail {

/// Format constants as compile-time values (format_of, min_normal, max_finite index a
/// table with a run-time dtype).
template <DType D>
struct Fmt;
template <>
struct Fmt<DType::f32> {
  static constexpr int p = 24, emin = -126;
  static constexpr double min_normal = 0x1p-126, max_finite = 0x1.fffffep127;
};
template <>
struct Fmt<DType::f16> {
  static constexpr int p = 11, emin = -14;
  static constexpr double min_normal = 0x1p-14, max_finite = 0x1.ffcp15;
};
template <>
struct Fmt<DType::bf16> {
  static constexpr int p = 8, emin = -126;
  static constexpr double min_normal = 0x1p-126, max_finite = 0x1.fep127;
};

[[gnu::always_inline]] inline uint64_t bits_of(double x) {
  uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}
[[gnu::always_inline]] inline double from_bits(uint64_t b) {
  double x;
  std::memcpy(&x, &b, 8);
  return x;
}

/// round_to(D, x), exactly. For min_normal(D) <= |x| <= max_finite(D) the quantum is
/// 2^(e - p + 1), i.e. the low s = 53 - p significand bits of x are dropped: adding
/// 2^(s-1) - 1 plus the lowest kept bit to the bits of |x| carries into the kept bits iff
/// the dropped part is above half, or exactly half with an odd kept part (RNE); a carry
/// out of the significand steps the exponent, which is the right result (a power of 2,
/// at most max_finite since x is). Integer operations only: independent of the FPU
/// rounding mode, as round_to is. Other values (zeros, subnormals of D, overflow, NaN)
/// go to round_to itself.
template <DType D>
[[gnu::always_inline]] inline double rne(double x) {
  const double a = std::fabs(x);
  if (a >= Fmt<D>::min_normal && a <= Fmt<D>::max_finite) {
    constexpr int s = 53 - Fmt<D>::p;
    const uint64_t b = bits_of(x);
    const uint64_t r = (b + ((uint64_t(1) << (s - 1)) - 1) + ((b >> s) & 1)) & ~((uint64_t(1) << s) - 1);
    return from_bits(r);
  }
  return round_to(D, x);
}

/// ulp(D, x), exactly (the same formula with the format's constants folded).
template <DType D>
[[gnu::always_inline]] inline double ulp_of(double x) {
  const uint64_t b = bits_of(x);
  const int biased = static_cast<int>((b >> 52) & 0x7FF);
  if (biased == 0x7FF) return __builtin_inf();
  const int e = biased == 0 ? Fmt<D>::emin : biased - 1023;
  const int q = (e < Fmt<D>::emin ? Fmt<D>::emin : e) - (Fmt<D>::p - 1);
  return from_bits(static_cast<uint64_t>(q + 1023) << 52);
}

/// enc_round_to(a, D), statement for statement, with rne and ulp_of.
template <DType D>
[[gnu::always_inline]] inline Enc round_enc(const Enc& a) {
  const double q = rne<D>(a.m);
  if (a.r == 0) return Enc{q, 0.0, a.unv, a.nan};
  if (q != 0 && std::fabs(q) < enc_detail::kInf &&
      (std::fabs(a.m - q) + a.r) * (1.0 + 0x1p-50) < 0.25 * ulp_of<D>(q))
    return Enc{q, 0.0, a.unv, a.nan};
  return enc_from_bounds(rne<D>(enc_lo(a)), rne<D>(enc_hi(a)), a.unv, a.nan);
}

[[gnu::always_inline]] inline Enc round_enc(const Enc& a, DType d) {
  switch (d) {
    case DType::f32: return round_enc<DType::f32>(a);
    case DType::bf16: return round_enc<DType::bf16>(a);
    case DType::f16: return round_enc<DType::f16>(a);
    default: return enc_round_to(a, d);
  }
}

/// enc_round_in(a, d, u, ftz) with its constants computed once.
struct AccIn {
  DType d = DType::f32;
  double u = 0, eta = 0, min_normal = 0, max_finite = 0;
  bool ftz = false;
  AccIn() = default;
  AccIn(DType d_, double u_, bool ftz_)
      : d(d_), u(u_), eta(ftz_ ? kv::min_normal(d_) : min_subnormal(d_) * 0.5), min_normal(kv::min_normal(d_)),
        max_finite(kv::max_finite(d_)), ftz(ftz_) {}
  [[gnu::always_inline]] bool representable(double m) const {
    switch (d) {
      case DType::f32: return static_cast<double>(static_cast<float>(m)) == m;  // exact in any mode
      case DType::bf16: return rne<DType::bf16>(m) == m;
      case DType::f16: return rne<DType::f16>(m) == m;
      default: return round_to(d, m) == m;
    }
  }
  [[gnu::always_inline]] Enc operator()(const Enc& a) const {
    if (a.r == 0 && representable(a.m) && !(ftz && a.m != 0 && std::fabs(a.m) < min_normal))
      return a;
    const double mag = std::fabs(a.m) + a.r;
    if (mag * (1.0 + u) >= max_finite) return Enc{a.m, enc_detail::kInf, a.unv, a.nan};
    return Enc{a.m, enc_detail::rup(a.r + u * mag + eta), a.unv, a.nan};
  }
};

}  // namespace fast_detail

/// DualPolicy with the cheaper, bit-identical acc() and mand().
struct FastDualPolicy {
  using T = Dual;
  static constexpr bool kEnclosure = true;
  DualPolicy base;
  fast_detail::AccIn in;
  explicit FastDualPolicy(const Contract* con) : base(con), in(con->acc, con->unit(), con->ftz) {}
  [[gnu::always_inline]] T c(double v) const { return {enc_exact(v), enc_exact(v)}; }
  [[gnu::always_inline]] T acc(const T& x) const { return {x.ref, in(x.con)}; }
  [[gnu::always_inline]] T mand(const T& x, DType d) const {
    return {fast_detail::round_enc(x.ref, d), fast_detail::round_enc(x.con, d)};
  }
  T div(const T& a, const T& b) const { return base.div(a, b); }
  T rsqrt(const T& x) const { return base.rsqrt(x); }
  using Sum = DualPolicy::Sum;
  Sum sum() const { return Sum{}; }
  T finish(const Sum& s, const char* axis) const { return base.finish(s, axis); }
};

}  // namespace kv
