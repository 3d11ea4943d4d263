// Trees from rooted triplets (check/audit_triplets.hpp).
#include "check/audit_triplets.hpp"

#include <algorithm>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>

namespace kv {

namespace {

/// One task's sort: buckets in order of L(pivot, .), each a class once sorted.
struct Bucket {
  std::vector<int64_t> items;
  bool sorted = false;
};

struct Sorter {
  const TripletOracle& oracle;
  std::mt19937_64& rng;
  TreeBuild& out;
  int64_t max_probes;

  bool ask(const std::vector<Triple>& q, std::vector<int>& ans) {
    if (out.probes + static_cast<int64_t>(q.size()) > max_probes) {
      out.status = TreeBuild::Status::budget;
      out.why = std::to_string(out.probes) + " triples asked, the next round needs " + std::to_string(q.size()) +
                " more (max " + std::to_string(max_probes) + ")";
      return false;
    }
    ans = oracle(q);
    if (ans.size() != q.size()) throw std::logic_error("reconstruct: the triplet oracle answered a batch partly");
    out.probes += static_cast<int64_t>(q.size()), ++out.rounds;
    for (size_t i = 0; i < q.size(); ++i)
      if (ans[i] < 0) {
        out.status = TreeBuild::Status::inconsistent, out.pair = {q[i][0], q[i][1]};
        out.why = "the readout of triple (" + std::to_string(q[i][0]) + "; " + std::to_string(q[i][1]) + ", " +
                  std::to_string(q[i][2]) + ") is neither M nor M + 1 ulp";
        return false;
      }
    return true;
  }

  /// Splits every unsorted bucket of two or more around a random splitter, one round for all.
  bool split_round(const std::vector<PeelQuery>& qs, std::vector<std::vector<Bucket>>& bk, bool& more) {
    struct Ask { size_t q, b; int64_t r; };
    std::vector<Ask> asks;
    std::vector<Triple> triples;
    for (size_t q = 0; q < bk.size(); ++q)
      for (size_t b = 0; b < bk[q].size(); ++b) {
        Bucket& x = bk[q][b];
        if (x.sorted) continue;
        if (x.items.size() == 1) { x.sorted = true; continue; }
        std::swap(x.items[0], x.items[rng() % x.items.size()]);
        asks.push_back({q, b, x.items[0]});
        for (size_t k = 1; k < x.items.size(); ++k) {
          triples.push_back({x.items[k], qs[q].pivot, x.items[0]});  // [L(h, r) <= L(h, j)]
          triples.push_back({x.items[0], qs[q].pivot, x.items[k]});  // [L(h, j) <= L(h, r)]
        }
      }
    more = !asks.empty();
    if (!more) return true;
    std::vector<int> ans;
    if (!ask(triples, ans)) return false;
    size_t used = 0;
    std::vector<std::vector<Bucket>> next(bk.size());
    for (size_t q = 0; q < bk.size(); ++q)
      for (size_t b = 0; b < bk[q].size(); ++b) {
        Bucket& x = bk[q][b];
        if (x.sorted) { next[q].push_back(std::move(x)); continue; }
        Bucket lo, eq{{x.items[0]}, true}, hi;
        for (size_t k = 1; k < x.items.size(); ++k, used += 2) {
          const int le = ans[used], ge = ans[used + 1];
          (le == ge ? eq : le ? hi : lo).items.push_back(x.items[k]);
        }
        for (Bucket* y : {&lo, &eq, &hi})
          if (!y->items.empty()) next[q].push_back(std::move(*y));
      }
    bk = std::move(next);
    return true;
  }

  std::optional<std::vector<int64_t>> round(const std::vector<PeelQuery>& qs) {
    std::vector<std::vector<Bucket>> bk(qs.size());
    for (size_t q = 0; q < qs.size(); ++q) bk[q].push_back({qs[q].others, false});
    for (bool more = true; more;)
      if (!split_round(qs, bk, more)) return std::nullopt;
    // The last class: h's own ancestor, or the other kids of the parent (L = parent_size).
    std::vector<Triple> top;
    std::vector<size_t> who;
    for (size_t q = 0; q < qs.size(); ++q)
      if (qs[q].outside >= 0) top.push_back({qs[q].pivot, qs[q].outside, bk[q].back().items[0]}), who.push_back(q);
    std::vector<int> ans;
    if (!top.empty() && !ask(top, ans)) return std::nullopt;
    std::vector<bool> at_parent(qs.size(), false);
    for (size_t i = 0; i < who.size(); ++i) at_parent[who[i]] = ans[i] == 1;
    std::vector<int64_t> L;
    for (size_t q = 0; q < qs.size(); ++q) {
      std::vector<std::pair<int64_t, int64_t>> of;  // (leaf, L)
      int64_t cum = 1;
      for (size_t b = 0; b < bk[q].size(); ++b) {
        cum += static_cast<int64_t>(bk[q][b].items.size());
        const int64_t l = b + 1 == bk[q].size() && at_parent[q] ? qs[q].parent_size : cum;
        for (int64_t j : bk[q][b].items) of.push_back({j, l});
      }
      std::sort(of.begin(), of.end());
      for (int64_t j : qs[q].others) L.push_back(std::lower_bound(of.begin(), of.end(), std::make_pair(j, int64_t(0)))->second);
    }
    return L;
  }
};

}  // namespace

TripletOracle tree_triplet_oracle(const SumTree& tree) {
  // P(a; b, c) = [L(b, c) <= min(L(a, b), L(a, c))], the L's from the tree's LCA oracle.
  const LcaOracle lca = tree_oracle(tree);
  return [lca](const std::vector<Triple>& q) {
    std::vector<LeafPair> pairs;
    pairs.reserve(3 * q.size());
    for (const Triple& t : q) pairs.push_back({t[1], t[2]}), pairs.push_back({t[0], t[1]}), pairs.push_back({t[0], t[2]});
    const std::vector<int64_t> L = lca(pairs);
    std::vector<int> a(q.size());
    for (size_t i = 0; i < q.size(); ++i) a[i] = L[3 * i] <= std::min(L[3 * i + 1], L[3 * i + 2]) ? 1 : 0;
    return a;
  };
}

int triplet_of(const SumTree& tree, const Triple& t) { return tree_triplet_oracle(tree)({t})[0]; }

TreeBuild reconstruct_from_triplets(int64_t n, const TripletOracle& oracle, uint64_t seed, int64_t max_probes) {
  std::mt19937_64 rng(seed ^ 0x7269706c6574ULL);
  const PeelRound round = [&](const std::vector<PeelQuery>& qs, TreeBuild& out, int64_t max) {
    Sorter s{oracle, rng, out, max};
    return s.round(qs);
  };
  return reconstruct_rounds(n, round, seed, max_probes);
}

std::vector<Triple> orientations(const std::vector<Triple>& triples) {
  std::vector<Triple> out;
  for (const Triple& t : triples) {
    out.push_back(t);
    out.push_back({t[1], t[0], t[2]});
    out.push_back({t[2], t[0], t[1]});
  }
  return out;
}

}  // namespace kv
