// The per-element work of the judge (check/judge.cpp): the admissible set of an element, its
// verdict and measurements, and the loop over a range of elements, instantiated per output
// dtype so that the format constants fold (DESIGN.md: the judge is on the critical path of
// every case). Internal to check/: judge.cpp and its tests include it.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "check/judge.hpp"
#include "check/tolerance.hpp"
#include "core/error.hpp"
#include "reference/enclosure.hpp"

namespace kv::judge_detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline double half_width(double lo, double hi) { return (hi - lo) * 0.5; }
/// Whether element i admits NaN although its bounds may be finite (OutputEnclosure::may_nan).
inline bool may_nan(const OutputEnclosure& enc, int64_t i) { return !enc.may_nan.empty() && enc.may_nan[i]; }


/// Ratios are counted in a histogram for the p99: bin 0 holds exact zeros, then 64 bins
/// per octave from 2^-40 to 2^24, then one for anything larger (inf included). The p99
/// reported is the upper edge of its bin: at most 1.1% above the exact percentile.
inline constexpr int kOctaves = 64, kPerOctave = 64, kMinExp = -40;
inline constexpr int kBins = 2 + kOctaves * kPerOctave;

inline int ratio_bin(double r) {
  if (r == 0) return 0;
  constexpr double lo = 0x1p-40, hi = 0x1p24;  // 2^kMinExp, 2^(kMinExp + kOctaves)
  static_assert(kMinExp == -40 && kMinExp + kOctaves == 24);
  if (!(r < hi)) return kBins - 1;
  if (r < lo) return 1;
  // r = (1 + f) 2^e: the octave from the exponent bits, the bin from the top 6 fraction bits.
  uint64_t b;
  std::memcpy(&b, &r, 8);
  const int e = static_cast<int>((b >> 52) & 0x7FF) - 1023;
  const int sub = static_cast<int>((b >> (52 - 6)) & (kPerOctave - 1));
  return 1 + (e - kMinExp) * kPerOctave + sub;
}

inline double bin_upper(int b) {
  if (b == 0) return 0;
  if (b == kBins - 1) return kInf;
  int k = b - 1, e = k / kPerOctave + kMinExp, sub = k % kPerOctave;
  return std::ldexp(1.0 + static_cast<double>(sub + 1) / kPerOctave, e);
}

/// The upper edge of the bin holding the q-quantile (0-based rank q * (n - 1)).
inline double hist_quantile(const std::vector<int64_t>& hist, double q, int64_t n) {
  const int64_t k = static_cast<int64_t>(q * static_cast<double>(n - 1));
  int64_t seen = 0;
  for (int b = 0; b < kBins; ++b) {
    seen += hist[b];
    if (seen > k) return bin_upper(b);
  }
  return kInf;
}

/// The ratio and ulps histograms: counts, so a thread's share of the chunks may hold them
/// (merged in any order, the counts come out the same).
struct Hists {
  std::vector<int64_t> ratio = std::vector<int64_t>(kBins, 0), ulps = std::vector<int64_t>(kBins, 0);
};

/// Measurements of one chunk of elements, merged in chunk order.
struct Partial {
  int64_t n_fail = 0, n_unv = 0, n_unv_fail = 0, n_nan = 0, n_nan_admitted = 0, n_nan_expected = 0, n_unwritten = 0, n_diff_rn = 0;
  int64_t worst = -1, first_fail = -1;
  double max_ratio = 0, max_ulps = 0, max_used = 0;
  double sum_signed_ulps = 0, sum_abs_ulps = 0;  // over elements with finite out and reference
  int64_t n_finite = 0;
  double w_out = 0, w_v = 0, w_lo = 0, w_hi = 0, w_err = 0, w_hw = 0;
  double w_ratio = 0;  // the shown worst's ratio; a failing element outranks any that passes (an admitted NaN: inf)
  bool w_failed = false;
};

/// Whether an element (failed, ratio) is to be shown before the worst one so far.
inline bool worse(bool failed, double ratio, bool w_failed, double w_ratio) { return failed != w_failed ? failed : ratio > w_ratio; }

/// An element's admissible set: its enclosure widened by the reference's error and rounded
/// to the output's dtype, and what the set says about NaN.
struct Admissible {
  double a_lo = 0, a_hi = 0;
  double lo_w = 0, hi_w = 0;  // the enclosure widened by the reference's error, before rounding to the dtype
  bool unbounded = false;    // unbounded on a side while the value is finite, or all of it around ±inf
  bool flagged_nan = false;  // the enclosure admits NaN with finite bounds
  bool nan_ok = false;       // NaN admitted (never verified)
};

/// The admissible set of element l of ref and enc (element i of the output, named in errors).
[[gnu::always_inline]] inline Admissible admissible_at(DType dt, const TensorView& out, const OutputRef& ref,
                                                     const OutputEnclosure& enc, int64_t i, int64_t l) {
  const double v = ref.v[l], err = ref.err[l];
  const double e_lo = enc.lo[l], e_hi = enc.hi[l];
  // An infinite bound stays as it is (stepping outward from +inf would give inf - inf).
  double lo_w = std::isinf(e_lo) && err == 0 ? e_lo : enc_detail::down(e_lo - err);
  double hi_w = std::isinf(e_hi) && err == 0 ? e_hi : enc_detail::up(e_hi + err);
  // Enclosure arithmetic on an infinite input (inf - inf in a midpoint) gives NaN bounds
  // where IEEE arithmetic gives a finite value (exp(-inf) = 0): such a bound bounds nothing.
  if (std::isnan(lo_w)) lo_w = -kInf;
  if (std::isnan(hi_w)) hi_w = kInf;
  if (std::isfinite(v) && !(lo_w <= v && v <= hi_w))
    throw HarnessError("reference value of " + out.desc.name + "[" + std::to_string(i) + "] = " + std::to_string(v) +
                       " lies outside its own enclosure [" + std::to_string(lo_w) + ", " + std::to_string(hi_w) + "]");
  Admissible a;
  a.a_lo = round_to(dt, lo_w), a.a_hi = round_to(dt, hi_w);
  a.lo_w = lo_w, a.hi_w = hi_w;
  // An admissible set unbounded on a side while the value is finite (the contract's own
  // arithmetic overflows, e.g. rstd^3 in fp16) bounds nothing: such an element is not
  // verified by lying in it. There an intermediate a correct impl computes may be ±inf
  // (DESIGN.md), and IEEE rules take inf * 0 or inf - inf to NaN, so a NaN output is
  // admitted but never verified: it counts as unverifiable, not as a pass.
  // With v = ±inf (an infinite input reached it exactly), the contract may still admit
  // anything (an infinity times a rounded factor whose sign the contract leaves open):
  // such an element is unbounded too.
  a.unbounded = std::isfinite(v) ? (std::isinf(lo_w) || std::isinf(hi_w)) : (std::isinf(v) && lo_w == -kInf && hi_w == kInf);
  // The enclosure may also admit NaN with finite bounds (an intermediate that may overflow
  // both ways, then a transform to finite values such as softcap): admitted, unverifiable.
  // Where the defined value is NaN, NaN is required whatever the contract admits.
  a.flagged_nan = !std::isnan(v) && may_nan(enc, l);
  a.nan_ok = a.unbounded || a.flagged_nan;
  return a;
}

/// Whether output o (its bits) lies in the admissible set of reference value v; counts
/// unwritten elements and NaN mismatches on the way.
inline bool lies_in(uint32_t bits, uint32_t poison, double o, double v, const Admissible& a, Partial& p) {
  if (bits == poison) {
    ++p.n_unwritten;
    return false;
  }
  if (std::isnan(v)) {
    ++p.n_nan_expected;
    const bool ok = std::isnan(o);
    if (!ok) ++p.n_nan;
    return ok;
  }
  if (std::isnan(o)) {
    // Admitted (see count_verdict) where the admissible set is unbounded or admits NaN; a mismatch elsewhere.
    if (a.nan_ok) ++p.n_nan_admitted; else ++p.n_nan;
    return false;
  }
  if (std::isinf(v)) return o == v;  // the defined computation reaches ±inf (an infinite input): infinities match in sign
  return a.a_lo <= o && o <= a.a_hi;  // NaN bounds make this false
}

/// Counts element i as unverifiable or failing (ok: it lies in the admissible set).
inline void count_verdict(bool ok, bool unverifiable, const Admissible& a, bool unwritten, double o, int64_t i, Partial& p) {
  if (unverifiable || a.unbounded) {
    ++p.n_unv;
    const bool nan_admitted = a.nan_ok && std::isnan(o);
    // Unwritten elements fail even here, and so does NaN where the bound is finite.
    if (!ok && (unwritten || (std::isnan(o) && !nan_admitted))) ++p.n_fail, ++p.n_unv_fail;
  } else if (a.flagged_nan) {
    // Never a pass; NaN is admitted, while a number outside the finite bounds (or an
    // unwritten element) still fails.
    ++p.n_unv;
    if (!ok && (unwritten || !std::isnan(o))) {
      ++p.n_fail, ++p.n_unv_fail;
      if (p.first_fail < 0) p.first_fail = i;
    }
  } else if (!ok) {
    ++p.n_fail;
    if (p.first_fail < 0) p.first_fail = i;
  }
}

/// std::nextafter(o, v) for o != v, neither NaN, without the library call.
[[gnu::always_inline]] inline double next_toward(double o, double v) {
  if (o == 0) return v > 0 ? 0x1p-1074 : -0x1p-1074;
  uint64_t b;
  std::memcpy(&b, &o, 8);
  b += (v > o) == (o > 0) ? 1 : -1;  // away from zero, or toward it
  double r;
  std::memcpy(&r, &b, 8);
  return r;
}

/// The share of its admissible half-width an output's own value uses before its final
/// rounding: the distance from v to the near edge of o's rounding interval over the
/// continuous bound on that side. 0 for the correctly rounded value, above 1 only outside the
/// set. Unlike the ratio (which reads 1 for a correctly rounded value whose set holds one
/// float), it tells how much of the contract's room the kernel's arithmetic takes.
inline double used_share(DType dt, double o, double v, const Admissible& a) {
  if (o == v) return 0;
  const double half_gap = ulp(dt, next_toward(o, v)) / 2;
  const double pre = std::fabs(o - v) - half_gap;
  if (pre <= 0) return 0;
  const double side = o > v ? a.hi_w - v : v - a.lo_w;
  return side > 0 ? pre / side : kInf;
}

/// An output element's value from its bits: inline for fp32 and bf16.
template <DType DT>
[[gnu::always_inline]] inline double decode_as(uint32_t bits) {
  if constexpr (DT == DType::f32 || DT == DType::bf16) {
    const uint32_t w = DT == DType::bf16 ? (bits & 0xFFFFu) << 16 : bits;
    float f;
    std::memcpy(&f, &w, 4);
    return f;
  }
  return decode(DT, bits);
}
/// The bits of a value representable in DT and not NaN: inline for fp32 and bf16.
template <DType DT>
[[gnu::always_inline]] inline uint32_t encode_as(double representable) {
  if constexpr (DT == DType::f32 || DT == DType::bf16) {
    const float f = static_cast<float>(representable);  // exact
    uint32_t w;
    std::memcpy(&w, &f, 4);
    return DT == DType::bf16 ? w >> 16 : w;
  }
  return encode(DT, representable);
}
/// 1/x for x a power of two in double's normal range: exact, so that y * inv_pow2(x) is
/// y / x bit for bit (both the correctly rounded value of the same real).
[[gnu::always_inline]] inline double inv_pow2(double x) { return 1.0 / x; }

/// Output elements [b, e) against ref and enc, which hold the elements from `base` on; DT
/// the output's dtype (a template parameter, so that the format's constants fold).
template <DType DT>
void judge_range_as(const TensorView& out, const OutputRef& ref, const OutputEnclosure& enc, int64_t base, int64_t b,
                    int64_t e, Partial& p, Hists& hs, TolBuckets& tol) {
  constexpr DType dt = DT;
  constexpr size_t es = DT == DType::f32 || DT == DType::i32 ? 4 : 2;
  const uint32_t poison = poison_bits(dt);
  const bool contiguous = out.desc.strides.empty();
  const uint8_t* data = out.base + (contiguous ? out.desc.offset : 0) * static_cast<int64_t>(es);
  const double* rv = ref.v.data();
  const double* re = ref.err.data();
  const double* elo = enc.lo.data();
  const double* ehi = enc.hi.data();
  const uint8_t* unv = enc.unverifiable.data();
  const double u_max = ulp(dt, max_finite(dt));
  for (int64_t i = b; i < e; ++i) {
    const int64_t l = i - base;  // the element in ref and enc
    uint32_t bits;
    if (contiguous) {
      if constexpr (es == 4) {
        std::memcpy(&bits, data + i * 4, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, data + i * 2, 2);
        bits = h;
      }
    } else {
      bits = out.bits(i);
    }
    const double o = decode_as<DT>(bits), v = rv[l];
    const Admissible a = admissible_at(dt, out, ref, enc, i, l);
    const bool ok = lies_in(bits, poison, o, v, a, p);
    double dist = (o == v || (std::isnan(o) && std::isnan(v))) ? 0.0 : std::fabs(o - v);
    if (std::isnan(dist)) dist = kInf;
    const double hw = std::max(a.a_hi - v, v - a.a_lo);
    double ratio = dist == 0 ? 0.0 : (hw > 0 ? dist / hw : kInf);
    if (std::isnan(ratio)) ratio = kInf;
    const bool v_finite = std::isfinite(v);
    const double u = v_finite ? ulp(dt, v) : u_max, inv_u = inv_pow2(u);
    const double ulps = dist == 0 ? 0.0 : dist * inv_u;
    if (!std::isnan(v) && bits != encode_as<DT>(round_to(dt, v))) ++p.n_diff_rn;
    const bool finite_pair = std::isfinite(o) && v_finite && bits != poison;
    if (finite_pair) {
      const double s_ulps = (o - v) * inv_u;
      p.sum_signed_ulps += s_ulps, p.sum_abs_ulps += std::fabs(s_ulps), ++p.n_finite;
      tol.add(std::fabs(v), dist);
    }
    const int64_t failed_before = p.n_fail;
    count_verdict(ok, unv[l], a, bits == poison, o, i, p);
    if (p.n_fail > failed_before) p.max_used = kInf;  // unwritten, NaN or outside: no headroom, whatever the distance
    ++hs.ratio[ratio_bin(ratio)];
    ++hs.ulps[ratio_bin(ulps)];
    p.max_ratio = std::max(p.max_ratio, ratio);
    const bool failed_now = p.n_fail > failed_before;
    if (p.worst < 0 || worse(failed_now, ratio, p.w_failed, p.w_ratio)) {
      p.w_ratio = ratio, p.w_failed = failed_now, p.worst = i;
      p.w_out = o, p.w_v = v, p.w_lo = a.a_lo, p.w_hi = a.a_hi, p.w_err = re[l], p.w_hw = half_width(elo[l], ehi[l]);
    }
    p.max_ulps = std::max(p.max_ulps, ulps);
    if (finite_pair && !a.unbounded && !unv[l]) p.max_used = std::max(p.max_used, used_share(dt, o, v, a));
  }
}

/// judge_range_as for the output's dtype.
inline void judge_range(const TensorView& out, const OutputRef& ref, const OutputEnclosure& enc, int64_t base, int64_t b,
                        int64_t e, Partial& p, Hists& hs, TolBuckets& tol) {
  switch (out.desc.dtype) {
    case DType::f32: return judge_range_as<DType::f32>(out, ref, enc, base, b, e, p, hs, tol);
    case DType::f16: return judge_range_as<DType::f16>(out, ref, enc, base, b, e, p, hs, tol);
    case DType::bf16: return judge_range_as<DType::bf16>(out, ref, enc, base, b, e, p, hs, tol);
    case DType::i32: return judge_range_as<DType::i32>(out, ref, enc, base, b, e, p, hs, tol);
  }
  throw HarnessError("judging " + out.desc.name + ": unknown dtype");
}

}  // namespace kv::judge_detail
