// Sums of positive terms in the audit (run/audit_calls.hpp measure_positive; design of the
// probe: check/audit_triplets.hpp). No term can cancel another, so FPRev's masking does not
// apply: each lane holds one triple, a = M at one position, b = c = v at two others, the rest
// zero terms, and the output reads M or M + U. The readout goes through the op's arithmetic
// (rsqrt of S / N + eps, 1 / S), which keeps one ulp of the sum only at some scales, so
// calibration rows of known sum come first: a alone (M) and a + w (M + U, in any order), in
// every lane, must each read one value, and the two must differ. A triple's readout is then
// classified by equality with them; anything else stops the reconstruction (inconsistent).
#include <cmath>
#include <optional>
#include <random>
#include <sstream>
#include <string>

#include "check/audit_triplets.hpp"
#include "run/audit_calls.hpp"
#include "run/runner.hpp"

namespace kv::audit_detail {

namespace {

struct Readouts {
  double absorbed = 0, counted = 0;  // the readouts of M and M + U
};

/// Lane l's terms: a at pa, then (pos, value) pairs.
LaneTerms lane(int64_t pa, double a, std::vector<std::pair<int64_t, double>> more) {
  LaneTerms t;
  t.terms.push_back({pa, a});
  for (auto& x : more) t.terms.push_back(x);
  t.zero_slot = pa;
  return t;
}

/// The calibration of one scale: every lane reads a alone, then a + w (positions random).
/// The readouts, or why the scale cannot be read.
std::optional<Readouts> calibrate(ProbeRunner& run, const PositiveLeaves& s, int64_t n, std::mt19937_64& rng,
                                  std::string& why) {
  std::uniform_int_distribution<int64_t> pos(0, n - 1);
  std::vector<LaneTerms> alone, plus;
  for (int64_t l = 0; l < run.lanes(); ++l) {
    const int64_t pa = pos(rng);
    int64_t pw = pos(rng);
    while (pw == pa) pw = pos(rng);
    alone.push_back(lane(pa, s.a, {}));
    plus.push_back(lane(pa, s.a, {{pw, s.w}}));
  }
  const std::vector<double> r0 = run.call_terms(alone), r1 = run.call_terms(plus);
  for (size_t l = 0; l < r0.size(); ++l)
    if (!std::isfinite(r0[l]) || !std::isfinite(r1[l]) || r0[l] != r0[0] || r1[l] != r1[0]) {
      why = "calibration rows of one known sum read differently across lanes (or not finite)";
      return std::nullopt;
    }
  if (r0[0] == r1[0]) {
    why = "the output cannot tell a sum of M from M + 1 ulp of the declared accumulator at any scale tried (or the "
          "accumulator is narrower than declared)";
    return std::nullopt;
  }
  return Readouts{r0[0], r1[0]};
}

/// The triplet oracle over packed lanes: 1 (M + U), 0 (M), -1 (anything else).
TripletOracle oracle_of(ProbeRunner& run, const PositiveLeaves& s, const Readouts& r, int64_t& probes) {
  return [&run, s, r, &probes](const std::vector<Triple>& q) {
    std::vector<int> out;
    const size_t lanes = static_cast<size_t>(run.lanes());
    for (size_t b = 0; b < q.size(); b += lanes) {
      std::vector<LaneTerms> call;
      for (size_t i = b; i < std::min(q.size(), b + lanes); ++i)
        call.push_back(lane(q[i][0], s.a, {{q[i][1], s.v}, {q[i][2], s.v}}));
      for (double v : run.call_terms(call)) out.push_back(v == r.counted ? 1 : v == r.absorbed ? 0 : -1);
    }
    probes += static_cast<int64_t>(q.size());
    return out;
  };
}

/// Random triples in every lane, each asked in its three orientations, twice: the answers
/// must repeat and be the tree's. Empty when they are, else the finding.
std::string spot_check(const TripletOracle& oracle, const SumTree& tree, int64_t n, int64_t lanes, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> leaf(0, n - 1);
  std::vector<Triple> base;
  for (int64_t k = 0; k < std::max<int64_t>(4 * lanes, 24); ++k) {
    Triple t{leaf(rng), leaf(rng), leaf(rng)};
    while (t[1] == t[0]) t[1] = leaf(rng);
    while (t[2] == t[0] || t[2] == t[1]) t[2] = leaf(rng);
    base.push_back(t);
  }
  const std::vector<Triple> q = orientations(base);
  const std::vector<int> got = oracle(q), again = oracle(q), want = tree_triplet_oracle(tree)(q);
  for (size_t i = 0; i < q.size(); ++i) {
    const std::string t = "(" + std::to_string(q[i][0]) + "; " + std::to_string(q[i][1]) + ", " + std::to_string(q[i][2]) + ")";
    if (got[i] != again[i]) return "nondeterministic: triple " + t + " read " + std::to_string(got[i]) + ", then " + std::to_string(again[i]);
    if (got[i] != want[i])
      return "triple " + t + " read " + std::to_string(got[i]) + ", the rebuilt tree gives " + std::to_string(want[i]) +
             " (lanes in different orders, or a sum that depends on the values)";
  }
  return {};
}

}  // namespace

void measure_positive(AxisAudit& a, const Case& c, const Impl& impl, const DeviceProfile& p, const AxisProbe& probe,
                      DType acc, const AuditOptions& o) {
  const int64_t n = probe.length(c);
  const std::vector<PositiveLeaves> scales = positive_leaves(probe, dtype_of(c, probe.pattern), acc);
  const std::string unfit = probe_unfit(probe, c);
  if (n < 3 || probe.lanes(c) < 1 || scales.empty() || !unfit.empty()) {
    a.status = "unmeasurable";
    a.note = !unfit.empty()    ? unfit
             : scales.empty() ? "the input dtype holds no term pair v in (U/4, U/2) for this accumulator"
                              : "axis too short to probe";
    return;
  }
  ProbeRunner run(impl, c, p, probe, ProbeScale{});
  std::mt19937_64 rng(o.seed);
  std::string why;
  int64_t probes = 0;
  // Each scale whose calibration rows read apart is tried in turn (FLCE h: rounding to nearest,
  // then truncating blocks); the first whose tree survives the spot checks is the measurement.
  for (size_t si = 0; si < scales.size(); ++si) {
    const PositiveLeaves& s = scales[si];
    const std::optional<Readouts> r = calibrate(run, s, n, rng, why);
    if (!r) {
      if (why.rfind("calibration rows", 0) == 0) break;
      continue;
    }
    const TripletOracle oracle = oracle_of(run, s, *r, probes);
    const TreeBuild tb = reconstruct_from_triplets(n, oracle, o.seed, std::max<int64_t>(1, o.max_calls * run.lanes()));
    a.calls = run.calls, a.probes = probes;
    if (tb.status == TreeBuild::Status::budget) {
      a.status = "unmeasurable", a.note = tb.why;
      return;
    }
    why = tb.status == TreeBuild::Status::ok ? spot_check(oracle, tb.tree, n, run.lanes(), rng) : tb.why;
    a.calls = run.calls, a.probes = probes;
    if (!why.empty()) continue;
    a.measured = fit_shape(tb.tree), a.exact = true;
    judge(a, a.measured->n_eff, true);
    std::ostringstream m;
    m << s.M << " (scale " << si + 1 << " of " << scales.size() << ", input value of b and c " << s.v << ")";
    a.note += (a.note.empty() ? "" : "; ") + std::string("positive terms: triplets at M = ") + m.str() + ", " +
              std::to_string(run.lanes()) + (run.lanes() == 1 ? " lane" : " lanes") +
              " a call (one ulp of the accumulator read through the output)";
    return;
  }
  a.calls = run.calls, a.probes = probes;
  a.status = why.rfind("nondeterministic", 0) == 0 ? "nondeterministic"
             : why.rfind("the output cannot tell", 0) == 0 ? "unmeasurable"
                                                             : "inconsistent";
  a.note = why;
}

}  // namespace kv::audit_detail
