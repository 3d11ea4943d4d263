// kv::dtype: exact RNE rounding, encode/decode and the format constants, checked against
// MPFR (an independent correctly-rounded oracle) and against hardware conversions.
#include <gtest/gtest.h>
#include <mpfr.h>
#include <rapidcheck/gtest.h>

#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "core/dtype.hpp"

namespace {

using kv::DType;
constexpr DType kAll[] = {DType::f32, DType::f16, DType::bf16};
constexpr DType kHalf[] = {DType::f16, DType::bf16};
const double kInf = std::numeric_limits<double>::infinity();

uint64_t bits64(double x) {
  uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}
double from64(uint64_t b) {
  double x;
  std::memcpy(&x, &b, 8);
  return x;
}
// Bitwise equality, so that -0 vs +0 is a failure too.
#define EXPECT_SAME(a, b) EXPECT_EQ(bits64(a), bits64(b)) << std::hexfloat << (a) << " vs " << (b)

// Rounds the exact value `v` to d with MPFR. MPFR's significand is in [1/2, 1), so the
// format's max exponent is emax+1 and subnormals are emulated by mpfr_subnormalize with
// emin lowered to the exponent of the smallest subnormal (emin - p + 2 in MPFR terms).
double round_mpfr(DType d, mpfr_srcptr v) {
  const kv::Format f = kv::format_of(d);
  const mpfr_exp_t old_min = mpfr_get_emin(), old_max = mpfr_get_emax();
  mpfr_set_emin(f.emin - f.p + 2);
  mpfr_set_emax(f.emax + 1);
  mpfr_t r;
  mpfr_init2(r, f.p);
  int t = mpfr_set(r, v, MPFR_RNDN);
  t = mpfr_check_range(r, t, MPFR_RNDN);
  mpfr_subnormalize(r, t, MPFR_RNDN);
  double out = mpfr_get_d(r, MPFR_RNDN);  // exact: p <= 24 bits, in double's range
  mpfr_clear(r);
  mpfr_set_emin(old_min);
  mpfr_set_emax(old_max);
  return out;  // MPFR overflows to inf under RNDN
}
// The exact sum hi + lo (2200 bits hold any double-double with |lo| <= ulp(hi)/2), rounded.
double oracle(DType d, double hi, double lo = 0.0) {
  mpfr_t v;
  mpfr_init2(v, 2200);
  mpfr_set_d(v, hi, MPFR_RNDN);
  // Skipped for lo == 0: (-0) + (+0) is +0, but the pair (-0, 0) stands for -0.
  if (lo != 0.0) {
    EXPECT_EQ(mpfr_add_d(v, v, lo, MPFR_RNDN), 0) << "sum not exact";
  }
  double r = round_mpfr(d, v);
  mpfr_clear(v);
  return r;
}

// Restores round-to-nearest even when an assertion leaves the scope early.
struct RoundingMode {
  explicit RoundingMode(int m) { EXPECT_EQ(std::fesetround(m), 0); }
  ~RoundingMode() { std::fesetround(FE_TONEAREST); }
};

// The interesting points between adjacent values a, c of a 16-bit format: the tie, one
// fp32 ulp and one double ulp either side of it, and the endpoints themselves.
std::vector<double> probes(double a, double c) {
  const double mid = (a + c) / 2;  // exact: a and c have <= 11 significant bits
  const float fm = static_cast<float>(mid);
  return {a, c, mid, std::nextafter(mid, -kInf), std::nextafter(mid, kInf),
          std::nextafterf(fm, -std::numeric_limits<float>::infinity()),
          std::nextafterf(fm, std::numeric_limits<float>::infinity())};
}

// Every adjacent pair of finite values of a 16-bit format (bits b, b+1), both signs; stops
// at the first failure so that a bug does not print 60000 messages.
template <class F>
void for_each_pair(DType d, F&& f) {
  const uint32_t sign = 0x8000u;  // same sign bit in fp16 and bf16
  for (uint32_t b = 0; std::isfinite(kv::decode(d, b + 1)) && !::testing::Test::HasFailure(); ++b) {
    f(b, kv::decode(d, b), kv::decode(d, b + 1));
    f(b | sign, kv::decode(d, b | sign), kv::decode(d, (b + 1) | sign));
  }
}

TEST(Dtype, ExhaustiveDecodeEncodeRoundTrip) {
  for (DType d : kHalf) {
    for (uint32_t b = 0; b < 0x10000u; ++b) {
      const double v = kv::decode(d, b);
      ASSERT_EQ(kv::is_nan_bits(d, b), std::isnan(v)) << std::hex << b;
      if (std::isnan(v)) {
        ASSERT_EQ(kv::encode(d, v), kv::canonical_nan_bits(d)) << std::hex << b;
        continue;
      }
      ASSERT_EQ(kv::encode(d, v), b) << kv::dtype_name(d) << " bits " << std::hex << b;
      if (std::isfinite(v)) {
        ASSERT_EQ(bits64(kv::round_to(d, v)), bits64(v)) << std::hex << b;
      }
    }
    EXPECT_TRUE(kv::is_nan_bits(d, kv::canonical_nan_bits(d)));
  }
}

TEST(Dtype, DecodeMatchesIndependentFormulas) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    _Float16 h;  // fp16: the compiler's own _Float16 -> double conversion
    const uint16_t h16 = static_cast<uint16_t>(b);
    std::memcpy(&h, &h16, 2);
    const double want = static_cast<double>(h);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(kv::decode(DType::f16, b)));
    } else {
      ASSERT_EQ(bits64(kv::decode(DType::f16, b)), bits64(want)) << std::hex << b;
    }
    // bf16: sign, 8-bit exponent (bias 127), 7-bit mantissa, written out by hand.
    const uint32_t e = (b >> 7) & 0xFF, m = b & 0x7F;
    if (e == 0xFF) continue;
    double v = e == 0 ? std::ldexp(m, -133) : std::ldexp(128 + m, static_cast<int>(e) - 134);
    if (b & 0x8000) v = -v;
    ASSERT_EQ(bits64(kv::decode(DType::bf16, b)), bits64(v)) << std::hex << b;
  }
}

// fp32 is too big to enumerate: random bit patterns instead.
RC_GTEST_PROP(DtypeProp, Fp32DecodeEncodeRoundTrip, (uint32_t b)) {
  const double v = kv::decode(DType::f32, b);
  RC_ASSERT(kv::is_nan_bits(DType::f32, b) == std::isnan(v));
  RC_ASSERT(kv::encode(DType::f32, v) == (std::isnan(v) ? kv::canonical_nan_bits(DType::f32) : b));
  if (std::isfinite(v)) RC_ASSERT(bits64(kv::round_to(DType::f32, v)) == bits64(v));
}

TEST(Dtype, ExhaustiveAdjacentPairsMatchMpfr) {
  for (DType d : kHalf) {
    long n = 0;
    for_each_pair(d, [&](uint32_t b, double a, double c) {
      for (double x : probes(a, c)) {
        ++n;
        ASSERT_EQ(bits64(kv::round_to(d, x)), bits64(oracle(d, x)))
            << kv::dtype_name(d) << " x=" << std::hexfloat << x;
      }
      // The exact tie goes to the neighbour with an even last bit (independent of MPFR).
      ASSERT_EQ(kv::round_to(d, (a + c) / 2), (b & 1) ? c : a) << std::hexfloat << a;
    });
    EXPECT_GT(n, 2 * 7 * 30000);  // both formats have > 30000 finite positive values
  }
}

TEST(Dtype, OverflowThresholdAndSubnormalBoundaries) {
  for (DType d : kAll) {
    const double mx = kv::max_finite(d), thr = mx + kv::ulp(d, mx) / 2;
    // max_finite has an odd last bit, so the tie at the threshold rounds up to inf.
    EXPECT_EQ(kv::round_to(d, thr), kInf);
    EXPECT_EQ(kv::round_to(d, -thr), -kInf);
    EXPECT_EQ(kv::round_to(d, std::nextafter(thr, 0.0)), mx);
    EXPECT_EQ(kv::round_to(d, -std::nextafter(thr, 0.0)), -mx);
    EXPECT_EQ(kv::round_to(d, 1e300), kInf);
    const double s = kv::min_subnormal(d), mn = kv::min_normal(d);
    EXPECT_SAME(kv::round_to(d, s / 2), 0.0);  // tie between 0 and s: to even (0)
    EXPECT_SAME(kv::round_to(d, -s / 2), -0.0);
    EXPECT_SAME(kv::round_to(d, -s / 4), -0.0);
    EXPECT_EQ(kv::round_to(d, std::nextafter(s / 2, 1.0)), s);
    EXPECT_EQ(kv::round_to(d, 1.5 * s), 2 * s);  // tie between s and 2s: to even
    EXPECT_EQ(kv::round_to(d, mn - s / 2), mn);  // largest subnormal is odd: up
    EXPECT_EQ(kv::round_to(d, std::nextafter(mn - s / 2, 0.0)), mn - s);
    EXPECT_EQ(kv::round_to(d, 5e-324), 0.0);
    for (double x : {thr, std::nextafter(thr, 0.0), std::nextafter(thr, kInf), s / 2, std::nextafter(s / 2, 0.0),
                     std::nextafter(s / 2, 1.0), mn - s / 2, std::nextafter(mn - s / 2, 1.0), 5e-324})
      for (double y : {x, -x}) EXPECT_SAME(kv::round_to(d, y), oracle(d, y));
    for (double sp : {0.0, -0.0, kInf, -kInf}) EXPECT_SAME(kv::round_to(d, sp), sp);
    EXPECT_TRUE(std::isnan(kv::round_to(d, std::nan(""))));
  }
}

// Random doubles: raw bit patterns (mostly far out of range) and ones whose exponent lies
// near the format's range, where the rounding actually has work to do.
RC_GTEST_PROP(DtypeProp, RoundToMatchesMpfr, ()) {
  const DType d = *rc::gen::elementOf(std::vector<DType>{DType::f32, DType::f16, DType::bf16});
  const kv::Format f = kv::format_of(d);
  const uint64_t raw = *rc::gen::arbitrary<uint64_t>();
  const int e = *rc::gen::inRange(f.emin - f.p - 3, f.emax + 3);
  const double near = std::ldexp(1.0 + std::ldexp(static_cast<double>(raw >> 12), -52), e);
  for (double x : {from64(raw), raw & 1 ? -near : near}) {
    if (!std::isfinite(x)) continue;
    RC_ASSERT(bits64(kv::round_to(d, x)) == bits64(oracle(d, x)));
    if (d == DType::f32) RC_ASSERT(bits64(kv::round_to(d, x)) == bits64(static_cast<double>(static_cast<float>(x))));
  }
}

// The double-double overload: a value on a tie (or exactly representable) plus a small
// lo must round like the exact sum hi + lo.
RC_GTEST_PROP(DtypeProp, DoubleDoubleMatchesExactSum, ()) {
  const DType d = *rc::gen::elementOf(std::vector<DType>{DType::f32, DType::f16, DType::bf16});
  const kv::Format f = kv::format_of(d);
  const int e = *rc::gen::inRange(f.emin - f.p - 2, f.emax + 1);
  const int q = std::max(e, f.emin) - f.p + 1;  // quantum exponent at 2^e
  const int64_t k = *rc::gen::inRange<int64_t>(0, int64_t(1) << f.p);  // k = 0..: subnormals and 0
  const int kind = *rc::gen::inRange(0, 3);  // 0: tie, 1: representable, 2: anything
  const uint64_t raw = *rc::gen::arbitrary<uint64_t>();
  double hi = kind == 0 ? std::ldexp(2 * k + 1, q - 1)
              : kind == 1 ? std::ldexp(k, q) : std::ldexp(1.0 + std::ldexp(double(raw >> 12), -52), e);
  if (raw & 1) hi = -hi;
  // |lo| <= ulp(hi)/2: any fraction of half a double ulp, either sign, or exactly zero.
  const double half = (std::nextafter(std::fabs(hi), kInf) - std::fabs(hi)) / 2;
  const int sh = *rc::gen::inRange(0, 60);
  const double lo = (raw & 2) ? 0.0 : ((raw & 4) ? -1 : 1) * std::ldexp(half, -sh);
  RC_ASSERT(bits64(kv::round_to(d, hi, lo)) == bits64(oracle(d, hi, lo)));
  if (lo == 0.0) RC_ASSERT(bits64(kv::round_to(d, hi, lo)) == bits64(kv::round_to(d, hi)));
}

TEST(Dtype, DoubleDoubleTieBrokenBySignOfLo) {
  for (DType d : kHalf) {
    for_each_pair(d, [&](uint32_t, double a, double c) {
      const double mid = (a + c) / 2, tiny = 5e-324;
      const double up = std::fabs(a) > std::fabs(c) ? a : c, down = up == a ? c : a;  // by magnitude
      const double out = mid > 0 ? tiny : -tiny;  // lo pointing away from zero
      ASSERT_EQ(kv::round_to(d, mid, out), up) << std::hexfloat << mid;
      ASSERT_EQ(kv::round_to(d, mid, -out), down) << std::hexfloat << mid;
      ASSERT_EQ(bits64(kv::round_to(d, mid, 0.0)), bits64(kv::round_to(d, mid)));
      ASSERT_EQ(kv::round_to(d, a, a == 0 ? 0.0 : -std::copysign(tiny, a)), a);  // representable stays
    });
  }
}

// The harness runs impls under fesetround(FE_UPWARD) etc.; round_to must not notice.
TEST(Dtype, RoundingIndependentOfFpuMode) {
  std::vector<std::pair<DType, double>> xs;
  for (DType d : kHalf)
    for_each_pair(d, [&](uint32_t b, double a, double c) {
      if (b % 13 == 0)
        for (double x : probes(a, c)) xs.push_back({d, x});
    });
  uint64_t s = 0x9E3779B97F4A7C15ull;  // fixed xorshift stream of doubles for f32
  for (int i = 0; i < 20000; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    const double x = std::ldexp(1.0 + std::ldexp(double(s >> 12), -52), int(s % 300) - 160);
    xs.push_back({DType::f32, x});
  }
  std::vector<double> want, want_lo;  // want_lo: with a tiny lo that breaks ties upwards
  for (auto [d, x] : xs) want.push_back(oracle(d, x)), want_lo.push_back(oracle(d, x, 5e-324));
  for (int mode : {FE_UPWARD, FE_TOWARDZERO, FE_DOWNWARD}) {
    RoundingMode rm(mode);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double r = kv::round_to(xs[i].first, xs[i].second);
      const double r2 = kv::round_to(xs[i].first, xs[i].second, 0.0);
      ASSERT_EQ(bits64(r), bits64(want[i])) << "mode " << mode << " x=" << std::hexfloat << xs[i].second;
      ASSERT_EQ(bits64(r2), bits64(want[i]));
      ASSERT_EQ(bits64(kv::round_to(xs[i].first, xs[i].second, 5e-324)), bits64(want_lo[i]));
    }
  }
  EXPECT_EQ(std::fegetround(), FE_TONEAREST);
}

// Hardware oracles for fp32 -> 16-bit: GCC's _Float16 conversion (RN under FE_TONEAREST)
// for every float within 3 float ulps of each fp16 tie, and random floats.
TEST(Dtype, Fp32ToFp16MatchesFloat16Cast) {
  auto check = [](float x) {
    const double hw = static_cast<double>(static_cast<_Float16>(x));
    ASSERT_EQ(bits64(kv::round_to(DType::f16, x)), bits64(hw)) << std::hexfloat << x;
  };
  for_each_pair(DType::f16, [&](uint32_t, double a, double c) {
    float m = static_cast<float>((a + c) / 2), lo = m, hi = m;
    check(m);
    for (int i = 0; i < 3; ++i) {
      check(lo = std::nextafterf(lo, -1e30f));
      check(hi = std::nextafterf(hi, 1e30f));
    }
  });
  uint32_t s = 12345;
  for (int i = 0; i < 200000 && !HasFailure(); ++i) {
    s = s * 1664525u + 1013904223u;
    float x;
    std::memcpy(&x, &s, 4);
    if (std::isfinite(x)) check(x);
  }
}

#if defined(__x86_64__)
// VCVTNEPS2BF16 rounds to nearest even but flushes subnormals, so only normal results.
__attribute__((target("avx512bf16,avx512vl,avx512f"))) uint16_t hw_bf16(float f) {
  __m128bh r = _mm_cvtneps_pbh(_mm_set1_ps(f));
  uint16_t o[8];
  std::memcpy(o, &r, sizeof o);
  return o[0];
}
TEST(Dtype, Fp32ToBf16MatchesAvx512Bf16) {
  if (!__builtin_cpu_supports("avx512bf16")) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  for_each_pair(DType::bf16, [&](uint32_t, double a, double c) {
    if (std::fabs(a) < kv::min_normal(DType::bf16)) return;
    float m = static_cast<float>((a + c) / 2);
    for (float x : {m, std::nextafterf(m, -1e30f), std::nextafterf(m, 1e30f), static_cast<float>(a)})
      ASSERT_EQ(kv::encode(DType::bf16, kv::round_to(DType::bf16, x)), hw_bf16(x)) << std::hexfloat << x;
  });
}
#endif

TEST(Dtype, FormatConstants) {
  struct Row { DType d; double max, min_normal, min_sub, u, ulp1; } rows[] = {
      {DType::f32, 0x1.fffffep127, 0x1p-126, 0x1p-149, 0x1p-24, 0x1p-23},
      {DType::f16, 65504.0, 0x1p-14, 0x1p-24, 0x1p-11, 0x1p-10},
      {DType::bf16, 0x1.fep127, 0x1p-126, 0x1p-133, 0x1p-8, 0x1p-7}};
  for (const Row& r : rows) {
    EXPECT_EQ(kv::max_finite(r.d), r.max) << kv::dtype_name(r.d);
    EXPECT_EQ(kv::min_normal(r.d), r.min_normal) << kv::dtype_name(r.d);
    EXPECT_EQ(kv::min_subnormal(r.d), r.min_sub) << kv::dtype_name(r.d);
    EXPECT_EQ(kv::unit_roundoff(r.d), r.u) << kv::dtype_name(r.d);
    EXPECT_EQ(kv::ulp(r.d, 1.0), r.ulp1) << kv::dtype_name(r.d);
  }
  EXPECT_EQ(kv::ulp(DType::f16, 65504.0), 32.0);
  EXPECT_EQ(kv::ulp(DType::f16, -1.999), 0x1p-10);
  EXPECT_EQ(kv::ulp(DType::f16, 0.0), 0x1p-24);
  EXPECT_EQ(kv::ulp(DType::f16, 1e-7), 0x1p-24);  // subnormal range: fixed spacing
  EXPECT_EQ(kv::ulp(DType::bf16, 0x1p-130), 0x1p-133);
  EXPECT_EQ(kv::ulp(DType::f32, kInf), kInf);
  EXPECT_EQ(kv::poison_bits(DType::f32), 0xFFFFFFFFu);
  EXPECT_EQ(kv::poison_bits(DType::f16), 0xFFFFu);
  for (DType d : kAll) {
    EXPECT_TRUE(kv::is_nan_bits(d, kv::poison_bits(d)));
    EXPECT_EQ(kv::parse_dtype(kv::dtype_name(d)), d);
  }
  EXPECT_EQ(kv::dtype_size(DType::f32), 4u);
  EXPECT_EQ(kv::dtype_size(DType::bf16), 2u);
  EXPECT_FALSE(kv::parse_dtype("fp8").has_value());
  // ulp matches the gap to the next value, exhaustively over the 16-bit formats.
  for (DType d : kHalf)
    for (uint32_t b = 0; std::isfinite(kv::decode(d, b + 1)); ++b)
      ASSERT_EQ(kv::ulp(d, kv::decode(d, b)), kv::decode(d, b + 1) - kv::decode(d, b)) << std::hex << b;
}

}  // namespace
