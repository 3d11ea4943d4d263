// The enclosure scalar: every operation's result must contain the exact result of the
// operation on any points of its operands (checked in 256-bit MPFR), and contract sums
// must contain every float summation order the contract allows.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cfenv>
#include <random>

#include "reference/enclosure.hpp"
#include "reference/policy.hpp"

namespace {

using kv::Enc;
using kv::mpfr_float;

Enc gen_enc(bool positive) {
  double m = *rc::gen::inRange(-100000, 100000) / 1000.0 + *rc::gen::inRange(0, 1000) * 0x1p-30;
  if (positive) m = std::fabs(m) + 0.001;
  int rel = *rc::gen::inRange(0, 40);
  double r = *rc::gen::element(0, 1) ? 0.0 : std::fabs(m) * std::ldexp(1.0, -10 - rel);
  return Enc{m, r, false};
}

/// A point of the enclosure: m + t r, t in [-1, 1].
mpfr_float point(const Enc& e) {
  double t = *rc::gen::inRange(-1000, 1001) / 1000.0;
  return mpfr_float(e.m) + mpfr_float(t) * mpfr_float(e.r);
}

bool inside(const mpfr_float& x, const Enc& e) { return abs(x - mpfr_float(e.m)) <= mpfr_float(e.r); }

double rn(kv::DType d, const mpfr_float& x) {
  double hi, lo;
  kv::split_hi_lo(x, hi, lo);
  return kv::round_to(d, hi, lo);
}

}  // namespace

RC_GTEST_PROP(Enclosure, ArithmeticContainsExactResults, ()) {
  kv::set_mpfr_bits(256);
  Enc a = gen_enc(false), b = gen_enc(true);
  mpfr_float x = point(a), y = point(b);
  RC_ASSERT(inside(x + y, a + b));
  RC_ASSERT(inside(x - y, a - b));
  RC_ASSERT(inside(x * y, a * b));
  RC_ASSERT(inside(x / y, a / b));
  RC_ASSERT(inside(1 / sqrt(y), kv::enc_rsqrt(b)));
}

RC_GTEST_PROP(Enclosure, RoundingsContainEveryRoundedPoint, ()) {
  kv::set_mpfr_bits(256);
  Enc a = gen_enc(false);
  mpfr_float x = point(a);
  for (kv::DType d : {kv::DType::f32, kv::DType::f16, kv::DType::bf16}) {
    RC_ASSERT(inside(mpfr_float(rn(d, x)), kv::enc_round_to(a, d)));
    RC_ASSERT(inside(mpfr_float(rn(d, x)), kv::enc_round_in(a, d, kv::unit_roundoff(d), false)));
    // Directed rounding errs by up to a full ulp: a contract with u = 2^(1-p) covers it.
    double hi, lo;
    kv::split_hi_lo(x, hi, lo);
    double up = kv::round_to(d, hi, lo);
    if (mpfr_float(up) < x) up += kv::ulp(d, up);  // the next value above, or one beyond
    RC_ASSERT(inside(mpfr_float(up), kv::enc_round_in(a, d, 2 * kv::unit_roundoff(d), false)));
  }
}

RC_GTEST_PROP(Enclosure, MathUlpsWidenByDeclaredUlps, ()) {
  kv::set_mpfr_bits(256);
  Enc a = gen_enc(true);
  mpfr_float x = point(a);
  // Every float within 2 ulps of the exact rsqrt lies in the widened enclosure.
  mpfr_float exact = 1 / sqrt(x);
  float f = static_cast<float>(rn(kv::DType::f32, exact));
  mpfr_float two_ulps = 2 * mpfr_float(kv::ulp(kv::DType::f32, f));
  Enc w = kv::enc_widen_ulps(kv::enc_rsqrt(a), kv::DType::f32, 2);
  float cand = f;
  for (int k = 0; k < 4; ++k) cand = std::nextafter(cand, 0.0f);
  for (int k = 0; k < 9; ++k, cand = std::nextafter(cand, INFINITY))
    if (abs(mpfr_float(cand) - exact) <= two_ulps) RC_ASSERT(inside(mpfr_float(cand), w));
}

RC_GTEST_PROP(Enclosure, ContractSumContainsEveryOrder, ()) {
  kv::set_mpfr_bits(256);
  const int n = *rc::gen::inRange(1, 600);
  const bool mixed = *rc::gen::arbitrary<bool>();
  std::vector<float> t(static_cast<size_t>(n));
  std::mt19937 g(*rc::gen::arbitrary<uint32_t>());
  std::normal_distribution<float> nd(mixed ? 0.0f : 3.0f, 1.0f);
  for (auto& v : t) v = nd(g) * (mixed ? std::ldexp(1.0f, static_cast<int>(g() % 20) - 10) : 1.0f);
  kv::EncSum s;
  mpfr_float exact = 0;
  for (float v : t) s.add(kv::enc_exact(v)), exact += v;
  RC_ASSERT(inside(exact, s.exact()));
  Enc bound = s.contract(kv::DType::f32, kv::unit_roundoff(kv::DType::f32), n);
  for (int rep = 0; rep < 4; ++rep) {
    std::shuffle(t.begin(), t.end(), g);
    float acc = 0;
    for (float v : t) acc += v;
    RC_ASSERT(inside(mpfr_float(acc), bound));
  }
  // Upward rounding needs u = 2^-23.
  std::fesetround(FE_UPWARD);
  volatile float up = 0;
  for (float v : t) up = up + v;
  std::fesetround(FE_TONEAREST);
  RC_ASSERT(inside(mpfr_float(static_cast<float>(up)), s.contract(kv::DType::f32, 0x1p-23, n)));
}

// Terms near fp32's overflow threshold, of one sign or both: every order an fp32 sum may
// take (serial or a pairwise tree, in any permutation) ends in the contract's enclosure,
// at ±inf only where it admits ±inf (an infinite radius), at NaN only where it admits
// NaN; one-signed terms never admit NaN. tanh of the sum (softcap) keeps the flag while
// bounding the value.
RC_GTEST_PROP(Enclosure, OverflowingSumAdmitsInfAndNanOfEveryOrder, ()) {
  kv::set_mpfr_bits(256);
  const int n = *rc::gen::inRange(2, 40);
  const int signs = *rc::gen::inRange(0, 3);  // 0: positive, 1: negative, 2: mixed
  std::mt19937 g(*rc::gen::arbitrary<uint32_t>());
  std::vector<float> t(static_cast<size_t>(n));
  for (auto& v : t) {
    const float mag = g() % 4 == 0 ? static_cast<float>(g() % 1000) : std::ldexp(1.0f + static_cast<float>(g() % 1024) / 1024.0f, 121 + static_cast<int>(g() % 7));
    v = (signs == 1 || (signs == 2 && g() % 2)) ? -mag : mag;
  }
  kv::EncSum s;
  for (float v : t) s.add(kv::enc_exact(v));
  const Enc bound = s.contract(kv::DType::f32, kv::unit_roundoff(kv::DType::f32), n);
  if (signs != 2) RC_ASSERT(!bound.nan);
  for (int rep = 0; rep < 16; ++rep) {
    std::shuffle(t.begin(), t.end(), g);
    std::vector<float> l = t;
    if (rep % 2) {
      for (size_t w = 1; w < l.size(); w *= 2)
        for (size_t i = 0; i + w < l.size(); i += 2 * w) l[i] = l[i] + l[i + w];
    } else {
      for (size_t i = 1; i < l.size(); ++i) l[0] = l[0] + l[i];
    }
    const float got = l[0];
    if (std::isnan(got)) RC_ASSERT(bound.nan);
    else if (std::isinf(got)) RC_ASSERT(bound.r == std::numeric_limits<double>::infinity());
    else RC_ASSERT(inside(mpfr_float(got), bound));
  }
  const Enc th = kv::enc_tanh(bound);
  RC_ASSERT(th.nan == bound.nan);
  RC_ASSERT(std::isfinite(kv::enc_lo(th)) && std::isfinite(kv::enc_hi(th)));
}

// NaN admissible (Enc::nan) exactly where values that may be infinite (an overflowed
// intermediate) or zero may meet as inf - inf, inf * 0, 0 / 0 or inf / inf; it spreads like
// NaN through later operations, including those that map ±inf to finite values.
TEST(Enclosure, NanFlagMarksWhereInfinitiesMayMeet) {
  const double inf = std::numeric_limits<double>::infinity(), big = 0x1.fffffep127;
  const Enc ovf = kv::enc_round_in(kv::enc_exact(big * 1.5), kv::DType::f32, 0x1p-24, false);  // may be ±inf
  const Enc two = kv::enc_exact(2.0), zero = kv::enc_exact(0.0), around0{0.0, 0.5, false};
  ASSERT_EQ(ovf.r, inf);
  EXPECT_FALSE(ovf.nan);              // an overflowing rounding gives ±inf, never NaN
  EXPECT_FALSE((ovf + two).nan);      // inf + finite
  EXPECT_TRUE((ovf + ovf).nan);       // inf - inf
  EXPECT_FALSE((ovf * two).nan);      // inf * nonzero
  EXPECT_TRUE((ovf * zero).nan);      // inf * 0
  EXPECT_TRUE((ovf * around0).nan);
  EXPECT_FALSE((two / ovf).nan);      // finite / inf = 0
  EXPECT_TRUE((zero / ovf).nan);      // an unknown denominator may be 0: 0 / 0
  EXPECT_TRUE((ovf / ovf).nan);
  EXPECT_FALSE((two / around0).nan);  // x / 0 = ±inf
  EXPECT_TRUE((around0 / around0).nan);
  EXPECT_TRUE(kv::enc_rsqrt(ovf).nan);  // 1/sqrt of a possible negative
  EXPECT_TRUE(kv::enc_log(ovf).nan);
  EXPECT_TRUE(kv::enc_sin(ovf).nan);    // sin(±inf)
  EXPECT_FALSE(kv::enc_exp(ovf).nan);
  // One-signed overflow: ±inf but no NaN; both ways: NaN too.
  kv::EncSum pos, mixed;
  for (double v : {big, big, 1.0}) pos.add(kv::enc_exact(v));
  for (double v : {big, -big, big, -big}) mixed.add(kv::enc_exact(v));
  const Enc sp = pos.contract(kv::DType::f32, 0x1p-24, 3), sm = mixed.contract(kv::DType::f32, 0x1p-24, 4);
  EXPECT_EQ(sp.r, inf);
  EXPECT_FALSE(sp.nan);
  EXPECT_EQ(sm.r, inf);
  EXPECT_TRUE(sm.nan);
  // tanh bounds the value (softcap) and keeps the possible NaN; later operations keep it.
  const Enc th = kv::enc_tanh(sm);
  EXPECT_TRUE(th.nan);
  EXPECT_LE(kv::enc_hi(th), 1.0 + 1e-12);
  EXPECT_GE(kv::enc_lo(th), -1.0 - 1e-12);
  EXPECT_TRUE((kv::enc_exp(th * two - two) + two).nan);
  EXPECT_TRUE(kv::enc_max(kv::enc_exact(inf), th).nan);
  EXPECT_FALSE(kv::enc_tanh(sp).nan);
  kv::EncSum after;
  after.add(th), after.add(two);
  EXPECT_TRUE(after.exact().nan);
  EXPECT_TRUE(after.contract(kv::DType::f32, 0x1p-24, 2).nan);
  // An infinite term beside finite terms that may overflow the other way: inf - inf.
  kv::EncSum withinf;
  for (double v : {inf, -big, -big}) withinf.add(kv::enc_exact(v));
  EXPECT_EQ(withinf.exact().m, inf);
  EXPECT_FALSE(withinf.exact().nan);  // exact arithmetic: +inf
  EXPECT_TRUE(withinf.contract(kv::DType::f32, 0x1p-24, 3).nan);
  kv::EncSum withinf_small;
  for (double v : {inf, -1.0, -1.0}) withinf_small.add(kv::enc_exact(v));
  EXPECT_FALSE(withinf_small.contract(kv::DType::f32, 0x1p-24, 3).nan);
}

TEST(Enclosure, ContractSumIsUnverifiableWhenNeffTimesUReachesOne) {
  kv::EncSum s;
  for (int i = 0; i < 300; ++i) s.add(kv::enc_exact(1.0));
  EXPECT_FALSE(s.contract(kv::DType::bf16, kv::unit_roundoff(kv::DType::bf16), 255).unv);
  EXPECT_TRUE(s.contract(kv::DType::bf16, kv::unit_roundoff(kv::DType::bf16), 256).unv);
  EXPECT_TRUE(std::isinf(kv::gamma_n(256, 0x1p-8)));
}

TEST(Enclosure, ExactOperationsStayPoints) {
  EXPECT_EQ((kv::enc_exact(1.5) * kv::enc_exact(2.0)).r, 0.0);
  EXPECT_EQ((kv::enc_exact(1.5) + kv::enc_exact(2.0)).r, 0.0);
  EXPECT_GT((kv::enc_exact(1.0) / kv::enc_exact(3.0)).r, 0.0);
  // A value representable in the accumulator is not widened; one that is not, is.
  EXPECT_EQ(kv::enc_round_in(kv::enc_exact(1.5), kv::DType::bf16, 0x1p-8, false).r, 0.0);
  EXPECT_GT(kv::enc_round_in(kv::enc_exact(1.0 / 3), kv::DType::bf16, 0x1p-8, false).r, 0.0);
}

TEST(Enclosure, OverflowAdmitsInfinity) {
  Enc big = kv::enc_round_in(kv::enc_exact(70000.0), kv::DType::f16, 0x1p-11, false);
  EXPECT_TRUE(std::isinf(big.r));
}

TEST(Enclosure, FlushingSumsWidenBySmallestNormals) {
  // Sixteen fp32 subnormal terms: a sum that flushes each (fp32 atomicAdd on global memory)
  // gives 0, outside the IEEE-sum bound and inside the ftz one.
  kv::EncSum s;
  for (int i = 0; i < 16; ++i) s.add(Enc{0x1p-130, 0.0, false});
  const double exact = 16 * 0x1p-130;
  const Enc ieee = s.contract(kv::DType::f32, 0x1p-24, 16), ftz = s.contract(kv::DType::f32, 0x1p-24, 16, true);
  EXPECT_FALSE(kv::enc_lo(ieee) <= 0.0) << "the IEEE bound should exclude a flushed 0";
  EXPECT_LE(kv::enc_lo(ftz), 0.0);
  EXPECT_LE(kv::enc_lo(ftz), exact);
  EXPECT_GE(kv::enc_hi(ftz), exact);
}

// IEEE special values on the defined computation: NaN is sticky, an infinity with a
// bounded operand of certain sign stays an exact infinity, inf * 0 and inf - inf are NaN,
// finite / inf is 0, and an infinity times an interval around 0 is an unknown value.
TEST(Enclosure, SpecialValuesFollowIeee) {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  const kv::Enc pinf = kv::enc_exact(inf), ninf = kv::enc_exact(-inf), qnan = kv::enc_exact(nan);
  const kv::Enc two{2.0, 0.25, false}, zero = kv::enc_exact(0.0), around0{0.0, 0.5, false};
  auto is_nan = [](const kv::Enc& e) { return std::isnan(e.m) && e.r == 0; };
  auto is_inf = [&](const kv::Enc& e, double s) { return e.m == s * inf && e.r == 0; };
  auto unknown = [&](const kv::Enc& e) { return std::isfinite(e.m) && e.r == inf; };
  EXPECT_TRUE(is_nan(qnan + two));
  EXPECT_TRUE(is_nan(two * qnan));
  EXPECT_TRUE(is_nan(kv::enc_rsqrt(qnan)));
  EXPECT_TRUE(is_nan(kv::enc_exp(qnan)));
  EXPECT_TRUE(is_inf(pinf + two, 1));
  EXPECT_TRUE(is_nan(pinf + ninf));
  EXPECT_TRUE(is_inf(ninf * two, -1));
  EXPECT_TRUE(is_inf(pinf * -two, -1));
  EXPECT_TRUE(is_nan(pinf * zero));
  EXPECT_TRUE(unknown(pinf * around0));
  EXPECT_EQ((two / pinf).m, 0.0);
  EXPECT_EQ((two / pinf).r, 0.0);
  EXPECT_TRUE(is_nan(pinf / ninf));
  EXPECT_EQ(kv::enc_exp(ninf).m, 0.0);
  EXPECT_EQ(kv::enc_exp(ninf).r, 0.0);
  EXPECT_EQ(kv::enc_rsqrt(pinf).m, 0.0);
  EXPECT_TRUE(is_nan(kv::enc_max(two, qnan)));
  EXPECT_EQ(kv::enc_max(ninf, two).m, 2.0);
  EXPECT_TRUE(is_inf(kv::enc_round_to(pinf, kv::DType::bf16), 1));
  EXPECT_TRUE(is_nan(kv::enc_round_in(qnan, kv::DType::f32, 0x1p-24, false)));
  kv::EncSum s;
  s.add(two), s.add(pinf), s.add(two);
  EXPECT_TRUE(is_inf(s.exact(), 1));
  EXPECT_TRUE(is_inf(s.contract(kv::DType::f32, 0x1p-24, 3), 1));
  s.add(ninf);
  EXPECT_TRUE(is_nan(s.exact()));
  kv::EncSum t;
  t.add(pinf), t.add(kv::Enc{1.0, inf, false});  // an unknown term: the sum is unknown
  EXPECT_TRUE(unknown(t.exact()));
}

RC_GTEST_PROP(Enclosure, SquaresContainEverySquareAndStayAtOrAboveZero, ()) {
  kv::set_mpfr_bits(256);
  Enc a = gen_enc(false);
  if (*rc::gen::element(0, 1)) a.r = std::fabs(a.m) * 2 + 1;  // straddling 0
  const mpfr_float x = point(a);
  const Enc s = kv::enc_sq(a);
  RC_ASSERT(inside(x * x, s));
  // [0, hi] in midpoint-radius form: its lower end within a few ulps of hi below 0.
  RC_ASSERT(kv::enc_lo(s) >= -kv::enc_hi(s) * 0x1p-48);
  RC_ASSERT(kv::enc_hi(s) <= kv::enc_hi(a * a) * (1 + 0x1p-48));
}

TEST(Enclosure, AtLeastCutsOnlyBelowItsBound) {
  const Enc d = kv::enc_from_bounds(-1.0, 3000.0, false, false);
  const Enc c = kv::enc_at_least(d, 0.99);
  // Midpoint-radius form: the lower end within a few ulps of the upper one below the cut.
  EXPECT_GE(kv::enc_lo(c), 0.99 - 3000.0 * 0x1p-48);
  EXPECT_GE(kv::enc_hi(c), 3000.0);
  const Enc tight = kv::enc_from_bounds(2.0, 3.0, false, false);
  EXPECT_EQ(kv::enc_at_least(tight, 0.99).m, tight.m);  // already above: unchanged
  EXPECT_EQ(kv::enc_at_least(tight, 0.99).r, tight.r);
  EXPECT_TRUE(std::isinf(kv::enc_at_least(Enc{0.0, INFINITY, false, false}, 1.0).r));  // unbounded above: kept
  // The policy's cut: 1 in exact math, exp(0)'s declared ulps (twice) and 2^-7 under a contract.
  kv::Contract k;
  k.math_ulps["exp"] = 2.0;
  EXPECT_GE(kv::enc_lo(kv::EncPolicy{}.max_sub_den(d)), 1.0 - 3000.0 * 0x1p-48);
  const double lo = kv::enc_lo(kv::EncPolicy{&k}.max_sub_den(d));
  EXPECT_GT(lo, 0.99);
  EXPECT_LT(lo, 1.0 - 0x1p-8);
}
