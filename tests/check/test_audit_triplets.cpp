// Trees from positive terms (check/audit_triplets): FPRev's recursion fed by rooted triplets
// recovers the host impls' sums, fused blocks and random trees; the triplet answers read
// through HostPolicy::Sum's own fp32 arithmetic (a = 1, b = c = 0.375 ulp, the rest 0) are
// the tree's; a tree answers 1 to one or all three orientations of a triple, and an
// accumulator too narrow to keep M + 2v answers 0 to all three (the spot check's control).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>

#include "check/audit_triplets.hpp"
#include "random_tree.hpp"
#include "ops/host/host_policy.hpp"

namespace {

using kv::LaneTree;
using kv::SumTree;
using Status = kv::TreeBuild::Status;

constexpr int64_t kNoBudget = int64_t(1) << 40;

void expect_recovered(const SumTree& truth, uint64_t seed = 1) {
  const int64_t n = truth.leaves();
  const kv::TreeBuild b = kv::reconstruct_from_triplets(n, kv::tree_triplet_oracle(truth), seed, kNoBudget);
  ASSERT_EQ(b.status, Status::ok) << b.why;
  EXPECT_EQ(kv::canonical(b.tree), kv::canonical(truth)) << "n = " << n;
  EXPECT_EQ(kv::fit_shape(b.tree).n_eff, kv::fit_shape(truth).n_eff);
}

/// P(a; b, c) through fp32 sums of `sum`: a = 1, b = c = 0.375 * 2^-23, the rest 0; the
/// readout 1 + 2^-23 answers 1, exactly 1 answers 0, anything else -1.
template <class Sum>
kv::TripletOracle host_triplets(int64_t n, Sum sum) {
  return [=](const std::vector<kv::Triple>& q) {
    std::vector<int> out;
    std::vector<double> v(static_cast<size_t>(n));
    const double u = std::ldexp(1.0, -23);
    for (const kv::Triple& t : q) {
      std::fill(v.begin(), v.end(), 0.0);
      v[t[0]] = 1.0, v[t[1]] = v[t[2]] = 0.375 * u;
      const double s = sum(v);
      out.push_back(s == 1.0 + u ? 1 : s == 1.0 ? 0 : -1);
    }
    return out;
  };
}

TEST(AuditTriplets, KnownTreesAreRecovered) {
  for (int64_t n : {1, 2, 3, 40}) expect_recovered(kv::serial_tree(n));
  for (LaneTree kind : {LaneTree::pairwise, LaneTree::shfl_down})
    for (int64_t n : {31, 300}) expect_recovered(kv::lanes_tree(n, 32, kind), static_cast<uint64_t>(n));
  expect_recovered(kv::chunked_tree(200, 64, 32));
  expect_recovered(kv::kary_tree(100, 4));  // fused blocks: every triple inside one reads 1
}

TEST(AuditTriplets, TheHostSumAnswersItsOwnTree) {
  for (LaneTree kind : {LaneTree::pairwise, LaneTree::shfl_down})
    for (int64_t n : {2, 31, 300}) {
      SCOPED_TRACE(std::to_string(n));
      kv::HostPolicy p;
      p.lanes = 32;
      p.tree = kind == LaneTree::shfl_down ? kv::HostPolicy::Tree::shfl_down : kv::HostPolicy::Tree::pairwise;
      const auto oracle = host_triplets(n, [&](const std::vector<double>& v) {
        auto s = p.sum();
        for (double x : v) s.add(x);
        return p.finish(s, "row");
      });
      const kv::TreeBuild b = kv::reconstruct_from_triplets(n, oracle, 5, kNoBudget);
      ASSERT_EQ(b.status, Status::ok) << b.why;
      EXPECT_EQ(kv::canonical(b.tree), kv::canonical(kv::lanes_tree(n, 32, kind)));
    }
}

TEST(AuditTriplets, OrientationsAnswerOneOrThreeAndANarrowAccumulatorNone) {
  const SumTree t = kv::lanes_tree(300, 32, LaneTree::pairwise), f = kv::kary_tree(300, 8);
  const std::vector<kv::Triple> q = kv::orientations({{0, 1, 2}, {5, 200, 37}, {299, 31, 63}});
  ASSERT_EQ(q.size(), 9u);
  for (const SumTree* tree : {&t, &f})
    for (size_t i = 0; i < q.size(); i += 3) {
      const int ones = kv::triplet_of(*tree, q[i]) + kv::triplet_of(*tree, q[i + 1]) + kv::triplet_of(*tree, q[i + 2]);
      EXPECT_TRUE(ones == 1 || ones == 3) << ones;
    }
  // bf16 accumulation of the same terms: 2v is absorbed too, every orientation reads 0.
  const auto narrow = host_triplets(300, [](const std::vector<double>& v) {
    float s = 0;
    for (double x : v) s = static_cast<float>(static_cast<double>(s) + x), s = std::ldexp(std::nearbyint(std::ldexp(s, 7)), -7);
    return static_cast<double>(s);
  });
  for (int a : narrow(q)) EXPECT_EQ(a, 0);
}

TEST(AuditTriplets, UnreadableAnswersAndBudgetsStop) {
  const SumTree t = kv::serial_tree(50);
  const kv::TripletOracle exact = kv::tree_triplet_oracle(t);
  const kv::TreeBuild b = kv::reconstruct_from_triplets(50, [&](const std::vector<kv::Triple>& q) {
    std::vector<int> a = exact(q);
    a.back() = -1;
    return a;
  }, 1, kNoBudget);
  EXPECT_EQ(b.status, Status::inconsistent);
  EXPECT_NE(b.why.find("neither M nor M + 1 ulp"), std::string::npos) << b.why;
  const kv::TreeBuild c = kv::reconstruct_from_triplets(50, exact, 1, 100);
  EXPECT_EQ(c.status, Status::budget) << c.why;
}

RC_GTEST_PROP(AuditTriplets, RandomTreesAreRecovered, ()) {
  const int64_t n = *rc::gen::inRange<int64_t>(1, 120);
  const int fan = *rc::gen::inRange(2, 5);
  const SumTree t = kvtest::random_tree(n, fan);
  const kv::TreeBuild b = kv::reconstruct_from_triplets(n, kv::tree_triplet_oracle(t), *rc::gen::arbitrary<uint64_t>(), kNoBudget);
  RC_ASSERT(b.status == Status::ok);
  RC_ASSERT(kv::canonical(b.tree) == kv::canonical(t));
}

}  // namespace
