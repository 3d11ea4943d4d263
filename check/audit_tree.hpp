// Summation trees measured from outside (issue 20, `kverify audit`): FPRev's recursive
// reconstruction of the tree an impl sums an axis in, from masking probes that report the
// leaf count of the subtree where two terms meet; the tree read back as a reduction shape;
// and the trees the host impls sum in, as test oracles. Pure: no tensors, no impls.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/contract.hpp"

namespace kv {

/// A summation tree over leaves 0..n-1 (the terms' positions on the axis). An internal
/// node is one rounding: a binary add, or a fused k-ary block (k kids). A lane that starts
/// at its first term (or at acc(0 + t), exact) adds no node.
struct SumTree {
  struct Node {
    int64_t size = 1;        // leaves below
    int64_t leaf = -1;       // the leaf's index, -1 for an internal node
    std::vector<int> kids;   // internal: two or more
  };
  std::vector<Node> nodes;
  int root = -1;
  int64_t leaves() const { return root < 0 ? 0 : nodes[static_cast<size_t>(root)].size; }
};

using LeafPair = std::pair<int64_t, int64_t>;
/// The probe: per pair (i, j) of distinct leaves, the leaf count of the subtree rooted at
/// their lowest common ancestor, L(i, j) (a masking probe +M at i, -M at j, units elsewhere
/// reads n - L). Answers come back in the pairs' order; a batch is one round of calls.
using LcaOracle = std::function<std::vector<int64_t>(const std::vector<LeafPair>&)>;

struct TreeBuild {
  enum class Status { ok, inconsistent, budget };
  Status status = Status::ok;
  SumTree tree;              // status ok
  LeafPair pair{-1, -1};     // inconsistent: (pivot, leaf) of the answer that no tree
                             // explains; for a size that does not add up, a leaf of that
                             // group (the wrong answer may be another of the group's)
  std::string why;           // inconsistent or budget, in words
  int64_t probes = 0;        // pairs asked
  int64_t rounds = 0;        // oracle calls (batches)
};

/// FPRev's reconstruction with random pivots (seeded). A task (G, S) holds the leaves of the
/// children of one node of size S that are still to be found: a pivot h in G and L(h, j) for
/// j in G give h's child subtree C = {h} and {j : L < S}, and h's ancestors inside it, one
/// per distinct value s_k, each holding 1 + (the leaves at values <= s_k) leaves; the
/// leaves at s_k are the other children of that ancestor (a task (group, s_k)), and G \ C
/// the other children of the node (S). The pivots of all pending tasks form one batch.
/// Answers outside [2, min(n, S)] or a size that does not add up stop it: inconsistent.
/// More than max_probes pairs stop it before the batch that would exceed them: budget.
TreeBuild reconstruct(int64_t n, const LcaOracle& oracle, uint64_t seed, int64_t max_probes);

/// One task of a reconstruction round: the pivot, the task's other leaves, the size of the node
/// whose kids the task holds (n + 1 for the root's task), and a leaf below that node outside
/// the task (-1 for the root's task; a triplet oracle reads L = parent_size through it).
struct PeelQuery {
  int64_t pivot;
  std::vector<int64_t> others;
  int64_t parent_size;
  int64_t outside;
};
/// One round: per query L(pivot, j) for j in others, flattened in order; counts out.probes and
/// out.rounds; sets out.status (budget, inconsistent) and out.why and returns nothing where
/// it stops.
using PeelRound =
    std::function<std::optional<std::vector<int64_t>>(const std::vector<PeelQuery>&, TreeBuild& out, int64_t max_probes)>;
/// The reconstruction above over any round (reconstruct is this with the LCA oracle's round).
TreeBuild reconstruct_rounds(int64_t n, const PeelRound& round, uint64_t seed, int64_t max_probes);

/// The depth of leaf g (internal nodes on its root path) as the number of distinct values of
/// L(g, j) over j != g: one batch of n - 1 probes, the audit's lower bound mode. -1 when an
/// answer lies outside [2, n].
int64_t pivot_depth(int64_t g, int64_t n, const LcaOracle& oracle);

struct MeasuredShape {
  ReductionShape shape;       // the split of the deepest leaf's path (printed, never compared)
  int64_t n_eff = 0;          // max over leaves of the internal nodes on the root path
  int64_t max_fan_in = 0;     // widest node (2 for binary trees, k for fused blocks)
  int64_t deepest_leaf = -1;  // the leaf the split describes
};

/// The measured shape. n_eff is the deepest leaf's depth: each internal node rounds once. The
/// split of that leaf's path (ties: larger s, then lower index): s = the leading steps, leaf
/// up, whose other kids are all leaves (a thread's serial run); p = the trailing steps, root
/// down, above those, where the path child weighs at least twice the other kids together (a
/// serial chain of partials: the running sum against one new partial); d = the rest.
MeasuredShape fit_shape(const SumTree& tree);

/// The root's kids summed as a serial chain in the order that rounds most often, the deepest
/// two first: what an unordered top level (atomics, any order) may do. n_eff becomes the
/// deepest kid's + (kids - 1). Trees whose root has two kids or fewer come back unchanged.
SumTree worst_over_top_orders(const SumTree& tree);

/// L(i, j) read off a known tree (i != j); tree_oracle answers batches the same way,
/// indexing the tree once.
int64_t lca_size(const SumTree& tree, int64_t i, int64_t j);
LcaOracle tree_oracle(const SumTree& tree);

/// A form that two trees share exactly when they are the same up to the order of kids.
std::string canonical(const SumTree& tree);

// Trees of known sums (tests; the audit's expected host shapes).
/// How a lane block combines its lanes (ops/host/host_policy.hpp, HostPolicy::Tree).
enum class LaneTree { pairwise, shfl_down };
/// ((0 + 1) + 2) + ... : one thread in order.
SumTree serial_tree(int64_t n);
/// HostPolicy::Sum with `lanes` lanes: lane l sums l, l + lanes, ... in order from its first
/// term, then the lanes combine by `kind`.
SumTree lanes_tree(int64_t n, int64_t lanes, LaneTree kind);
/// column_sums (ops/op_base.hpp) over `rows` rows of one column: chunks of `chunk` rows, each
/// a lanes_tree, merged in chunk order into a running sum that starts at 0 (exact).
SumTree chunked_tree(int64_t rows, int64_t chunk, int64_t lanes, LaneTree kind = LaneTree::pairwise);
/// A complete k-ary tree of fused blocks: leaves k at a time, then those nodes k at a time
/// (a group of one passes up unchanged), up to one root.
SumTree kary_tree(int64_t n, int64_t k);

}  // namespace kv
