// The judge on hand-made outputs: NaN fails, an exact 0 passes a zero-width enclosure,
// poison counts as unwritten, padding writes are caught, and max/p99 ratios are right.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "check/judge.hpp"
#include "core/tensor.hpp"

namespace {

struct Out {
  std::shared_ptr<kv::Buffer> buf;
  kv::TensorView view;
  Out(kv::DType d, int64_t n, std::vector<int64_t> strides = {}, int64_t offset = 0) {
    kv::TensorDesc desc{"y", d, {n}, std::move(strides), offset};
    buf = std::make_shared<kv::Buffer>(static_cast<size_t>(desc.storage_elems()) * kv::dtype_size(d));
    buf->poison(d);
    view = kv::TensorView{desc, buf->payload()};
  }
};

/// Reference v with no error, and the enclosure [v - hw, v + hw] for every element.
void point_ref(size_t n, double v, double hw, kv::OutputRef& ref, kv::OutputEnclosure& enc) {
  ref = kv::OutputRef{"y", kv::DoubleBuf(n, v), kv::DoubleBuf(n, 0.0)};
  enc = kv::OutputEnclosure{"y", kv::DoubleBuf(n, v - hw), kv::DoubleBuf(n, v + hw), kv::ByteBuf(n, 0)};
}

}  // namespace

TEST(Judge, NanFailsAndExactZeroPasses) {
  Out o(kv::DType::f32, 3);
  kv::OutputRef ref;
  kv::OutputEnclosure enc;
  point_ref(3, 0.0, 0.0, ref, enc);  // zero-width enclosure at 0
  o.view.store(0, 0.0);
  o.view.store(1, -0.0);
  o.view.store(2, std::nan(""));
  auto tv = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv.verdict, "fail");
  EXPECT_EQ(tv.n_fail, 1);
  EXPECT_EQ(tv.n_nan_mismatch, 1);
  EXPECT_EQ(tv.first_fail_index, 2);
  o.view.store(2, 0.0);
  EXPECT_EQ(kv::judge(o.view, ref, enc, true).verdict, "pass");
}

// Where an intermediate may overflow (the admissible set is unbounded on a side), a correct
// impl may reach NaN through inf * 0: NaN is admitted there but only as unverifiable; an
// element with a finite bound still fails on NaN, and unwritten elements fail everywhere.
TEST(Judge, NanIsAdmittedOnlyWhereTheBoundIsInfinite) {
  const double inf = std::numeric_limits<double>::infinity();
  Out o(kv::DType::f16, 3);
  kv::OutputRef ref;
  kv::OutputEnclosure enc;
  point_ref(3, 1.0, 0.5, ref, enc);
  enc.hi[0] = inf;  // element 0: the contract's arithmetic may overflow
  o.view.store(0, std::nan(""));
  o.view.store(1, 1.0);
  o.view.store(2, 1.25);
  auto tv = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv.verdict, "unverifiable");
  EXPECT_EQ(tv.n_fail, 0);
  EXPECT_EQ(tv.n_nan_admitted, 1);
  EXPECT_EQ(tv.n_nan_mismatch, 0);
  o.view.store(1, std::nan(""));  // finite bound: NaN fails
  auto tv2 = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv2.verdict, "fail");
  EXPECT_EQ(tv2.n_nan_mismatch, 1);
  EXPECT_EQ(tv2.first_fail_index, 1);
  Out u(kv::DType::f16, 3);  // all poisoned: element 0 fails although its bound is infinite
  EXPECT_EQ(kv::judge(u.view, ref, enc, true).n_fail, 3);
}

// v = +inf (an infinite input reaches the element exactly): -inf and NaN fail where the
// contract's bound is that infinity, and are unverifiable where the contract leaves the
// element unknown (an infinity times a rounded factor of open sign).
TEST(Judge, AnInfiniteValueMatchesInSignUnlessTheContractLeavesItOpen) {
  const double inf = std::numeric_limits<double>::infinity();
  Out o(kv::DType::f32, 2);
  kv::OutputRef ref{"y", kv::DoubleBuf(2, inf), kv::DoubleBuf(2, 0.0)};
  kv::OutputEnclosure enc{"y", kv::DoubleBuf(2, inf), kv::DoubleBuf(2, inf), kv::ByteBuf(2, 0)};
  o.view.store(0, inf);
  o.view.store(1, std::nan(""));
  EXPECT_EQ(kv::judge(o.view, ref, enc, true).n_fail, 1);
  enc.lo[1] = -inf;  // element 1: the contract admits anything
  auto tv = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv.n_fail, 0);
  EXPECT_EQ(tv.n_nan_admitted, 1);
  EXPECT_EQ(tv.verdict, "unverifiable");
}

// Where the enclosure admits NaN with finite bounds (Enc::nan: an intermediate may overflow
// both ways and softcap bounds the rest), NaN is admitted and the element unverifiable,
// never a pass; a number outside the bounds still fails; where the defined value is NaN,
// NaN stays required.
TEST(Judge, MayNanAdmitsNanWithFiniteBoundsButNeverPasses) {
  Out o(kv::DType::f32, 4);
  kv::OutputRef ref;
  kv::OutputEnclosure enc;
  point_ref(4, 1.0, 0.5, ref, enc);
  enc.may_nan = kv::ByteBuf(4, 1);
  ref.v[3] = std::nan("");
  o.view.store(0, std::nan(""));
  o.view.store(1, 1.25);
  o.view.store(2, 1.0);
  o.view.store(3, std::nan(""));
  auto tv = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv.verdict, "unverifiable");
  EXPECT_EQ(tv.n_fail, 0);
  EXPECT_EQ(tv.n_nan_admitted, 1);
  EXPECT_EQ(tv.n_nan_expected, 1);
  EXPECT_EQ(tv.n_unverifiable, 3);  // 0, 1, 2: never a pass
  o.view.store(1, 5.0);             // outside the finite bounds
  auto tv2 = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv2.verdict, "fail");
  EXPECT_EQ(tv2.n_fail, 1);
  EXPECT_EQ(tv2.first_fail_index, 1);
  o.view.store(1, 1.0);
  o.view.store(3, 1.0);  // the defined value is NaN
  EXPECT_EQ(kv::judge(o.view, ref, enc, true).n_nan_mismatch, 1);
  enc.may_nan = kv::ByteBuf(4, 0);  // no flag: NaN at a finite bound fails
  o.view.store(3, std::nan(""));
  EXPECT_EQ(kv::judge(o.view, ref, enc, true).n_nan_mismatch, 1);
}

TEST(Judge, PoisonIsUnwrittenAndPaddingWritesAreCaught) {
  Out o(kv::DType::bf16, 4, {2}, 1);  // every other element, offset 1
  kv::OutputRef ref;
  kv::OutputEnclosure enc;
  point_ref(4, 1.0, 0.0, ref, enc);
  for (int64_t i = 0; i < 3; ++i) o.view.store(i, 1.0);  // element 3 left poisoned
  auto tv = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv.n_unwritten, 1);
  EXPECT_EQ(tv.verdict, "fail");
  o.view.store(3, 1.0);
  EXPECT_EQ(kv::judge(o.view, ref, enc, true).verdict, "pass");
  o.view.base[0] = 0;  // the offset gap before the first element
  auto tv2 = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv2.n_padding_written, 1);
  EXPECT_EQ(tv2.verdict, "fail");
}

TEST(Judge, RatiosAndP99) {
  // 1000 outputs at 1 + k 2^-23 (k = 0..999) against v = 1, enclosure half-width 2^-13:
  // ratio_k = k 2^-23 / (RN(1 + 2^-13) - 1) = k / 1024.
  const int64_t n = 1000;
  Out o(kv::DType::f32, n);
  kv::OutputRef ref;
  kv::OutputEnclosure enc;
  point_ref(n, 1.0, 0x1p-13, ref, enc);
  for (int64_t k = 0; k < n; ++k) o.view.store(k, 1.0 + static_cast<double>(k) * 0x1p-23);
  auto tv = kv::judge(o.view, ref, enc, true);
  EXPECT_EQ(tv.verdict, "pass");
  EXPECT_DOUBLE_EQ(tv.max_ratio, 999.0 / 1024.0);
  EXPECT_EQ(tv.worst_index, 999);
  const double exact_p99 = 989.0 / 1024.0;  // rank floor(0.99 * 999) = 989
  EXPECT_GE(tv.p99_ratio, exact_p99);
  EXPECT_LE(tv.p99_ratio, exact_p99 * (1 + 1.0 / 64));
  EXPECT_DOUBLE_EQ(tv.max_ulps, 999.0);  // fp32 spacing at 1 is 2^-23
}

TEST(Judge, HeadroomUsedSubtractsTheOutputsOwnRounding) {
  // bf16 outputs against v = 1 + 2^-10 (a quarter of bf16's spacing 2^-7 above 1).
  kv::OutputRef ref;
  kv::OutputEnclosure enc;
  auto used = [&](double hw, double out) {
    Out o(kv::DType::bf16, 1);
    point_ref(1, 1.0 + 0x1p-10, hw, ref, enc);
    o.view.store(0, out);
    return kv::judge(o.view, ref, enc, true);
  };
  // The correctly rounded value (1) under a tight bound: its set holds one float, so the
  // ratio reads 1 (no headroom by that measure) while the share used is 0.
  auto rn = used(0x1p-20, 1.0);
  EXPECT_EQ(rn.verdict, "pass");
  EXPECT_DOUBLE_EQ(rn.max_ratio, 1.0);
  EXPECT_DOUBLE_EQ(rn.max_used, 0.0);
  // One float up (1 + 2^-7) under a bound of 2^-8: the near edge of its rounding interval,
  // 1 + 2^-8, lies 2^-8 - 2^-10 above v: share 3/4.
  auto up = used(0x1p-8, 1.0 + 0x1p-7);
  EXPECT_EQ(up.verdict, "pass");
  EXPECT_NEAR(up.max_used, 0.75, 1e-12);  // the bound steps outward by one double
  // Under a bound of 2^-9 the same output lies outside: its share exceeds 1 (negative control).
  auto out = used(0x1p-9, 1.0 + 0x1p-7);
  EXPECT_EQ(out.verdict, "fail");
  EXPECT_GT(out.max_used, 1.0);
  // Below 1 the spacing halves: 1 - 2^-8 is one bf16 float down; the edge of its interval,
  // 1 - 2^-9, lies 2^-9 + 2^-10 below v, against a bound of 2^-8: share 3/4.
  auto down = used(0x1p-8, 1.0 - 0x1p-8);
  EXPECT_EQ(down.verdict, "pass");
  EXPECT_NEAR(down.max_used, 0.75, 1e-12);
  // An unwritten element has no headroom at all, whatever the written ones use.
  Out two(kv::DType::bf16, 2);
  point_ref(2, 1.0, 0x1p-8, ref, enc);
  two.view.store(0, 1.0);
  auto unwritten = kv::judge(two.view, ref, enc, true);
  EXPECT_EQ(unwritten.verdict, "fail");
  EXPECT_EQ(unwritten.max_used, std::numeric_limits<double>::infinity());
}

TEST(Judge, BiasIsTheMeanSignedErrorInUlps) {
  // Reference 1 + 2^-9 (a bf16 midpoint's neighbour): outputs 1 + 2^-7 (one bf16 ulp
  // above 1, +0.75 ulp from v) on three elements and 1 (-0.25 ulp) on one; an unwritten
  // element and a NaN do not enter the means.
  Out o(kv::DType::bf16, 6);
  kv::OutputRef ref;
  kv::OutputEnclosure enc;
  const double v = 1.0 + 0x1p-9;
  point_ref(6, v, 0x1p-6, ref, enc);
  for (int i = 0; i < 3; ++i) o.view.store(i, 1.0 + 0x1p-7);
  o.view.store(3, 1.0);
  o.view.store(5, std::nan(""));
  auto tv = kv::judge(o.view, ref, enc, true);
  EXPECT_DOUBLE_EQ(tv.bias_ulps, (3 * 0.75 - 0.25) / 4);
  EXPECT_DOUBLE_EQ(tv.mean_abs_ulps, (3 * 0.75 + 0.25) / 4);
}
