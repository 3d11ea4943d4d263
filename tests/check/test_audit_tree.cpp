// Summation trees (check/audit_tree): reconstruction from LCA-size probes recovers the truth
// for the host impls' sums, fused blocks and random trees within the probe budget the
// design states; the builders are the host's order (probed through HostPolicy::Sum itself);
// the measured shapes are the host contracts less their exact adds; a corrupted answer,
// another order and an exhausted budget are reported.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cctype>
#include <cmath>
#include <functional>
#include <string>

#include "check/audit_tree.hpp"
#include "random_tree.hpp"
#include "ops/host/host_impl.hpp"
#include "ops/host/host_policy.hpp"
#include "ops/op_base.hpp"

namespace {

using kv::LaneTree;
using kv::SumTree;
using Status = kv::TreeBuild::Status;

constexpr int64_t kNoBudget = int64_t(1) << 40;

/// The design's expected cost (design20 §5): 2 n log2(n + 1) + 4 n probes.
double probe_bound(int64_t n) { return 2.0 * n * std::log2(n + 1.0) + 4.0 * n; }

/// A tree from its canonical form, e.g. "((0 1) 2 3)".
SumTree parse(const std::string& s) {
  SumTree t;
  std::vector<std::vector<int>> open;
  for (size_t i = 0; i < s.size(); ++i) {
    int v = -1;
    if (s[i] == '(') open.emplace_back();
    else if (s[i] == ')') {
      t.nodes.push_back({0, -1, open.back()});
      for (int k : open.back()) t.nodes.back().size += t.nodes[k].size;
      open.pop_back();
      v = static_cast<int>(t.nodes.size()) - 1;
    } else if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      size_t len = 0;
      t.nodes.push_back({1, std::stoll(s.substr(i), &len), {}});
      i += len - 1;
      v = static_cast<int>(t.nodes.size()) - 1;
    }
    if (v < 0) continue;
    if (open.empty()) t.root = v;
    else open.back().push_back(v);
  }
  return t;
}

/// The depth of leaf g, walking down from the root.
int64_t leaf_depth(const SumTree& t, int64_t g) {
  std::function<int64_t(int, int64_t)> find = [&](int v, int64_t d) -> int64_t {
    if (t.nodes[v].leaf == g) return d;
    for (int k : t.nodes[v].kids)
      if (int64_t r = find(k, d + 1); r >= 0) return r;
    return -1;
  };
  return find(t.root, 0);
}

/// Reconstructs `truth` from its exact answers: same tree, within the probe bound.
kv::TreeBuild expect_recovered(const SumTree& truth, uint64_t seed = 1) {
  const int64_t n = truth.leaves();
  kv::TreeBuild b = kv::reconstruct(n, kv::tree_oracle(truth), seed, kNoBudget);
  EXPECT_EQ(b.status, Status::ok) << b.why;
  EXPECT_EQ(kv::canonical(b.tree), kv::canonical(truth)) << "n = " << n;
  EXPECT_LE(b.probes, probe_bound(n)) << "n = " << n;
  return b;
}

/// L(g, j) through the host's own arithmetic (design20 §1): +M at g, -M at j, 1 elsewhere,
/// fp32 accumulation, M = 2^(ceil(log2(n + 1)) + 26). Unit partials (<= n < 2^24) are exact;
/// meeting ±M they fall below a quarter of its ulp (2^-23 M) and vanish; ±M cancel exactly
/// at the LCA. So the sum counts the units outside the LCA's subtree: L = n - sum.
template <class Sum>
kv::LcaOracle host_oracle(int64_t n, Sum sum) {
  const double m = std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(n + 1.0))) + 26);
  return [=](const std::vector<kv::LeafPair>& pairs) {
    std::vector<int64_t> out;
    std::vector<double> v(static_cast<size_t>(n));
    for (auto& [g, j] : pairs) {
      std::fill(v.begin(), v.end(), 1.0);
      v[g] = m, v[j] = -m;
      out.push_back(n - static_cast<int64_t>(sum(v)));
    }
    return out;
  };
}

kv::HostPolicy host_policy(int64_t lanes, LaneTree kind) {
  kv::HostPolicy p;
  p.lanes = lanes;
  p.tree = kind == LaneTree::shfl_down ? kv::HostPolicy::Tree::shfl_down : kv::HostPolicy::Tree::pairwise;
  return p;
}

const char* name(LaneTree k) { return k == LaneTree::pairwise ? "pairwise" : "shfl_down"; }

}  // namespace

TEST(AuditTree, SerialSumsAreRecovered) {
  for (int64_t n : {257, 1000}) {
    const kv::TreeBuild b = expect_recovered(kv::serial_tree(n), 7);
    RecordProperty("probes_serial_" + std::to_string(n), std::to_string(b.probes));
    RecordProperty("rounds_serial_" + std::to_string(n), std::to_string(b.rounds));
    // One thread from its first term: n - 1 roundings, each against one new leaf.
    const kv::MeasuredShape m = kv::fit_shape(b.tree);
    EXPECT_EQ(m.n_eff, n - 1);
    EXPECT_EQ(m.shape.serial, n - 1);
    EXPECT_EQ(m.max_fan_in, 2);
  }
}

TEST(AuditTree, LaneBlocksAreRecoveredAndMeasureTheHostContractLessOne) {
  for (LaneTree kind : {LaneTree::pairwise, LaneTree::shfl_down})
    for (int64_t lanes : {32, 128})
      for (int64_t n : {1, 2, 31, 300, 1000}) {
        SCOPED_TRACE(std::string(name(kind)) + " lanes " + std::to_string(lanes) + " n " + std::to_string(n));
        const kv::TreeBuild b = expect_recovered(kv::lanes_tree(n, lanes, kind), static_cast<uint64_t>(n + lanes));
        if (n == 1000)
          RecordProperty(std::string("probes_lanes_") + name(kind) + "_" + std::to_string(lanes),
                         std::to_string(b.probes) + " in " + std::to_string(b.rounds) + " rounds");
        // host_impl.hpp:97 declares ceil(n / l) + ceil(log2 min(l, n)); a lane's first term
        // enters exactly (host_policy.hpp:74), so every path is one rounding shorter.
        const kv::Contract k = kv::host_contract({{"row", n}}, lanes);
        EXPECT_EQ(kv::fit_shape(b.tree).n_eff, k.reduction("row").n_eff() - 1);
      }
}

TEST(AuditTree, LanesTree300x32IsTheHostShapeLessTheExactFirstAdd) {
  // The host contract for a 300-term row on 32 lanes: serial ceil(300/32) = 10, depth
  // log2 32 = 5, partials 0: n_eff 15. Lanes 0..11 hold 10 terms, whose first enters the
  // lane exactly (no rounding), so the deepest leaves see 9 serial adds, then the 5 levels
  // of the pairwise tree over 32 lanes: {9, 5, 0}, n_eff 14 = 15 - 1. The root's halves
  // (156 and 144 leaves) are a tree level, not a chain of partials (p needs a 2:1 weight).
  const kv::ReductionShape declared = kv::host_contract({{"row", 300}}, 32).reduction("row");
  ASSERT_EQ(declared.n_eff(), 15);
  const kv::MeasuredShape m = kv::fit_shape(kv::lanes_tree(300, 32, LaneTree::pairwise));
  EXPECT_EQ(m.n_eff, 14);
  EXPECT_EQ(m.n_eff, declared.n_eff() - 1);
  EXPECT_EQ(m.shape.serial, 9);
  EXPECT_EQ(m.shape.depth, 5);
  EXPECT_EQ(m.shape.partials, 0);
  EXPECT_EQ(m.max_fan_in, 2);
  EXPECT_LT(m.deepest_leaf % 32, 12);  // a lane with 10 terms
}

TEST(AuditTree, ChunkedColumnSumsAreRecoveredAndMeasureTheHostContractLessTwo) {
  for (int64_t lanes : {32, 128})
    for (int64_t rows : {63, 64, 65, 200}) {
      SCOPED_TRACE("lanes " + std::to_string(lanes) + " rows " + std::to_string(rows));
      const kv::TreeBuild b = expect_recovered(kv::chunked_tree(rows, kv::kColChunk, lanes), static_cast<uint64_t>(rows));
      // host_impl.hpp:95 declares ceil(min(64, R) / l) + ceil(log2 min(l, 64, R)) +
      // ceil(R / 64); two adds are exact: a lane's first term and the first chunk merged
      // into the running sum that starts at 0 (host_policy.hpp:98-102).
      const kv::ReductionShape declared = kv::host_contract({{"rows", rows, true}}, lanes).reduction("rows");
      // Only n_eff: the split is not unique (at 63 rows lane 30's two terms meet lane 31's
      // one leaf, a second serial step; with one term per lane the first tree level adds
      // two leaves, a serial step as well).
      EXPECT_EQ(kv::fit_shape(b.tree).n_eff, declared.n_eff() - 2);
    }
  // 200 rows, 32 lanes: chunks of 64, 64, 64, 8. The deepest path: 1 serial add, 5 levels,
  // then 3 merges; the lowest merge (64 against 64) reads as a tree level, the two above it
  // (128 : 64, 192 : 8) as partials.
  const kv::MeasuredShape m = kv::fit_shape(kv::chunked_tree(200, 64, 32));
  EXPECT_EQ(m.n_eff, 9);
  EXPECT_EQ(m.shape.serial, 1);
  EXPECT_EQ(m.shape.depth, 6);
  EXPECT_EQ(m.shape.partials, 2);
}

TEST(AuditTree, BuildersAreTheHostSumsOrder) {
  // Reconstructed from probes summed by HostPolicy::Sum itself (and column_sums), each host
  // tree is the builder's: the builders are the test oracles of the host audit.
  for (LaneTree kind : {LaneTree::pairwise, LaneTree::shfl_down})
    for (int64_t lanes : {32, 128})
      for (int64_t n : {2, 31, 300, 1000}) {
        SCOPED_TRACE(std::string(name(kind)) + " lanes " + std::to_string(lanes) + " n " + std::to_string(n));
        const kv::HostPolicy p = host_policy(lanes, kind);
        auto oracle = host_oracle(n, [&](const std::vector<double>& v) {
          auto s = p.sum();
          for (double x : v) s.add(x);
          return p.finish(s, "row");
        });
        const kv::TreeBuild b = kv::reconstruct(n, oracle, 3, kNoBudget);
        ASSERT_EQ(b.status, Status::ok) << b.why;
        EXPECT_EQ(kv::canonical(b.tree), kv::canonical(kv::lanes_tree(n, lanes, kind)));
      }
  for (int64_t rows : {63, 65, 200}) {
    const kv::HostPolicy p = host_policy(32, LaneTree::pairwise);
    auto oracle = host_oracle(rows, [&](const std::vector<double>& v) {
      double out = 0;
      kv::column_sums(p, rows, 1, 1, kv::RowSet{}, false, "rows",
                      [&](int64_t r, auto* sums) { sums[0].add(v[static_cast<size_t>(r)]); },
                      [&](int, int64_t, double x) { out = x; });
      return out;
    });
    const kv::TreeBuild b = kv::reconstruct(rows, oracle, 3, kNoBudget);
    ASSERT_EQ(b.status, Status::ok) << b.why;
    EXPECT_EQ(kv::canonical(b.tree), kv::canonical(kv::chunked_tree(rows, kv::kColChunk, 32))) << rows;
  }
}

TEST(AuditTree, FusedBlocksAreRecoveredAsWideNodes) {
  // 16-ary blocks (tensor-core style): each block one rounding. 256 = 16 * 16: two levels;
  // 300: 19 blocks, then 2 nodes, then the root.
  for (auto [n, levels] : std::vector<std::pair<int64_t, int64_t>>{{256, 2}, {300, 3}, {17, 2}}) {
    const kv::TreeBuild b = expect_recovered(kv::kary_tree(n, 16), 11);
    const kv::MeasuredShape m = kv::fit_shape(b.tree);
    EXPECT_EQ(m.n_eff, levels) << n;
    EXPECT_EQ(m.max_fan_in, 16) << n;
  }
}

TEST(AuditTree, OneCorruptedAnswerIsInconsistent) {
  // Serial tree: L(h, j) = max(h, j) + 1. The first answer for a pair (h, j), j > h + gap,
  // is lowered to j: then j counts with leaf j - 1 (or, for j = h + 1, with the h leaves
  // below h), and the ancestor of size L holds one leaf more than L: no tree answers so.
  const SumTree truth = kv::serial_tree(257);
  for (uint64_t seed : {1, 2, 3, 4, 5, 6}) {
    const int64_t gap = static_cast<int64_t>(seed % 3) * 7;
    kv::LeafPair bad{-1, -1};
    kv::LcaOracle exact = kv::tree_oracle(truth);
    kv::LcaOracle corrupted = [&](const std::vector<kv::LeafPair>& pairs) {
      std::vector<int64_t> out = exact(pairs);
      for (size_t i = 0; i < pairs.size() && bad.first < 0; ++i)
        if (pairs[i].second > pairs[i].first + gap) bad = pairs[i], out[i] -= 1;
      return out;
    };
    const kv::TreeBuild b = kv::reconstruct(257, corrupted, seed, kNoBudget);
    ASSERT_GE(bad.first, 0);
    EXPECT_EQ(b.status, Status::inconsistent) << "seed " << seed;
    EXPECT_EQ(b.pair.first, bad.first) << b.why;  // found in the corrupted pivot's own round
    EXPECT_FALSE(b.why.empty());
  }
}

TEST(AuditTree, AnswersFromAnotherOrderAreInconsistent) {
  // After the first round, the answers come from the same blocking over relabelled leaves (a
  // lane whose order differs, as rms_norm's order=shuffle): the pieces no longer fit.
  const SumTree a = kv::lanes_tree(300, 32, LaneTree::pairwise);
  SumTree other = a;
  for (auto& v : other.nodes)
    if (v.leaf >= 0) v.leaf = (v.leaf * 7 + 3) % 300;  // 7 is invertible mod 300
  kv::LcaOracle first = kv::tree_oracle(a), later = kv::tree_oracle(other);
  for (uint64_t seed : {1, 2, 3}) {
    int calls = 0;
    kv::LcaOracle mixed = [&](const std::vector<kv::LeafPair>& p) { return calls++ == 0 ? first(p) : later(p); };
    EXPECT_EQ(kv::reconstruct(300, mixed, seed, kNoBudget).status, Status::inconsistent) << seed;
  }
  // Answers outside [2, n] are rejected at once.
  kv::LcaOracle wild = [](const std::vector<kv::LeafPair>& p) { return std::vector<int64_t>(p.size(), 1); };
  const kv::TreeBuild w = kv::reconstruct(5, wild, 1, kNoBudget);
  EXPECT_EQ(w.status, Status::inconsistent);
  EXPECT_EQ(kv::pivot_depth(0, 5, wild), -1);
}

TEST(AuditTree, PivotDepthIsTheLeafDepth) {
  for (const SumTree& t : {kv::serial_tree(100), kv::lanes_tree(300, 32, LaneTree::shfl_down),
                           kv::chunked_tree(200, 64, 32), kv::kary_tree(300, 16)}) {
    const int64_t n = t.leaves();
    for (int64_t g : {int64_t(0), int64_t(1), n / 2, n - 1})
      EXPECT_EQ(kv::pivot_depth(g, n, kv::tree_oracle(t)), leaf_depth(t, g)) << kv::canonical(t).substr(0, 60);
  }
  EXPECT_EQ(kv::pivot_depth(0, 1, kv::tree_oracle(kv::serial_tree(1))), 0);
}

TEST(AuditTree, BudgetExhaustionIsReported) {
  const kv::TreeBuild b = kv::reconstruct(1000, kv::tree_oracle(kv::serial_tree(1000)), 1, 500);
  EXPECT_EQ(b.status, Status::budget);
  EXPECT_LE(b.probes, 500);
  EXPECT_NE(b.why.find("max 500"), std::string::npos) << b.why;
  // The first round alone (n - 1 probes) does not fit.
  EXPECT_EQ(kv::reconstruct(1000, kv::tree_oracle(kv::serial_tree(1000)), 1, 998).probes, 0);
}

TEST(AuditTree, WorstTopOrderChainsTheDeepestFirst) {
  // Root kids of heights 3, 0, 1, 2: summed serially in the worst order, the deepest kid's
  // leaves take its 3 roundings plus one per other kid.
  const SumTree t = parse("((((0 1) 2) 3) 4 (5 6) ((7 8) 9))");
  EXPECT_EQ(kv::canonical(t), "((((0 1) 2) 3) ((7 8) 9) (5 6) 4)");
  EXPECT_EQ(kv::fit_shape(t).n_eff, 4);
  const SumTree w = kv::worst_over_top_orders(t);
  EXPECT_EQ(kv::canonical(w), "((((((0 1) 2) 3) ((7 8) 9)) (5 6)) 4)");
  EXPECT_EQ(kv::fit_shape(w).n_eff, 3 + 3);
  EXPECT_EQ(w.leaves(), 10);
  EXPECT_EQ(kv::canonical(kv::worst_over_top_orders(kv::serial_tree(9))), kv::canonical(kv::serial_tree(9)));
  EXPECT_EQ(kv::lca_size(t, 0, 3), 4);
  EXPECT_EQ(kv::lca_size(t, 5, 6), 2);
  EXPECT_EQ(kv::lca_size(t, 4, 9), 10);
}

RC_GTEST_PROP(AuditTree, RandomTreesAreRecovered, ()) {
  // A random tree: merge 2..f random roots of a forest until one is left.
  const int64_t n = *rc::gen::inRange<int64_t>(1, 150);
  const int fan = *rc::gen::inRange(2, 5);
  const SumTree t = kvtest::random_tree(n, fan);
  const kv::TreeBuild b = kv::reconstruct(n, kv::tree_oracle(t), *rc::gen::arbitrary<uint64_t>(), kNoBudget);
  RC_ASSERT(b.status == Status::ok);
  RC_ASSERT(kv::canonical(b.tree) == kv::canonical(t));
  RC_ASSERT(b.probes <= probe_bound(n));
  const int64_t g = *rc::gen::inRange<int64_t>(0, n);
  RC_ASSERT(kv::pivot_depth(g, n, kv::tree_oracle(t)) == leaf_depth(t, g));
  const kv::MeasuredShape m = kv::fit_shape(b.tree);
  RC_ASSERT(m.shape.n_eff() == m.n_eff && m.shape.depth >= 0 && m.max_fan_in <= fan);
}
