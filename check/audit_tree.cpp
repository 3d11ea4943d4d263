// Summation trees: FPRev reconstruction from LCA-size probes, measured shapes, host trees.
#include "check/audit_tree.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <stdexcept>

namespace kv {

namespace {

int add_leaf(SumTree& t, int64_t leaf) {
  t.nodes.push_back({1, leaf, {}});
  return static_cast<int>(t.nodes.size()) - 1;
}

/// An internal node over `kids`; `size` given where kids are still to come (reconstruct).
int add_node(SumTree& t, std::vector<int> kids, int64_t size = -1) {
  if (size < 0) {
    size = 0;
    for (int k : kids) size += t.nodes[static_cast<size_t>(k)].size;
  }
  t.nodes.push_back({size, -1, std::move(kids)});
  return static_cast<int>(t.nodes.size()) - 1;
}

const SumTree::Node& at(const SumTree& t, int v) { return t.nodes[static_cast<size_t>(v)]; }

/// Parents, depths (proper ancestors: all internal) and the node of each leaf.
struct TreeIndex {
  std::vector<int> parent, depth, order;  // order: root first, parents before kids
  std::vector<int> leaf_node;
  explicit TreeIndex(const SumTree& t) : parent(t.nodes.size(), -1), depth(t.nodes.size(), 0) {
    if (t.root < 0) return;
    leaf_node.assign(static_cast<size_t>(t.leaves()), -1);
    order.push_back(t.root);
    for (size_t q = 0; q < order.size(); ++q) {
      const int v = order[q];
      if (at(t, v).leaf >= 0) leaf_node.at(static_cast<size_t>(at(t, v).leaf)) = v;
      for (int k : at(t, v).kids) parent[k] = v, depth[k] = depth[v] + 1, order.push_back(k);
    }
  }
  int64_t lca_size(const SumTree& t, int64_t i, int64_t j) const {
    int a = leaf_node.at(static_cast<size_t>(i)), b = leaf_node.at(static_cast<size_t>(j));
    while (depth[a] > depth[b]) a = parent[a];
    while (depth[b] > depth[a]) b = parent[b];
    while (a != b) a = parent[a], b = parent[b];
    return at(t, a).size;
  }
};

struct Task {
  std::vector<int64_t> g;  // leaves of kids of `parent` still to be found
  int64_t s;               // parent's size (n + 1 for the root's task: no parent)
  int parent;              // -1: the root
  int64_t outside = -1;    // a leaf under `parent` outside g (-1: the root's task)
};

struct Builder {
  int64_t n;
  TreeBuild out;
  std::vector<int> tops;  // what the root's task found (exactly one tree when consistent)

  void attach(int parent, int v) {
    if (parent < 0) tops.push_back(v);
    else out.tree.nodes[static_cast<size_t>(parent)].kids.push_back(v);
  }
  bool fail(LeafPair p, std::string why) {
    out.status = TreeBuild::Status::inconsistent, out.pair = p, out.why = std::move(why);
    return false;
  }
  /// Peels pivot g[0]'s child subtree off task t, ans[k - 1] = L(g[0], g[k]); queues the
  /// groups of its ancestors and the rest of t.
  bool peel(Task& t, const int64_t* ans, std::vector<Task>& next) {
    const int64_t h = t.g[0];
    std::map<int64_t, std::vector<int64_t>> groups;
    std::vector<int64_t> rest;
    for (size_t k = 1; k < t.g.size(); ++k) {
      const int64_t l = ans[k - 1], j = t.g[k];
      if (l < 2 || l > std::min(n, t.s))
        return fail({h, j}, "L = " + std::to_string(l) + " outside [2, " + std::to_string(std::min(n, t.s)) + "]");
      (l == t.s ? rest : groups[l]).push_back(j);
    }
    int cur = add_leaf(out.tree, h);
    int64_t size = 1;
    for (auto& [s, grp] : groups) {
      // The ancestor at s holds h, the lower groups and this one: nothing else.
      size += static_cast<int64_t>(grp.size());
      if (size != s)
        return fail({h, grp[0]}, "L = " + std::to_string(s) + " for a subtree the answers fill with " +
                                     std::to_string(size) + " leaves");
      const int v = add_node(out.tree, {cur}, s);
      next.push_back({std::move(grp), s, v, h});
      cur = v;
    }
    attach(t.parent, cur);
    if (!rest.empty()) next.push_back({std::move(rest), t.s, t.parent, h});
    return true;
  }
};

}  // namespace

TreeBuild reconstruct_rounds(int64_t n, const PeelRound& round, uint64_t seed, int64_t max_probes) {
  if (n < 1) throw std::invalid_argument("reconstruct: no leaves");
  Builder b{n, {}, {}};
  std::mt19937_64 rng(seed);  // the standard fixes its sequence: the same pivots everywhere
  std::vector<Task> tasks(1, {std::vector<int64_t>(static_cast<size_t>(n)), n + 1, -1});
  std::iota(tasks[0].g.begin(), tasks[0].g.end(), int64_t(0));
  while (!tasks.empty()) {
    std::vector<Task> ask;
    std::vector<PeelQuery> queries;
    size_t want = 0;
    for (auto& t : tasks) {
      if (t.g.size() == 1) {
        b.attach(t.parent, add_leaf(b.out.tree, t.g[0]));
        continue;
      }
      std::swap(t.g[0], t.g[rng() % t.g.size()]);
      queries.push_back({t.g[0], std::vector<int64_t>(t.g.begin() + 1, t.g.end()), t.s, t.outside});
      want += t.g.size() - 1;
      ask.push_back(std::move(t));
    }
    if (ask.empty()) break;
    const std::optional<std::vector<int64_t>> ans = round(queries, b.out, max_probes);
    if (!ans) return b.out;  // budget, or a readout no tree explains (status and why set)
    if (ans->size() != want) throw std::logic_error("reconstruct: the oracle answered a batch partly");
    tasks.clear();
    size_t used = 0;
    for (auto& t : ask) {
      if (!b.peel(t, ans->data() + used, tasks)) return b.out;
      used += t.g.size() - 1;
    }
  }
  if (b.tops.size() != 1) throw std::logic_error("reconstruct: the root's task found several trees");
  b.out.tree.root = b.tops[0];
  return b.out;
}

TreeBuild reconstruct(int64_t n, const LcaOracle& oracle, uint64_t seed, int64_t max_probes) {
  const PeelRound round = [&](const std::vector<PeelQuery>& qs, TreeBuild& out, int64_t max) {
    std::vector<LeafPair> pairs;
    for (const PeelQuery& q : qs)
      for (int64_t j : q.others) pairs.push_back({q.pivot, j});
    if (out.probes + static_cast<int64_t>(pairs.size()) > max) {
      out.status = TreeBuild::Status::budget;
      out.why = std::to_string(out.probes) + " probes asked, the next round needs " + std::to_string(pairs.size()) +
                " more (max " + std::to_string(max) + ")";
      return std::optional<std::vector<int64_t>>();
    }
    out.probes += static_cast<int64_t>(pairs.size()), ++out.rounds;
    return std::optional<std::vector<int64_t>>(oracle(pairs));
  };
  return reconstruct_rounds(n, round, seed, max_probes);
}

int64_t pivot_depth(int64_t g, int64_t n, const LcaOracle& oracle) {
  std::vector<LeafPair> pairs;
  for (int64_t j = 0; j < n; ++j)
    if (j != g) pairs.push_back({g, j});
  if (pairs.empty()) return 0;
  std::vector<int64_t> ans = oracle(pairs);
  for (int64_t l : ans)
    if (l < 2 || l > n) return -1;
  std::sort(ans.begin(), ans.end());
  return std::unique(ans.begin(), ans.end()) - ans.begin();  // one value per ancestor
}

MeasuredShape fit_shape(const SumTree& t) {
  MeasuredShape m;
  if (t.root < 0) return m;
  const TreeIndex ix(t);
  for (const auto& v : t.nodes) m.max_fan_in = std::max<int64_t>(m.max_fan_in, static_cast<int64_t>(v.kids.size()));
  // Leading serial steps above leaf node v: ancestors whose other kids are all leaves.
  auto serial_steps = [&](int v) {
    int64_t s = 0;
    for (int a = ix.parent[v]; a >= 0; v = a, a = ix.parent[a], ++s)
      for (int k : at(t, a).kids)
        if (k != v && !at(t, k).kids.empty()) return s;
    return s;
  };
  int best = -1;
  int64_t best_s = -1;
  for (int v : ix.leaf_node) {
    if (best >= 0 && ix.depth[v] < ix.depth[best]) continue;
    const int64_t s = serial_steps(v);
    if (best < 0 || ix.depth[v] > ix.depth[best] || s > best_s) best = v, best_s = s;
  }
  const int64_t depth = ix.depth[best];
  std::vector<int> path;  // root ... best
  for (int v = best; v >= 0; v = ix.parent[v]) path.push_back(v);
  std::reverse(path.begin(), path.end());
  int64_t p = 0;
  for (int64_t k = 0; k < depth - best_s; ++k) {
    const int64_t whole = at(t, path[k]).size, kid = at(t, path[k + 1]).size;
    if (kid < 2 * (whole - kid)) break;
    ++p;
  }
  m.n_eff = depth;
  m.deepest_leaf = at(t, best).leaf;
  m.shape.serial = best_s, m.shape.partials = p, m.shape.depth = depth - best_s - p;
  return m;
}

SumTree worst_over_top_orders(const SumTree& t) {
  if (t.root < 0 || at(t, t.root).kids.size() <= 2) return t;
  const TreeIndex ix(t);
  std::vector<int64_t> height(t.nodes.size(), 0);  // internal nodes on the longest way down
  for (auto it = ix.order.rbegin(); it != ix.order.rend(); ++it)
    for (int k : at(t, *it).kids) height[*it] = std::max(height[*it], height[k] + 1);
  SumTree w = t;
  std::vector<int> kids = at(t, t.root).kids;
  std::stable_sort(kids.begin(), kids.end(), [&](int a, int b) { return height[a] > height[b]; });
  int cur = kids[0];
  for (size_t i = 1; i + 1 < kids.size(); ++i) cur = add_node(w, {cur, kids[i]});
  w.nodes[static_cast<size_t>(w.root)].kids = {cur, kids.back()};  // the old root tops the chain
  return w;
}

int64_t lca_size(const SumTree& t, int64_t i, int64_t j) { return TreeIndex(t).lca_size(t, i, j); }

LcaOracle tree_oracle(const SumTree& t) {
  auto tree = std::make_shared<const SumTree>(t);
  auto ix = std::make_shared<const TreeIndex>(*tree);
  return [tree, ix](const std::vector<LeafPair>& pairs) {
    std::vector<int64_t> out;
    out.reserve(pairs.size());
    for (auto& [i, j] : pairs) out.push_back(ix->lca_size(*tree, i, j));
    return out;
  };
}

std::string canonical(const SumTree& t) {
  if (t.root < 0) return "()";
  const TreeIndex ix(t);
  std::vector<std::string> form(t.nodes.size());
  for (auto it = ix.order.rbegin(); it != ix.order.rend(); ++it) {
    const auto& v = at(t, *it);
    if (v.kids.empty()) {
      form[*it] = std::to_string(v.leaf);
      continue;
    }
    std::vector<std::string> kids;
    for (int k : v.kids) kids.push_back(std::move(form[k]));
    std::sort(kids.begin(), kids.end());
    std::string s = "(";
    for (auto& k : kids) s += (s.size() > 1 ? " " : "") + k;
    form[*it] = s + ")";
  }
  return form[static_cast<size_t>(t.root)];
}

namespace {

/// HostPolicy::Sum over `terms` in order (host_policy.hpp:70-96): term i to lane i % lanes,
/// a lane starts at its first term (pairwise) or at acc(0 + t) (shfl_down), both exact;
/// then total()'s tree. The node of the sum, -1 for no terms.
int lanes_sum(SumTree& t, const std::vector<int64_t>& terms, int64_t lanes, LaneTree kind) {
  std::vector<int> l;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t k = i % static_cast<size_t>(lanes);
    const int leaf = add_leaf(t, terms[i]);
    if (k == l.size()) l.push_back(leaf);
    else l[k] = add_node(t, {l[k], leaf});
  }
  if (kind == LaneTree::shfl_down) {
    size_t w = 1;
    while (w < l.size()) w *= 2;
    for (; w > 1; w /= 2)
      for (size_t i = 0; i < w / 2; ++i)
        if (i + w / 2 < l.size()) l[i] = add_node(t, {l[i], l[i + w / 2]});
  } else {
    for (size_t w = 1; w < l.size(); w *= 2)
      for (size_t i = 0; i + w < l.size(); i += 2 * w) l[i] = add_node(t, {l[i], l[i + w]});
  }
  return l.empty() ? -1 : l[0];
}

std::vector<int64_t> range(int64_t begin, int64_t end) {
  std::vector<int64_t> r(static_cast<size_t>(std::max<int64_t>(end - begin, 0)));
  std::iota(r.begin(), r.end(), begin);
  return r;
}

}  // namespace

SumTree serial_tree(int64_t n) {
  SumTree t;
  t.root = lanes_sum(t, range(0, n), 1, LaneTree::pairwise);
  return t;
}

SumTree lanes_tree(int64_t n, int64_t lanes, LaneTree kind) {
  SumTree t;
  t.root = lanes_sum(t, range(0, n), lanes, kind);
  return t;
}

SumTree chunked_tree(int64_t rows, int64_t chunk, int64_t lanes, LaneTree kind) {
  SumTree t;
  // Sum::merge (host_policy.hpp:98-102): acc(running + chunk), the first against 0 exact.
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int part = lanes_sum(t, range(r0, std::min(rows, r0 + chunk)), lanes, kind);
    t.root = t.root < 0 ? part : add_node(t, {t.root, part});
  }
  return t;
}

SumTree kary_tree(int64_t n, int64_t k) {
  if (k < 2) throw std::invalid_argument("kary_tree: k < 2");
  SumTree t;
  std::vector<int> level;
  for (int64_t i = 0; i < n; ++i) level.push_back(add_leaf(t, i));
  while (level.size() > 1) {
    std::vector<int> up;
    for (size_t i = 0; i < level.size(); i += static_cast<size_t>(k)) {
      std::vector<int> grp(level.begin() + static_cast<int64_t>(i),
                           level.begin() + static_cast<int64_t>(std::min(level.size(), i + static_cast<size_t>(k))));
      up.push_back(grp.size() == 1 ? grp[0] : add_node(t, std::move(grp)));
    }
    level = std::move(up);
  }
  t.root = level.empty() ? -1 : level[0];
  return t;
}

}  // namespace kv
