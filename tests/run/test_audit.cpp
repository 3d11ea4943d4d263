// `kverify audit` on the host impls (run/audit.hpp): the measured n_eff of each probed axis
// equals what the host summation code gives (ops/host/host_policy.hpp lanes and trees,
// ops/op_base.hpp column_sums, ops/rms_norm_host.cpp dW partials), every such axis is ok,
// and the planted contract and sum faults are flagged (exit 1 from the command).
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "cli_util.hpp"
#include "kernels/rms_norm/contract.hpp"
#include "run/audit.hpp"
#include "run/suite.hpp"

namespace {

using kv::AxisAudit;

kv::Case make_case(const std::string& op, const std::string& impl, const std::string& dtype, const std::string& shape,
                   const std::map<std::string, std::string>& config, const std::map<std::string, std::string>& attrs = {}) {
  kv::SuiteEntry e;
  e.ops = {op}, e.impls = {impl}, e.dtypes = {dtype}, e.shapes = {shape};
  for (auto& [k, v] : config) e.configs[k] = {v};
  for (auto& [k, v] : attrs) e.attrs[k] = {v};
  auto cases = kv::expand_suite({e}, "host");
  EXPECT_EQ(cases.size(), 1u);
  return cases.at(0);
}

std::vector<AxisAudit> audit(const kv::Case& c, const std::string& impl) {
  return kv::audit_case(c, kv::registry().impl(c.op, impl), kv::host_profile(), kv::AuditOptions{});
}

// Expected depths (design §3), from the host code:
/// A row over l lanes: a lane starts at its first term (or at acc(0 + t), exact), so
/// ceil(n / l) - 1 serial roundings, then a tree of ceil(log2 min(l, n)) levels.
int64_t row_depth(int64_t n, int64_t l) { return kv::ceil_div(n, l) - 1 + kv::log2_ceil(std::min(l, n)); }
/// column_sums: chunks of 64 rows as rows of the chunk's length, merged serially from 0.
int64_t col_depth(int64_t rows, int64_t l) {
  const int64_t ch = std::min<int64_t>(64, rows);
  return row_depth(ch, l) + kv::ceil_div(rows, 64) - 1;
}
/// rms_norm host dW: per_part rows per partial from 0, the used partials summed from 0.
int64_t rms_dw_depth(int64_t rows, int64_t parts) {
  const int64_t per = kv::ceil_div(rows, parts), used = kv::ceil_div(rows, per);
  return (per - 1) + (used - 1);
}

struct Want {
  std::string axis, out;
  int64_t n_eff;
};

void expect_measured(const std::vector<AxisAudit>& got, const std::vector<Want>& want, const std::string& what) {
  for (const Want& w : want) {
    bool found = false;
    for (const AxisAudit& a : got) {
      if (a.axis != w.axis || a.out != w.out) continue;
      found = true;
      EXPECT_EQ(a.status, "ok") << what << " " << w.axis << ": " << a.note;
      ASSERT_TRUE(a.measured.has_value()) << what << " " << w.axis;
      EXPECT_TRUE(a.exact) << what;
      EXPECT_EQ(a.measured->n_eff, w.n_eff) << what << " " << w.axis << "(" << w.out << ")";
      EXPECT_LE(a.measured->n_eff, a.declared.n_eff()) << what;
    }
    EXPECT_TRUE(found) << what << ": no axis " << w.axis << "(" << w.out << ")";
  }
}

struct Shape {
  std::string str;
  int64_t rows, n;
};
const Shape kShapes[] = {{"8x300", 8, 300}, {"130x96", 130, 96}};

TEST(Audit, RmsNormBwdHostMatchesItsSummationCode) {
  for (const char* dw : {"fixed_partials", "per_sm", "serial"})
    for (int nw : {1, 4})
      for (const char* dt : {"fp32", "bf16"})
        for (const Shape& s : kShapes) {
          const kv::Case c = make_case("rms_norm.bwd", "host", dt, s.str, {{"dw", dw}, {"num_warps", std::to_string(nw)}});
          const int64_t parts = std::string(dw) == "serial" ? 1 : std::string(dw) == "per_sm" ? 32 : 64;
          expect_measured(audit(c, "host"), {{"row", "dx", row_depth(s.n, 32 * nw)}, {"rows", "dw", rms_dw_depth(s.rows, parts)}},
                          c.str());
        }
}

TEST(Audit, LayerNormAndSoftmaxHostMatchTheirSummationCode) {
  for (int nw : {1, 4})
    for (const char* dt : {"fp32", "bf16"})
      for (const Shape& s : kShapes) {
        const std::map<std::string, std::string> cfg = {{"num_warps", std::to_string(nw)}};
        const kv::Case ln = make_case("layer_norm.bwd", "host", dt, s.str, cfg);
        const auto a = audit(ln, "host");
        const int64_t col = col_depth(s.rows, 32 * nw);
        const int64_t row = row_depth(s.n, 32 * nw);
        expect_measured(a, {{"rows", "dw", col}, {"rows", "db", col}, {"row", "dx:s2", row}, {"row", "dx:s1+s2", row}},
                        ln.str());
        const kv::Case lf = make_case("layer_norm.fwd", "host", dt, s.str, cfg);  // through mean = fl(S / N)
        expect_measured(audit(lf, "host"), {{"row", "mean", row}}, lf.str());
        const kv::Case sm = make_case("softmax.bwd", "host", dt, s.str, cfg);
        expect_measured(audit(sm, "host"), {{"row", "dx", row_depth(s.n, 32 * nw)}}, sm.str());
      }
}

TEST(Audit, DeclaredMinusMeasuredIsTheExactStartOfEachSum) {
  // Design §3: row axes measure declared - 1, column sums declared - 2.
  const kv::Case c = make_case("layer_norm.bwd", "host", "fp32", "130x96", {});
  for (const AxisAudit& a : audit(c, "host")) {
    ASSERT_TRUE(a.measured.has_value()) << a.axis;
    EXPECT_EQ(a.measured->n_eff, a.declared.n_eff() - (a.axis == "rows" ? 2 : 1)) << a.axis << "(" << a.out << ")";
  }
  const kv::Case s = make_case("softmax.bwd", "host", "fp32", "8x300", {});
  for (const AxisAudit& a : audit(s, "host")) EXPECT_EQ(a.measured->n_eff, a.declared.n_eff() - 1);
}

TEST(Audit, OrdersOfTheRmsNormHost) {
  // desc: one relabelling of every lane. shuffle: each row's order is keyed by its row, so
  // the rows' trees are rebuilt one by one (4 of them: a lower bound at 200 rows, exact at 4);
  // dW's row order is one shuffle that every column shares.
  for (const char* order : {"desc", "shuffle"})
    for (const Shape& s : {Shape{"200x96", 200, 96}, Shape{"4x96", 4, 96}}) {
      const kv::Case c = make_case("rms_norm.bwd", "host", "fp32", s.str, {{"order", order}});
      for (const AxisAudit& a : audit(c, "host")) {
        const std::string what = std::string(order) + " " + s.str + " " + a.axis + ": " + a.note;
        EXPECT_FALSE(a.unsound()) << what;
        ASSERT_TRUE(a.measured.has_value()) << what;
        EXPECT_EQ(a.measured->n_eff, a.axis == "rows" ? rms_dw_depth(s.rows, 64) : row_depth(96, 128)) << what;
        const bool lower = a.axis == "row" && std::string(order) == "shuffle" && s.rows > 4;
        EXPECT_EQ(a.status, lower ? "lower_bound" : "ok") << what;
        EXPECT_EQ(a.exact, !lower) << what;
      }
    }
}

TEST(Audit, Fp16TermsUseASubnormalUnit) {
  // fp16 terms: u0 = 2^-23 keeps M below fp16's max. The rms_norm row reads S / N, which
  // would be subnormal in fp16: no probe fits (unmeasurable, never a wrong sum).
  const kv::Case c = make_case("rms_norm.bwd", "host", "fp16", "130x96", {});
  for (const AxisAudit& a : audit(c, "host")) {
    if (a.axis == "row") {
      EXPECT_EQ(a.status, "unmeasurable") << a.note;
      EXPECT_NE(a.note.find("no exact probe fits"), std::string::npos) << a.note;
    }
  }
  expect_measured(audit(c, "host"), {{"rows", "dw", rms_dw_depth(130, 64)}}, c.str());
  const kv::Case s = make_case("softmax.bwd", "host", "fp16", "130x96", {});
  expect_measured(audit(s, "host"), {{"row", "dx", row_depth(96, 128)}}, s.str());
  const kv::Case l = make_case("layer_norm.bwd", "host", "fp16", "130x96", {});
  expect_measured(audit(l, "host"), {{"rows", "dw", col_depth(130, 128)}, {"rows", "db", col_depth(130, 128)}}, l.str());
}

TEST(Audit, PositiveSumsOfTheHostAreMeasuredThroughTriplets) {
  // rms_norm.fwd (sum of x^2, read through rstd) and softmax.fwd (sum of exp, read through
  // y = 1 / S at the row's max): no term can cancel, so the audit reads triplets
  // (check/audit_triplets.hpp); the trees are the host's lanes, as for the signed sums.
  for (const char* op : {"rms_norm.fwd", "softmax.fwd"})
    for (int nw : {1, 4})
      for (const char* dt : {"fp32", "bf16"})
        for (const Shape& s : kShapes) {
          if (std::string(op) == "softmax.fwd" && std::string(dt) == "bf16") continue;  // below
          const kv::Case c = make_case(op, "host", dt, s.str, {{"num_warps", std::to_string(nw)}});
          const std::string out = std::string(op) == "rms_norm.fwd" ? "rstd" : "y";
          expect_measured(audit(c, "host"), {{"row", out, row_depth(s.n, 32 * nw)}}, c.str());
        }
  // cross_entropy: the loss (reduction none) and the gradient at the target read log S and 1 / S.
  for (const char* op : {"cross_entropy.fwd", "cross_entropy.bwd"})
    for (int nw : {1, 4}) {
      const kv::Case c = make_case(op, "host", "fp32", "130x96", {{"num_warps", std::to_string(nw)}}, {{"reduction", "none"}});
      const std::string out = std::string(op) == "cross_entropy.fwd" ? "loss" : "dlogits";
      expect_measured(audit(c, "host"), {{"row", out, row_depth(96, 32 * nw)}}, c.str());
    }
  for (const AxisAudit& a : audit(make_case("cross_entropy.fwd", "host", "fp32", "8x300", {}, {{"softcap", "30"}, {"reduction", "none"}}), "host"))
    if (a.axis == "row") EXPECT_NE(a.note.find("softcap"), std::string::npos) << a.note;
  // bf16 y cannot show one ulp of an fp32 sum near 1: unmeasurable, with the reason.
  for (const AxisAudit& a : audit(make_case("softmax.fwd", "host", "bf16", "8x300", {}), "host")) {
    EXPECT_EQ(a.status, "unmeasurable");
    EXPECT_NE(a.note.find("cannot tell a sum of M from M + 1 ulp"), std::string::npos) << a.note;
  }
  // The batch sum of the losses (mean): one lane, each leaf a row whose loss is M, v or 0.
  const kv::Case ce = make_case("cross_entropy.fwd", "host", "bf16", "64x256", {});
  for (const AxisAudit& a : audit(ce, "host")) {
    if (a.axis == "row") continue;  // reduction mean: no loss per row (UnprobedAxesAndOpsWithoutSums)
    EXPECT_EQ(a.status, "ok") << a.note;
    ASSERT_TRUE(a.measured.has_value());
    EXPECT_EQ(a.measured->n_eff, a.declared.n_eff() - 2) << a.note;  // column sums: two exact adds
  }
  // The negative control: 32 lanes run under the contract of 1024.
  for (const char* op : {"rms_norm.fwd", "softmax.fwd"}) {
    const kv::Case c = make_case(op, "test.audit.warps_understated", "fp32", "8x300", {});
    const auto r = audit(c, "test.audit.warps_understated");
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].status, "understated") << r[0].note;
    EXPECT_NE(r[0].note.find("declared n_eff 10 < measured " + std::to_string(row_depth(300, 32))), std::string::npos)
        << r[0].note;
  }
}

TEST(Audit, FlceSumsAreMeasuredThroughDxDweightAndTheLoss) {
  // Backward: weight = 0 or x = 0 makes every logit 0 and dlogits[r, j] = g (1/V - [j = t_r]):
  // dweight's sum over rows and dx's over the vocabulary read S g / V (dx at a row whose
  // target is the lane's zero slot). The vocabulary's sum of exp (row) goes by triplets with
  // x[r, :] = e_r, read in dweight[a, r] = (1/S - 1) g, and forward in loss[r] (reduction
  // none). h: x[r, :] holds the triple, weight[0, :] = 29/8, read in loss[r] ~ logits[r, 0].
  // As elsewhere the declared shapes count the exact start: one rounding more for sums along a
  // row, two for the rows' column sums.
  struct Run {
    const char *op, *dt, *red;
  };
  for (const Run& r : {Run{"fused_linear_cross_entropy.bwd", "bf16", "mean"}, Run{"fused_linear_cross_entropy.bwd", "fp32", "sum"},
                       Run{"fused_linear_cross_entropy.bwd", "bf16", "none"}, Run{"fused_linear_cross_entropy.fwd", "bf16", "none"},
                       Run{"fused_linear_cross_entropy.fwd", "fp32", "mean"}}) {
    const std::string op = r.op, dt = r.dt, red = r.red;
    const bool fwd = op.find("fwd") != std::string::npos;
    const kv::Case c = make_case(op, "host", dt, "32x32x256", {}, {{"reduction", red}});
    std::set<std::string> measured;
    for (const AxisAudit& a : audit(c, "host")) {
      if (a.status == "unmeasurable") continue;
      measured.insert(a.axis);
      EXPECT_EQ(a.status, "ok") << c.str() << " " << a.axis << ": " << a.note;
      ASSERT_TRUE(a.measured.has_value()) << a.axis;
      EXPECT_EQ(a.measured->n_eff, a.declared.n_eff() - (a.axis == "rows" ? 2 : 1)) << c.str() << " " << a.axis;
    }
    // forward: the row sums per loss (none), or the batch sum of the losses (mean, sum)
    const std::set<std::string> want = !fwd ? std::set<std::string>{"row", "rows", "v"}
                                       : red == "none" ? std::set<std::string>{"h", "row"}
                                                       : std::set<std::string>{"rows"};
    EXPECT_EQ(measured, want) << c.str();
  }
  // V = 600: 1/V rounds, no exact readout; said so, never a wrong sum.
  for (const AxisAudit& a : audit(make_case("fused_linear_cross_entropy.bwd", "host", "bf16", "16x8x600", {}), "host"))
    if (a.axis == "v" || a.axis == "rows") EXPECT_NE(a.note.find("no power of two"), std::string::npos) << a.note;
}

TEST(Audit, TwoLeafAxesAreMeasuredNotLooped) {
  // With two leaves the pair leaves no unit: a block of 0 units never closed and the audit
  // ran out of memory (std::bad_alloc). Blocks now hold at least one unit.
  const kv::Case c = make_case("rms_norm.bwd", "host", "fp32", "2x8", {});
  for (const AxisAudit& a : audit(c, "host"))
    if (a.axis == "rows") {
      EXPECT_EQ(a.status, "ok") << a.note;
      ASSERT_TRUE(a.measured.has_value());
      EXPECT_EQ(a.measured->n_eff, rms_dw_depth(2, 64));
    }
  const kv::Case f = make_case("fused_linear_cross_entropy.bwd", "host", "fp32", "2x2x2", {});
  for (const AxisAudit& a : audit(f, "host"))
    if (a.axis == "rows") EXPECT_EQ(a.status, "ok") << a.note;
}

TEST(Audit, UnprobedAxesAndOpsWithoutSums) {
  for (const AxisAudit& a : audit(make_case("cross_entropy.fwd", "host", "fp32", "8x300", {}), "host"))
    if (a.axis == "row") {  // reduction mean: one loss per batch, no lane per row
      EXPECT_EQ(a.status, "unmeasurable");
      EXPECT_NE(a.note.find("reduction=none"), std::string::npos) << a.note;
    }
  for (const AxisAudit& a : audit(make_case("cross_entropy.bwd", "host", "fp32", "8x300", {}), "host"))
    if (a.axis == "rows") EXPECT_NE(a.note.find("sums no floats over rows"), std::string::npos) << a.note;
  const auto g = audit(make_case("swiglu.fwd", "host", "fp32", "8x300", {}), "host");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].status, "nothing to audit");
}

TEST(Audit, PlantedFaultsAreFlagged) {
  const kv::Case c = make_case("rms_norm.bwd", "host.bug.rows_understated", "fp32", "200x96", {});
  bool seen = false;
  for (const AxisAudit& a : audit(c, "host.bug.rows_understated"))
    if (a.axis == "rows") {
      seen = true;
      EXPECT_EQ(a.status, "understated");
      EXPECT_NE(a.note.find("declared n_eff 68 < measured 199"), std::string::npos) << a.note;
    }
  EXPECT_TRUE(seen);
  const kv::Case d = make_case("softmax.bwd", "host.bug.drop_last_term", "fp32", "8x300", {});
  const auto r = audit(d, "host.bug.drop_last_term");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].status, "wrong_sum") << r[0].note;
  // bf16 accumulation: at 64 terms the units stay exact in bf16, the tree is rebuilt, and
  // the accumulator probe loses 2^-23 against 1.
  const kv::Case b = make_case("softmax.bwd", "host.bug.bf16_accumulation", "fp32", "8x64", {});
  const auto q = audit(b, "host.bug.bf16_accumulation");
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].status, "understated") << q[0].note;
  EXPECT_NE(q[0].note.find("accumulator narrower than the declared fp32"), std::string::npos) << q[0].note;
}

TEST(Audit, ASpentBudgetGivesALowerBoundThatStillFlagsUnderstatement) {
  // Pivot paths: the depths of the first and last leaf. No pass is claimed on them, but a
  // depth above the declared n_eff is flagged all the same.
  kv::AuditOptions o;
  o.max_calls = 3;
  const kv::Case s = make_case("softmax.bwd", "host", "fp32", "8x300", {});
  const auto a = kv::audit_case(s, kv::registry().impl(s.op, "host"), kv::host_profile(), o);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].status, "lower_bound") << a[0].note;
  EXPECT_FALSE(a[0].exact);
  EXPECT_LE(a[0].measured->n_eff, row_depth(300, 128));
  const kv::Case c = make_case("rms_norm.bwd", "host.bug.rows_understated", "fp32", "200x96", {});
  for (const AxisAudit& x : kv::audit_case(c, kv::registry().impl(c.op, "host.bug.rows_understated"), kv::host_profile(), o)) {
    if (x.axis == "rows") {
      EXPECT_EQ(x.status, "understated") << x.note;
      EXPECT_NE(x.note.find("(a lower bound)"), std::string::npos) << x.note;
    }
  }
}

TEST(Audit, CommandExitsOneOnAnUnsoundContract) {
  const std::string dir = kvtest::tmpdir("audit");
  auto o = kvtest::sh(KV_TESTBIN, "audit --device host --op rms_norm.bwd --impl host.bug.rows_understated --shape 200x96 --out " + dir);
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("declared n_eff 68 < measured 199"), std::string::npos) << o.text;
  o = kvtest::sh(KV_TESTBIN, "audit --device host --op softmax.bwd --impl host.bug.drop_last_term --out " + dir);
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("wrong_sum"), std::string::npos) << o.text;
  o = kvtest::sh(KV_BIN, "audit --device host --op rms_norm.bwd --impl host --dtype bf16 --config num_warps=1 --out " + dir);
  EXPECT_EQ(o.code, 0) << o.text;
  std::ifstream f(dir + "/audit.jsonl");
  std::string line;
  int lines = 0, determinism = 0;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("kind", "") == "determinism") {  // tests/run/test_audit_determinism.cpp
      ++determinism;
      continue;
    }
    EXPECT_EQ(j.value("kind", ""), "reduction") << line;
    for (const char* k : {"op", "impl", "config", "axis", "status", "verdict", "declared", "case"}) EXPECT_TRUE(j.contains(k)) << line;
    ++lines;
  }
  EXPECT_EQ(lines, 2 + 1 + 2);  // rows_understated: row, rows; drop_last_term: row; host: row, rows
  EXPECT_EQ(determinism, (2 + 1 + 2) * 4);  // outputs dx, dw; dx; dx, dw; 4 claims each
}

}  // namespace
