// Recommended assert_close tolerances: the frontier kept per output covers every element,
// the smallest pair covers every point and no covering pair is cheaper, and the judge's
// points bound the errors of the elements it judged.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "check/judge.hpp"
#include "check/tolerance.hpp"
#include "core/tensor.hpp"

namespace {

/// Random (|v|, err) points over many binades, some with |v| = 0.
std::vector<kv::TolPoint> gen_points() {
  const int n = *rc::gen::inRange(1, 60);
  std::vector<kv::TolPoint> pts;
  for (int i = 0; i < n; ++i) {
    const double v = *rc::gen::element(0, 1) == 0 && *rc::gen::inRange(0, 8) == 0
                         ? 0.0 : std::ldexp(1.0 + *rc::gen::inRange(0, 1000) / 1000.0, *rc::gen::inRange(-30, 20));
    const double e = std::ldexp(1.0 + *rc::gen::inRange(0, 1000) / 1000.0, *rc::gen::inRange(-40, 5));
    pts.push_back({v, e});
  }
  return pts;
}

double cost(kv::TolPair p, double au, double ru) { return p.atol / au + p.rtol / ru; }

}  // namespace

RC_GTEST_PROP(Tolerance, AnyPairCoveringTheFrontierCoversEveryPoint, ()) {
  const auto pts = gen_points();
  const auto front = kv::tol_frontier(pts);
  RC_ASSERT(front.size() <= pts.size());
  const kv::TolPair p{std::ldexp(1.0, *rc::gen::inRange(-45, 8)), std::ldexp(1.0, *rc::gen::inRange(-30, 4))};
  if (kv::tol_covers(front, p)) RC_ASSERT(kv::tol_covers(pts, p));
}

RC_GTEST_PROP(Tolerance, TheSmallestPairCoversAndNoCoveringPairIsCheaper, ()) {
  const auto pts = gen_points();
  const double au = 1e-5, ru = 1.6e-2;
  const kv::TolPair best = kv::smallest_pair(kv::tol_frontier(pts), au, ru);
  RC_ASSERT(best.atol >= 0);
  RC_ASSERT(best.rtol >= 0);
  RC_ASSERT(kv::tol_covers(pts, best));
  // Any rtol, with the least atol that then covers: never cheaper than the best.
  for (int k = 0; k < 20; ++k) {
    const double r = *rc::gen::element(0.0, std::ldexp(1.0, *rc::gen::inRange(-30, 4)));
    double a = 0;
    for (auto& q : pts) a = std::max(a, q.err - r * q.v);
    RC_ASSERT(cost({a, r}, au, ru) >= cost(best, au, ru) * (1 - 1e-12));
  }
}

TEST(Tolerance, ElementsOfOneBinNeedNoMoreThanTheBinsPoint) {
  // Two elements in one bin: the bin keeps the smaller |v| with the larger error.
  kv::TolBuckets b;
  b.add(1.0, 1e-3);
  b.add(1.1, 2e-3);
  const auto f = b.frontier();
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].v, 1.0);
  EXPECT_EQ(f[0].err, 2e-3);
  // Exact outputs (zero error) bind nothing: the smallest pair is (0, 0).
  kv::TolBuckets z;
  z.add(3.0, 0.0);
  EXPECT_TRUE(z.frontier().empty());
  const auto p = kv::smallest_pair(z.frontier(), 1e-5, 1.3e-6);
  EXPECT_EQ(p.atol, 0.0);
  EXPECT_EQ(p.rtol, 0.0);
}

TEST(Tolerance, PureRelativeErrorsGiveAPureRtol) {
  // err = 2^-9 |v| at every scale: rtol 2^-9 with atol 0 is cheapest in bf16 units.
  std::vector<kv::TolPoint> pts;
  for (int e = -20; e <= 10; ++e) pts.push_back({std::ldexp(1.0, e), std::ldexp(1.0, e - 9)});
  const auto p = kv::smallest_pair(kv::tol_frontier(pts), 1e-5, 1.6e-2);
  EXPECT_EQ(p.atol, 0.0);
  EXPECT_DOUBLE_EQ(p.rtol, std::ldexp(1.0, -9));
}

TEST(Tolerance, TheJudgesPointsBoundEveryElementsError) {
  const int64_t n = 5000;
  kv::TensorDesc desc{"y", kv::DType::bf16, {n}, {}, 0};
  auto buf = std::make_shared<kv::Buffer>(static_cast<size_t>(n) * 2);
  kv::TensorView out{desc, buf->payload()};
  kv::OutputRef ref{"y", kv::DoubleBuf(n, 0.0), kv::DoubleBuf(n, 0.0)};
  kv::OutputEnclosure enc{"y", kv::DoubleBuf(n, 0.0), kv::DoubleBuf(n, 0.0), kv::ByteBuf(n, 0)};
  for (int64_t i = 0; i < n; ++i) {
    const double v = std::ldexp(1.0 + 0.37 * static_cast<double>(i % 11), static_cast<int>(i % 37) - 20) * (i % 2 ? -1 : 1);
    ref.v[i] = v;
    enc.lo[i] = v - std::fabs(v) * 0.01, enc.hi[i] = v + std::fabs(v) * 0.01;
    out.store(i, v);  // the output's own rounding: up to half a bf16 ulp
  }
  const auto tv = kv::judge(out, ref, enc, false);
  ASSERT_FALSE(tv.tol_points.empty());
  const auto p = kv::smallest_pair(tv.tol_points, 1e-5, 1.6e-2);
  for (int64_t i = 0; i < n; ++i) {
    const double err = std::fabs(out.get(i) - ref.v[i]);
    ASSERT_LE(err, p.atol + p.rtol * std::fabs(ref.v[i])) << "element " << i;
  }
  // Rounding to bf16 errs by at most u = 2^-8 relative; the bins may add 1/8 of it.
  EXPECT_LE(p.rtol, std::ldexp(1.0, -8) * 1.125);
}

TEST(Tolerance, ShareIsTheWorstElementsPartOfAnAllowance) {
  const std::vector<kv::TolPoint> pts{{1.0, 0.5}, {4.0, 1.0}, {0.0, 0.0}};
  EXPECT_DOUBLE_EQ(kv::tol_share(pts, {0.0, 1.0}), 0.5);     // 0.5 of 1 at v = 1; 1 of 4 at v = 4
  EXPECT_DOUBLE_EQ(kv::tol_share(pts, {0.25, 0.25}), 1.0);   // 0.5 of 0.5: exactly covered
  EXPECT_FALSE(kv::tol_share(pts, {0.25, 0.125}) <= 1.0);    // not covered: above 1, as tol_covers says
  EXPECT_FALSE(kv::tol_covers(pts, {0.25, 0.125}));
  EXPECT_EQ(kv::tol_share(pts, {0.0, 0.0}), std::numeric_limits<double>::infinity());  // no allowance at all
}
