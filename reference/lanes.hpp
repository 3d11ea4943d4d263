// Doubles side by side (SSE2 pairs on x86-64; one lane elsewhere, or with
// KV_LANES_SCALAR) and the enclosure primitives of enclosure.hpp / dual_fast.hpp on
// them. Each lane computes exactly what the scalar function computes: IEEE operations
// are lane-wise and correctly rounded alike, and there is no contraction (baseline SSE2
// has no FMA; -ffp-contract=off). Branches become lane masks; a lane for which the
// scalar function would take a branch not written here is cleared in a mask for the
// caller to redo with the scalar code. (GCC's generic vector extensions were tried
// first: on SSE2 they turn mask conversions into per-lane scalar code.)
#pragma once
#include <cstdint>
#include <cstring>

#include "core/dtype.hpp"
#include "reference/dual_fast.hpp"

#if defined(__SSE2__) && !defined(KV_LANES_SCALAR)
#include <emmintrin.h>
#define KV_LANES_SSE2 1
#endif

namespace kv::lanes {

#ifdef KV_LANES_SSE2
inline constexpr int W = 2;
struct vd {
  __m128d v;
};
struct vm {
  __m128d v;  // all ones or all zeros per lane
};
[[gnu::always_inline]] inline vd splat(double a) { return {_mm_set1_pd(a)}; }
[[gnu::always_inline]] inline vd load(const double* p) { return {_mm_loadu_pd(p)}; }
[[gnu::always_inline]] inline void store(double* p, vd a) { _mm_storeu_pd(p, a.v); }
/// Masks are stored as int64 lanes, -1 or 0.
[[gnu::always_inline]] inline vm load_mask(const int64_t* p) { return {_mm_castsi128_pd(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))}; }
[[gnu::always_inline]] inline void store_mask(int64_t* p, vm a) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_castpd_si128(a.v)); }
[[gnu::always_inline]] inline vd operator+(vd a, vd b) { return {_mm_add_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vd operator-(vd a, vd b) { return {_mm_sub_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vd operator*(vd a, vd b) { return {_mm_mul_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vd operator-(vd a) { return {_mm_xor_pd(a.v, _mm_set1_pd(-0.0))}; }
[[gnu::always_inline]] inline vm operator==(vd a, vd b) { return {_mm_cmpeq_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vm operator!=(vd a, vd b) { return {_mm_cmpneq_pd(a.v, b.v)}; }  // true for NaN, as !=
[[gnu::always_inline]] inline vm operator<(vd a, vd b) { return {_mm_cmplt_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vm operator<=(vd a, vd b) { return {_mm_cmple_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vm operator>=(vd a, vd b) { return {_mm_cmpge_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vm operator>(vd a, vd b) { return {_mm_cmpgt_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vm operator&(vm a, vm b) { return {_mm_and_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vm operator|(vm a, vm b) { return {_mm_or_pd(a.v, b.v)}; }
[[gnu::always_inline]] inline vm operator~(vm a) { return {_mm_xor_pd(a.v, _mm_castsi128_pd(_mm_set1_epi32(-1)))}; }
[[gnu::always_inline]] inline vm no_lanes() { return {_mm_setzero_pd()}; }
/// Bit l set where lane l is set.
[[gnu::always_inline]] inline int lane_bits(vm a) { return _mm_movemask_pd(a.v); }
[[gnu::always_inline]] inline vd sel(vm c, vd a, vd b) { return {_mm_or_pd(_mm_and_pd(c.v, a.v), _mm_andnot_pd(c.v, b.v))}; }
/// The lanes' bits and mask, and minus k (as 64-bit integers).
[[gnu::always_inline]] inline vd and_bits(vd a, uint64_t mask) {
  return {_mm_and_pd(a.v, _mm_castsi128_pd(_mm_set1_epi64x(static_cast<int64_t>(mask))))};
}
[[gnu::always_inline]] inline vd sub_bits(vd a, uint64_t k) {
  return {_mm_castsi128_pd(_mm_sub_epi64(_mm_castpd_si128(a.v), _mm_set1_epi64x(static_cast<int64_t>(k))))};
}
/// fast_detail::rne's bit operation with s dropped bits.
template <int s>
[[gnu::always_inline]] inline vd round_bits(vd x) {
  const __m128i b = _mm_castpd_si128(x.v);
  const __m128i lsb = _mm_and_si128(_mm_srli_epi64(b, s), _mm_set1_epi64x(1));
  const __m128i t = _mm_add_epi64(_mm_add_epi64(b, _mm_set1_epi64x((int64_t(1) << (s - 1)) - 1)), lsb);
  return {_mm_castsi128_pd(_mm_and_si128(t, _mm_set1_epi64x(~((int64_t(1) << s) - 1))))};
}
/// Whether a lane is a float value: converting to float and back gives it again (exact in
/// any rounding mode).
[[gnu::always_inline]] inline vm float_roundtrips(vd m) { return {_mm_cmpeq_pd(_mm_cvtps_pd(_mm_cvtpd_ps(m.v)), m.v)}; }
#else
inline constexpr int W = 1;
struct vd {
  double v;
};
struct vm {
  bool v;
};
[[gnu::always_inline]] inline vd splat(double a) { return {a}; }
[[gnu::always_inline]] inline vd load(const double* p) { return {*p}; }
[[gnu::always_inline]] inline void store(double* p, vd a) { *p = a.v; }
[[gnu::always_inline]] inline vm load_mask(const int64_t* p) { return {*p != 0}; }
[[gnu::always_inline]] inline void store_mask(int64_t* p, vm a) { *p = a.v ? -1 : 0; }
[[gnu::always_inline]] inline vd operator+(vd a, vd b) { return {a.v + b.v}; }
[[gnu::always_inline]] inline vd operator-(vd a, vd b) { return {a.v - b.v}; }
[[gnu::always_inline]] inline vd operator*(vd a, vd b) { return {a.v * b.v}; }
[[gnu::always_inline]] inline vd operator-(vd a) { return {-a.v}; }
[[gnu::always_inline]] inline vm operator==(vd a, vd b) { return {a.v == b.v}; }
[[gnu::always_inline]] inline vm operator!=(vd a, vd b) { return {a.v != b.v}; }
[[gnu::always_inline]] inline vm operator<(vd a, vd b) { return {a.v < b.v}; }
[[gnu::always_inline]] inline vm operator<=(vd a, vd b) { return {a.v <= b.v}; }
[[gnu::always_inline]] inline vm operator>=(vd a, vd b) { return {a.v >= b.v}; }
[[gnu::always_inline]] inline vm operator>(vd a, vd b) { return {a.v > b.v}; }
[[gnu::always_inline]] inline vm operator&(vm a, vm b) { return {a.v && b.v}; }
[[gnu::always_inline]] inline vm operator|(vm a, vm b) { return {a.v || b.v}; }
[[gnu::always_inline]] inline vm operator~(vm a) { return {!a.v}; }
[[gnu::always_inline]] inline vm no_lanes() { return {false}; }
[[gnu::always_inline]] inline int lane_bits(vm a) { return a.v ? 1 : 0; }
[[gnu::always_inline]] inline vd sel(vm c, vd a, vd b) { return c.v ? a : b; }
[[gnu::always_inline]] inline vd and_bits(vd a, uint64_t mask) {
  return {fast_detail::from_bits(fast_detail::bits_of(a.v) & mask)};
}
[[gnu::always_inline]] inline vd sub_bits(vd a, uint64_t k) { return {fast_detail::from_bits(fast_detail::bits_of(a.v) - k)}; }
template <int s>
[[gnu::always_inline]] inline vd round_bits(vd x) {
  const uint64_t b = fast_detail::bits_of(x.v);
  return {fast_detail::from_bits((b + ((uint64_t(1) << (s - 1)) - 1) + ((b >> s) & 1)) & ~((uint64_t(1) << s) - 1))};
}
[[gnu::always_inline]] inline vm float_roundtrips(vd m) { return {static_cast<double>(static_cast<float>(m.v)) == m.v}; }
#endif

[[gnu::always_inline]] inline vd operator+(vd a, double b) { return a + splat(b); }
[[gnu::always_inline]] inline vd operator-(vd a, double b) { return a - splat(b); }
[[gnu::always_inline]] inline vd operator-(double a, vd b) { return splat(a) - b; }
[[gnu::always_inline]] inline vd operator*(vd a, double b) { return a * splat(b); }
[[gnu::always_inline]] inline vd operator*(double a, vd b) { return splat(a) * b; }
[[gnu::always_inline]] inline vm operator==(vd a, double b) { return a == splat(b); }
[[gnu::always_inline]] inline vm operator!=(vd a, double b) { return a != splat(b); }
[[gnu::always_inline]] inline vm operator<(vd a, double b) { return a < splat(b); }
[[gnu::always_inline]] inline vm operator<=(vd a, double b) { return a <= splat(b); }
[[gnu::always_inline]] inline vm operator>=(vd a, double b) { return a >= splat(b); }
[[gnu::always_inline]] inline vm operator>(vd a, double b) { return a > splat(b); }
[[gnu::always_inline]] inline vm& operator&=(vm& a, vm b) { return a = a & b; }
[[gnu::always_inline]] inline vm& operator|=(vm& a, vm b) { return a = a | b; }
[[gnu::always_inline]] inline bool all(vm a) { return lane_bits(a) == (1 << W) - 1; }
[[gnu::always_inline]] inline bool any(vm a) { return lane_bits(a) != 0; }

[[gnu::always_inline]] inline vd vabs(vd a) { return and_bits(a, 0x7FFFFFFFFFFFFFFFull); }
/// Whether a lane is finite (not inf, not NaN).
[[gnu::always_inline]] inline vm finite(vd a) { return vabs(a) <= 0x1.fffffffffffffp1023; }

/// enc_detail::rup, for lanes not NaN (rup gives +inf for NaN, this NaN: callers clear
/// such lanes).
[[gnu::always_inline]] inline vd rup(vd x) { return x * (1.0 + 0x1p-50) + 0x1p-1074; }
[[gnu::always_inline]] inline vd down(vd x) { return x - (vabs(x) * 0x1p-52 + 0x1p-1074); }
[[gnu::always_inline]] inline vd up(vd x) { return x + (vabs(x) * 0x1p-52 + 0x1p-1074); }
/// enc_lo / enc_hi of {m, r}.
[[gnu::always_inline]] inline vd lo_of(vd m, vd r) { return sel(r == 0, m, down(m - r)); }
[[gnu::always_inline]] inline vd hi_of(vd m, vd r) { return sel(r == 0, m, up(m + r)); }
/// two_sum_err(a, b, s).
[[gnu::always_inline]] inline vd two_sum_err(vd a, vd b, vd s) {
  const vd bb = s - a;
  return (a - (s - bb)) + (b - bb);
}

/// Whether a lane is finite and nonzero.
[[gnu::always_inline]] inline vm finite_nonzero(vd a) {
  const vd b = vabs(a);
  return (b > 0) & (b <= 0x1.fffffffffffffp1023);
}

/// fast_detail::rne<D> on lanes with min_normal(D) <= |x| <= max_finite(D) (the bit
/// operation); `ok` is cleared on the other lanes (zeros included).
template <DType D>
[[gnu::always_inline]] inline vd rne(vd x, vm& ok) {
  using F = fast_detail::Fmt<D>;
  const vd a = vabs(x);
  ok &= (a >= F::min_normal) & (a <= F::max_finite);
  return round_bits<53 - F::p>(x);
}
/// ulp(D, q) for q normal in D.
template <DType D>
[[gnu::always_inline]] inline vd ulp_normal(vd q) {
  return sub_bits(and_bits(q, 0x7FF0000000000000ull), uint64_t(fast_detail::Fmt<D>::p - 1) << 52);
}
/// Whether the low 27 bits of a lane's significand are zero (product_exact's quick test;
/// for a lane not NaN the values are equal iff the bits are).
[[gnu::always_inline]] inline vm low27_zero(vd a) { return and_bits(a, ~((uint64_t(1) << 27) - 1)) == a; }

// Radii of operator* and AccIn. "Short" values have at most 26 significant bits (the low
// 27 bits of the significand zero), as every fp32, fp16 and bf16 value has; "exact"
// values have radius 0. Lanes where a factor or the product is zero, or the product
// leaves [2^-1000, 2^1000], are cleared in ok: there operator* takes branches not written
// here (exact zeros, product_exact's fma).

/// operator* of two short exact nonzero values: radius 0 (product_exact's quick accept).
[[gnu::always_inline]] inline void mul_short(vd p, vm& ok) {
  const vd ap = vabs(p);
  ok &= (ap >= 0x1p-1000) & (ap <= 0x1p1000);
}

/// operator*(a, b) of exact values (in that order: Dekker's test below is product_exact's
/// with its operands), product p: the radius, 0 where the product is exact
/// (product_exact's quick accept, or Dekker's test, which it runs for |p| in
/// [2^-900, 2^900]), else rup(|p| 2^-53 + 2^-1074) (operator*'s other terms are zeros).
[[gnu::always_inline]] inline vd mul_exact_r(vd a, vd b, vd p, vm& ok) {
  const vd ap = vabs(p);
  ok &= (ap >= 0x1p-1000) & (ap <= 0x1p1000);
  vm exact = low27_zero(a) & low27_zero(b);
  if (any(~exact & ok)) {  // more than 26 bits (a product of fp32 values)
    ok &= exact | ((ap >= 0x1p-900) & (ap <= 0x1p900));
    const vd c = splat(134217729.0);  // 2^27 + 1: Veltkamp's splitting, as product_exact
    const vd ga = c * a, ah = ga - (ga - a), al = a - ah;
    const vd gb = c * b, bh = gb - (gb - b), bl = b - bh;
    exact |= (((ah * bh - p) + ah * bl + al * bh) + al * bl) == 0;
  }
  return sel(exact, splat(0.0), rup(ap * 0x1p-53 + 0x1p-1074));
}

/// operator*({am, ar}, {b, 0}), either order, for finite am, 0 < ar < inf and a finite
/// nonzero exact b, product p: rup(ar |b| + |p| 2^-53 + 2^-1074) (operator*'s other terms
/// are zeros: |am| 0 and ar 0).
[[gnu::always_inline]] inline vd mul_by_exact_r(vd ar, vd b, vd p) {
  return rup(ar * vabs(b) + vabs(p) * 0x1p-53 + 0x1p-1074);
}

/// AccIn::representable for the accumulator dtype D.
template <DType D>
[[gnu::always_inline]] inline vm representable(vd m, vm& ok) {
  if constexpr (D == DType::f32) return float_roundtrips(m);
  else return rne<D>(m, ok) == m;
}

/// The radius of AccIn(in)({m, r}) (D = in.d); lanes that overflow are cleared in ok.
template <DType D>
[[gnu::always_inline]] inline vd acc_in(const fast_detail::AccIn& in, vd m, vd r, vm& ok) {
  const vm keep = (r == 0) & representable<D>(m, ok) & ~(in.ftz ? ((m != 0) & (vabs(m) < in.min_normal)) : no_lanes());
  const vd mag = vabs(m) + r;
  ok &= keep | (mag * (1.0 + in.u) < in.max_finite);
  return sel(keep, r, rup(r + in.u * mag + in.eta));
}
/// The same for r = 0 (mag = |m| + 0 and 0 + u mag are exact).
template <DType D>
[[gnu::always_inline]] inline vd acc_in0(const fast_detail::AccIn& in, vd m, vm& ok) {
  const vm keep = representable<D>(m, ok) & ~(in.ftz ? ((m != 0) & (vabs(m) < in.min_normal)) : no_lanes());
  const vd mag = vabs(m);
  ok &= keep | (mag * (1.0 + in.u) < in.max_finite);
  return sel(keep, splat(0.0), rup(in.u * mag + in.eta));
}
/// The same for r > 0 (never kept).
[[gnu::always_inline]] inline vd acc_in_pos(const fast_detail::AccIn& in, vd m, vd r, vm& ok) {
  const vd mag = vabs(m) + r;
  ok &= mag * (1.0 + in.u) < in.max_finite;
  return rup(r + in.u * mag + in.eta);
}

}  // namespace kv::lanes
