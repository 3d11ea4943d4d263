// The audit driver (run/audit.hpp): per axis, a units-only control, the shared tree rebuilt
// from batched lane probes, spot checks of that tree in every lane, the measured shape
// against the declared one. Design: FPRev masking (ops/audit_probe.hpp), §3 reconstruction;
// sums of positive terms through triplets (run/audit_positive.cpp).
#include "run/audit.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/sites.hpp"
#include "ops/audit_probe.hpp"
#include "run/audit_calls.hpp"
#include "run/runner.hpp"

namespace kv {

/// The verdict of a measured (or lower-bound) n_eff against the declared one.
void audit_detail::judge(AxisAudit& a, int64_t measured, bool exact) {
  const int64_t declared = a.declared.n_eff();
  if (declared < measured) {
    a.status = "understated";
    a.note = "verdicts of " + a.impl + " on axis " + a.axis + " are unsound: declared n_eff " + std::to_string(declared) +
             " < measured " + std::to_string(measured) + (exact ? "" : " (a lower bound)");
  } else {
    a.status = exact ? "ok" : "lower_bound";
  }
}

namespace {

using namespace audit_detail;

/// Control (a): units alone, every position in some lane, must read back their count.
std::string control_units(Ctx& ctx) {
  std::vector<LaneProbe> probes;
  const int64_t b = ctx.zero_slot ? std::min(ctx.block, ctx.n - 1) : ctx.block;
  for (int64_t k = 0; k < ctx.n; k += b) {
    LaneProbe p;
    for (int64_t i = k; i < std::min(ctx.n, k + b); ++i) p.units.push_back(i);
    if (ctx.zero_slot) p.z = zero_slot_of(p, ctx.n);
    probes.push_back(std::move(p));
  }
  const std::vector<int64_t> got = run_packed(ctx, probes);
  for (size_t i = 0; i < probes.size(); ++i)
    if (got[i] != static_cast<int64_t>(probes[i].units.size()))
      return "units on positions " + std::to_string(probes[i].units.front()) + ".." +
             std::to_string(probes[i].units.back()) + " read " + (got[i] < 0 ? "off the grid" : std::to_string(got[i])) +
             ", expected " + std::to_string(probes[i].units.size()) +
             " (terms dropped or doubled, or an accumulator narrower than the declared one)";
  return {};
}

/// Parents and leaf nodes of a tree (spot checks).
struct Up {
  std::vector<int> parent, leaf_node;
  explicit Up(const SumTree& t) : parent(t.nodes.size(), -1), leaf_node(static_cast<size_t>(t.leaves()), -1) {
    for (size_t v = 0; v < t.nodes.size(); ++v) {
      for (int k : t.nodes[v].kids) parent[static_cast<size_t>(k)] = static_cast<int>(v);
      if (t.nodes[v].leaf >= 0) leaf_node[static_cast<size_t>(t.nodes[v].leaf)] = static_cast<int>(v);
    }
  }
  bool under(int v, int a) const {
    for (; v >= 0; v = parent[static_cast<size_t>(v)])
      if (v == a) return true;
    return false;
  }
  int lca(int64_t g, int64_t j) const {
    for (int a = leaf_node[static_cast<size_t>(g)]; a >= 0; a = parent[static_cast<size_t>(a)])
      if (under(leaf_node[static_cast<size_t>(j)], a)) return a;
    return -1;
  }
};

/// Calls in which every lane (or lane ctx.pin alone) gets a random pair and one random block
/// of it: each must read |K \ sub(LCA)| of the tree, else the lanes do not share one
/// labelling. Each call runs twice: readouts that differ are a nondeterministic order.
std::string spot_check(Ctx& ctx, const SumTree& tree) {
  const Up up(tree);
  std::uniform_int_distribution<int64_t> leaf(0, ctx.n - 1);
  const int64_t width = ctx.pin >= 0 ? ctx.pin + 1 : ctx.run.lanes();
  for (int round = 0; round < (ctx.pin >= 0 ? 8 : 2); ++round) {
    std::vector<LaneProbe> call(static_cast<size_t>(width));
    std::vector<int64_t> want(call.size(), -1);
    for (int64_t l = ctx.pin >= 0 ? ctx.pin : 0; l < width; ++l) {
      int64_t g = leaf(ctx.rng), j = leaf(ctx.rng);
      while (j == g) j = leaf(ctx.rng);
      std::vector<LaneProbe> bl = blocks_for(ctx, g, j);
      LaneProbe p = bl[std::uniform_int_distribution<size_t>(0, bl.size() - 1)(ctx.rng)];
      const int a = up.lca(g, j);
      int64_t w = 0;
      for (int64_t k : p.units) w += !up.under(up.leaf_node[static_cast<size_t>(k)], a);
      call[static_cast<size_t>(l)] = std::move(p), want[static_cast<size_t>(l)] = w;
    }
    const std::vector<int64_t> got = ctx.run.call(call), again = ctx.run.call(call);
    for (size_t l = 0; l < got.size(); ++l)
      if (got[l] != again[l])
        return "nondeterministic: lane " + std::to_string(l) + " read " + std::to_string(got[l]) + ", then " +
               std::to_string(again[l]) + " from the same call (worst-order trees are not built yet)";
    for (size_t l = 0; l < got.size(); ++l)
      if (got[l] != want[l])
        return "lane " + std::to_string(l) + " does not share the tree (pair " + std::to_string(call[l].g) + ", " +
               std::to_string(call[l].j) + " read " + std::to_string(got[l]) + ", the tree gives " +
               std::to_string(want[l]) + ")";
  }
  return {};
}

/// Whether the same calls read the same (three calls, each twice, a random pair and block
/// per lane): else the order of the sum changes from call to call (atomics).
bool repeats(Ctx& ctx) {
  std::uniform_int_distribution<int64_t> leaf(0, ctx.n - 1);
  for (int round = 0; round < 3; ++round) {
    std::vector<LaneProbe> call(static_cast<size_t>(ctx.run.lanes()));
    for (LaneProbe& p : call) {
      const int64_t g = leaf(ctx.rng);
      int64_t j = leaf(ctx.rng);
      while (j == g) j = leaf(ctx.rng);
      const std::vector<LaneProbe> bl = blocks_for(ctx, g, j);
      p = bl[std::uniform_int_distribution<size_t>(0, bl.size() - 1)(ctx.rng)];
    }
    if (ctx.run.call(call) != ctx.run.call(call)) return false;
  }
  return true;
}

/// The accumulator probe (design §1): leaves a, b, kids of one node, and a leaf c outside
/// it: a = 1, b = 2^(1 - p_acc), c = -1, the rest 0, in every lane. The declared accumulator
/// (or a wider one) keeps a + b and reads b; a narrower one rounds a + b to 1 and reads 0.
/// Empty when it reads b (or no such node exists), else the finding.
std::string acc_probe(Ctx& ctx, const SumTree& tree, DType acc) {
  const Up up(tree);
  for (size_t i = 0; i < tree.nodes.size(); ++i) {
    const SumTree::Node& v = tree.nodes[i];
    const int node = static_cast<int>(i);
    std::vector<int64_t> kids;
    for (int k : v.kids)
      if (tree.nodes[static_cast<size_t>(k)].leaf >= 0) kids.push_back(tree.nodes[static_cast<size_t>(k)].leaf);
    if (kids.size() < 2 || v.size >= ctx.n) continue;
    int64_t c = -1, z = -1;
    for (int64_t k = 0; k < ctx.n && (c < 0 || z < 0); ++k) {
      if (k == kids[0] || k == kids[1]) continue;
      if (c < 0 && !up.under(up.leaf_node[static_cast<size_t>(k)], node)) c = k;
      else if (z < 0) z = k;
    }
    if (c < 0 || (ctx.zero_slot && z < 0)) continue;
    // Scaled by a = 2^k so that the readout resolves b (ctx.scale.floor); none fits: no probe.
    const int k = std::max(0, static_cast<int>(std::ceil(std::log2(ctx.scale.floor))) - 1 + significand_bits(acc));
    const double a = std::ldexp(1.0, k), b = std::ldexp(a, 1 - significand_bits(acc));
    if (a > ctx.scale.max_in) return {};
    std::vector<LaneTerms> t(static_cast<size_t>(ctx.pin >= 0 ? ctx.pin + 1 : ctx.run.lanes()),
                             LaneTerms{{{kids[0], a}, {kids[1], b}, {c, -a}}, z});
    for (int64_t l = 0; l < ctx.pin; ++l) t[static_cast<size_t>(l)] = LaneTerms{};  // pinned: that lane's tree alone
    for (double got : ctx.run.call_terms(t)) {
      if (std::fabs(got - b) <= b / 4 || std::isnan(got)) continue;  // NaN: an empty lane, not read
      return "accumulator narrower than the declared " + std::string(dtype_name(acc)) + ": (a + a 2^" +
             std::to_string(1 - significand_bits(acc)) + ") - a read " + std::to_string(got / a) + " a";
    }
    return {};
  }
  return {};
}

/// A tree rebuilt and spot-checked (in lane ctx.pin alone where pinned), with its
/// accumulator probe; else why not. budget: the reconstruction ran out of probes.
struct Built {
  std::optional<SumTree> tree;
  std::string why, acc;
  bool budget = false;
};
Built build_tree(Ctx& ctx, const LcaOracle& oracle, DType acc, uint64_t seed, int64_t max_probes) {
  Built r;
  const TreeBuild tb = reconstruct(ctx.n, oracle, seed, max_probes);
  if (tb.status != TreeBuild::Status::ok) {
    r.budget = tb.status == TreeBuild::Status::budget;
    r.why = tb.why + (ctx.rejected.empty() ? "" : "; " + ctx.rejected);
    return r;
  }
  r.why = spot_check(ctx, tb.tree);
  if (!r.why.empty()) return r;
  r.acc = acc_probe(ctx, tb.tree, acc);
  r.tree = tb.tree;
  return r;
}

/// Lanes that sum in orders of their own (design §3; host rms_norm order=shuffle): the first
/// kLaneTrees lanes each rebuilt alone, one probe per call in that lane. The deepest of their
/// trees is measured: exact when they are all the lanes, else a lower bound.
void lane_trees(AxisAudit& a, Ctx& ctx, const LcaOracle& oracle, DType acc, const AuditOptions& o, int64_t max_calls) {
  constexpr int64_t kLaneTrees = 4;
  const int64_t lanes = std::min(ctx.run.lanes(), kLaneTrees);
  const int64_t blocks = static_cast<int64_t>(blocks_for(ctx, 0, 1).size());
  std::string narrow;
  for (ctx.pin = 0; ctx.pin < lanes; ++ctx.pin) {
    const Built b = build_tree(ctx, oracle, acc, o.seed + static_cast<uint64_t>(ctx.pin), std::max<int64_t>(1, max_calls / lanes / blocks));
    if (!b.tree) {
      a.status = "inconsistent";
      a.note = "lanes sum in different orders, and lane " + std::to_string(ctx.pin) + "'s own tree failed: " + b.why;
      return;
    }
    const MeasuredShape m = fit_shape(*b.tree);
    if (!a.measured || m.n_eff > a.measured->n_eff) a.measured = m;
    if (narrow.empty()) narrow = b.acc;
  }
  a.exact = lanes == ctx.run.lanes();
  judge(a, a.measured->n_eff, a.exact);
  if (!narrow.empty()) a.status = "understated", a.note += (a.note.empty() ? "" : "; ") + narrow;
  a.note += (a.note.empty() ? "" : "; ") + std::string("lanes sum in different orders: the trees of lanes 0..") +
            std::to_string(lanes - 1) + " of " + std::to_string(ctx.run.lanes()) + " rebuilt one by one";
}

/// Pivot paths (design §3 budget): the depths of the first and last leaf, a lower bound.
void pivot_paths(AxisAudit& a, Ctx& ctx, const LcaOracle& oracle, const std::string& why, const AuditOptions& o) {
  int64_t lb = -1;
  for (int64_t g : {int64_t(0), ctx.n - 1}) lb = std::max(lb, pivot_depth(g, ctx.n, oracle));
  if (lb < 0) {
    a.status = "inconsistent", a.note = ctx.rejected.empty() ? "pivot path out of range" : ctx.rejected;
    return;
  }
  MeasuredShape m;
  m.n_eff = lb;
  a.measured = m;
  judge(a, lb, false);
  if (a.status == "lower_bound") a.note = "budget of " + std::to_string(o.max_calls) + " calls spent: " + why;
}

/// The tree of one axis through one probe, judged.
void measure_axis(AxisAudit& a, const Case& c, const Impl& impl, const DeviceProfile& p, const AxisProbe& probe,
                  DType acc, const AuditOptions& o) {
  const int64_t n = probe.length(c);
  const ProbeScale s = probe_scale(dtype_of(c, probe.pattern), acc, dtype_of(c, probe.out), probe.indirect, n);
  const std::string unfit = probe_unfit(probe, c);
  if (s.B == 0 || n < (probe.zero_slot ? 4 : 2) || probe.lanes(c) < 1 || !unfit.empty()) {
    a.status = "unmeasurable";
    a.note = !unfit.empty() ? unfit
             : s.B == 0     ? "no exact probe fits these dtypes (the readout of one unit would be subnormal in the output)"
                            : "axis too short to probe";
    return;
  }
  ProbeRunner run(impl, c, p, probe, s);
  // At least one unit per block: with n = 2 (or 3 with a zero slot) the pair leaves no unit,
  // and a block of 0 would never close (blocks_for).
  const int64_t block = std::max<int64_t>(1, std::min(s.B, n - (probe.zero_slot ? 3 : 2)));
  Ctx ctx{run, s, n, block, probe.zero_slot, std::mt19937_64(o.seed), {}};
  const std::string wrong = control_units(ctx);
  if (!wrong.empty()) {
    a.status = "wrong_sum", a.note = wrong, a.calls = run.calls;
    return;
  }
  int64_t probes = 0;
  LcaOracle oracle = [&](const std::vector<LeafPair>& pairs) {
    probes += static_cast<int64_t>(pairs.size());
    return lca_sizes(ctx, pairs);
  };
  const int64_t blocks = static_cast<int64_t>(blocks_for(ctx, 0, 1).size());
  const Built b = build_tree(ctx, oracle, acc, o.seed, std::max<int64_t>(1, o.max_calls * probe.lanes(c) / blocks));
  if (b.tree) {
    a.measured = fit_shape(*b.tree), a.exact = true;
    judge(a, a.measured->n_eff, true);
    if (!b.acc.empty()) a.status = "understated", a.note += (a.note.empty() ? "" : "; ") + b.acc;
  } else if (b.budget) {
    pivot_paths(a, ctx, oracle, b.why, o);
  } else if (b.why.rfind("nondeterministic", 0) == 0) {
    a.status = "inconsistent", a.note = b.why;
  } else if (!repeats(ctx)) {
    a.status = "nondeterministic";
    a.note = "the same probes read differently from call to call (an order that changes per run, e.g. atomics): no "
             "single tree to measure; the declared shape stands (" + b.why + ")";
  } else {
    ctx.rejected.clear();
    lane_trees(a, ctx, oracle, acc, o, std::max<int64_t>(1, o.max_calls - run.calls));
  }
  a.calls = run.calls, a.probes = probes;
}

}  // namespace

std::string AxisAudit::verdict() const {
  if (unsound()) return "unsound";
  return status == "ok" ? "sound" : "unknown";
}

nlohmann::json AxisAudit::to_json() const {
  nlohmann::json j = {{"op", op},       {"impl", impl},   {"config", config}, {"axis", axis},
                      {"output", out},  {"status", status}, {"verdict", verdict()}, {"how", how},
                      {"note", note},   {"calls", calls}, {"probes", probes},
                      {"declared", {{"serial", declared.serial}, {"depth", declared.depth},
                                    {"partials", declared.partials}, {"n_eff", declared.n_eff()}}}};
  if (measured)
    j["measured"] = {{"serial", measured->shape.serial}, {"depth", measured->shape.depth},
                     {"partials", measured->shape.partials}, {"n_eff", measured->n_eff},
                     {"max_fan_in", measured->max_fan_in}, {"exact", exact}};
  return j;
}

std::string config_str(const Case& c) {
  std::string s;
  for (auto& [k, v] : c.config) s += (s.empty() ? "" : ",") + k + "=" + v;
  return s;
}

std::vector<AxisAudit> audit_case(const Case& c, const Impl& impl, const DeviceProfile& p, const AuditOptions& o) {
  AxisAudit base;
  base.op = c.op, base.impl = impl.name(), base.config = config_str(c);
  if (auto why = impl.refusal(c, p)) {
    base.status = "declined", base.note = *why;
    return {base};
  }
  const Contract k = impl.contract(c, p);
  check_contract(registry().op(c.op), c, k, impl.name());  // an invalid contract is no audit's subject (exit 2)
  if (k.reductions.empty()) {
    base.status = "nothing to audit", base.note = "the op has no reduced axis";
    return {base};
  }
  std::vector<AxisAudit> out;
  for (auto& [axis, shape] : k.reductions) {
    AxisAudit a = base;
    a.axis = axis, a.declared = shape;
    const std::vector<AxisProbe> probes = axis_probes(c.op, axis);
    if (probes.empty()) {
      a.status = "unmeasurable", a.note = unmeasurable_why(c.op, axis);
      out.push_back(a);
      continue;
    }
    for (auto& probe : probes) {
      AxisAudit b = a;
      b.out = probe.label.empty() ? probe.out : probe.label, b.how = probe.how;
      if (probe.positive) measure_positive(b, c, impl, p, probe, k.acc_of(axis), o);
      else measure_axis(b, c, impl, p, probe, k.acc_of(axis), o);
      out.push_back(std::move(b));
    }
  }
  return out;
}

}  // namespace kv
