// `kverify audit`'s determinism audit (cli/audit_determinism.hpp): its plan (other configs,
// batch companions straddling sm_count and powers of two, bit comparisons), the negative
// controls (tests/determinism_impls.cpp: each breaks one claim and must be flagged, exit 1,
// naming the claim) and the host impls whose claims hold (exit 0).
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "cli_util.hpp"
#include "run/determinism_plan.hpp"
#include "run/suite.hpp"

namespace {

kv::Case make_case(const std::string& op, const std::string& impl, const std::string& shape) {
  kv::SuiteEntry e;
  e.ops = {op}, e.impls = {impl}, e.dtypes = {"fp32"}, e.shapes = {shape};
  auto cases = kv::expand_suite({e}, "host");
  EXPECT_EQ(cases.size(), 1u);
  return cases.at(0);
}

std::vector<int64_t> dims_of(const kv::Case& c, const kv::DeterminismLimits& l = {}) {
  std::vector<int64_t> d;
  for (auto& x : kv::companion_dims(c, kv::registry().impl(c.op, c.impl), kv::host_profile(), l)) d.push_back(x.d0);
  return d;
}

TEST(DeterminismPlan, CompanionsStraddleSmCountAndPowersOfTwo) {
  // Host profile: sm_count 32. 8 rows: one more row, sm_count +- 1, 2 sm_count +- 1, 16 +- 1.
  const std::vector<int64_t> want = {9, 15, 16, 17, 31, 32, 33, 63, 64, 65};
  EXPECT_EQ(dims_of(make_case("rms_norm.fwd", "host", "8x300")), want);
  // Rank 3: the rows are every dim but the last; 2x3 rows -> first dims past 2.
  const auto r3 = dims_of(make_case("softmax.fwd", "host", "2x3x64"));
  EXPECT_FALSE(r3.empty());
  for (int64_t d : r3) EXPECT_GT(d, 2);
}

TEST(DeterminismPlan, DeclaredRowThresholdsComeFirstAndCapsHold) {
  // test.thresholds declares dW's two programs per SM (64 rows): 63, 64, 65, why named.
  const kv::Case t = make_case("rms_norm.bwd", "test.thresholds", "40x96");
  bool declared = false;
  for (auto& x : kv::companion_dims(t, kv::registry().impl(t.op, t.impl), kv::host_profile(), {}))
    declared |= x.d0 == 64 && x.why.find("declared: two programs per SM") != std::string::npos;
  EXPECT_TRUE(declared);
  kv::DeterminismLimits l;
  l.max_companions = 3;
  EXPECT_EQ(dims_of(t, l), (std::vector<int64_t>{41, 63, 64}));
  // A large case: each companion within twice its elements, all within 4x, at most the count.
  const kv::Case big = make_case("softmax.fwd", "host", "4096x1024");
  int64_t total = 0;
  for (int64_t d : dims_of(big)) {
    EXPECT_LE(d, 8192);
    total += d;
  }
  EXPECT_LE(total, 4 * 4096);
  EXPECT_GE(total, 4097);
}

TEST(DeterminismPlan, OtherConfigsAreNearestFirstAndValid) {
  const kv::Case c = make_case("rms_norm.fwd", "host", "8x300");  // knobs: num_warps (6), order (3)
  const auto v = kv::other_configs(c, kv::registry().impl(c.op, "host"), kv::host_profile(), 8);
  ASSERT_EQ(v.size(), 8u);
  std::set<std::string> seen;
  for (size_t i = 0; i < v.size(); ++i) {
    int changed = 0;
    for (auto& [k, val] : v[i].config) changed += c.config.at(k) != val;
    EXPECT_EQ(changed, i < 7 ? 1 : 2) << i;  // 5 other num_warps, 2 other orders, then two knobs
    EXPECT_TRUE(seen.insert(v[i].str()).second);
  }
  EXPECT_TRUE(kv::other_configs(c, kv::registry().impl(c.op, "host"), kv::host_profile(), 0).empty());
}

TEST(DeterminismPlan, BitDiffComparesTheFirstRows) {
  kv::StoredTensor a{kv::DType::f32, false, {2, 2}, std::vector<uint8_t>(16, 0)};
  kv::StoredTensor b{kv::DType::f32, false, {3, 2}, std::vector<uint8_t>(24, 0)};
  auto d = kv::bit_diff(a, b);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->n_diff, 0);
  EXPECT_EQ(d->first, -1);
  b.bytes[9] = 1, b.bytes[13] = 1, b.bytes[20] = 1;  // elements 2 and 3 differ; element 5 is past a's rows
  d = kv::bit_diff(a, b);
  EXPECT_EQ(d->n_diff, 2);
  EXPECT_EQ(d->first, 2);
  b.shape = {3, 3};
  EXPECT_FALSE(kv::bit_diff(a, b));
  EXPECT_FALSE(kv::bit_diff(b, a));
}

/// The determinism rows of <dir>/audit.jsonl: (output, claim) -> the row.
std::map<std::pair<std::string, std::string>, nlohmann::json> rows_of(const std::string& dir) {
  std::map<std::pair<std::string, std::string>, nlohmann::json> m;
  std::ifstream f(dir + "/audit.jsonl");
  std::string line;
  while (std::getline(f, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j.value("kind", "") == "determinism") m[{j["output"], j["claim"]}] = j;
  }
  return m;
}

kvtest::Out audit(const std::string& bin, const std::string& args, const std::string& dir) {
  std::filesystem::remove_all(dir);
  return kvtest::sh(bin, "audit --device host " + args + " --out " + dir);
}

struct Control {
  std::string impl, shape, claim, where;
};

TEST(AuditDeterminism, EachBrokenClaimIsFlagged) {
  const Control controls[] = {
      {"test.det.call_order", "8x300", "run_to_run", "a second run in the same process"},
      // 32 rows or more: any two process ids differ in the rows they move.
      {"test.det.process_order", "40x300", "run_to_run", "a run in a fresh process"},
      {"test.det.knob", "8x300", "config_invariant", "config num_warps=1,order=asc"},
      // The first companion past sm_count (32) rows; those at or below it keep the bits.
      {"test.det.rows", "8x300", "batch_invariant", "the companion of 33 rows (sm_count (32) + 1)"},
  };
  for (const Control& k : controls) {
    const std::string dir = kvtest::tmpdir("audit_det");
    const auto o = audit(KV_TESTBIN, "--op rms_norm.fwd --impl " + k.impl + " --shape " + k.shape, dir);
    EXPECT_EQ(o.code, 1) << k.impl << "\n" << o.text;
    const std::string line = "unsound contract: " + k.impl + " (rms_norm.fwd) output rstd claims " + k.claim + " but ";
    EXPECT_NE(o.text.find(line), std::string::npos) << k.impl << "\n" << o.text;
    const auto rows = rows_of(dir);
    ASSERT_TRUE(rows.count({"rstd", k.claim})) << k.impl;
    const auto& r = rows.at({"rstd", k.claim});
    EXPECT_EQ(r["status"], "violated") << r.dump();
    EXPECT_GT(r["n_diff"].get<int64_t>(), 0) << r.dump();
    EXPECT_GE(r["first_diff"].get<int64_t>(), 0) << r.dump();
    EXPECT_EQ(r["where"].get<std::string>().rfind(k.where, 0), 0u) << r.dump();
  }
}

TEST(AuditDeterminism, OnlyTheBrokenClaimIsFlagged) {
  // The per-process order keeps its bits within a process: same-process repeats and the
  // companions (run in that process) hold; the rows-dependent order holds on every config.
  const std::string dir = kvtest::tmpdir("audit_det_only");
  auto o = audit(KV_TESTBIN, "--op rms_norm.fwd --impl test.det.process_order --shape 40x300", dir);
  auto rows = rows_of(dir);
  EXPECT_EQ(rows.at({"rstd", "batch_invariant"})["status"], "held") << rows.at({"rstd", "batch_invariant"}).dump();
  EXPECT_EQ(rows.at({"rstd", "batch_invariant"})["compared"], 7);  // 41, 63, 64, 65, 127, 128, 129 rows
  const std::string note = rows.at({"rstd", "run_to_run"})["note"];
  EXPECT_NE(note.find("in a run in a fresh process, the first at index"), std::string::npos) << note;
  EXPECT_NE(note.find("(1 of 2 runs changed)"), std::string::npos) << note;  // not the same-process repeat
  EXPECT_EQ(rows.at({"y", "run_to_run"})["status"], "held");                  // y is untouched
  size_t unsound = 0;
  for (size_t at = o.text.find("unsound contract"); at != std::string::npos; at = o.text.find("unsound contract", at + 1))
    ++unsound;
  EXPECT_EQ(unsound, 1u) << o.text;
  audit(KV_TESTBIN, "--op rms_norm.fwd --impl test.det.rows --shape 8x300", dir);
  rows = rows_of(dir);
  EXPECT_EQ(rows.at({"y", "run_to_run"})["status"], "held");
  // Companions at or below sm_count rows keep the bits: the change is seen past it only.
  const auto& b = rows.at({"rstd", "batch_invariant"});
  EXPECT_EQ(b["status"], "violated");
  EXPECT_NE(b["note"].get<std::string>().find("(4 of 10 runs changed)"), std::string::npos) << b.dump();
}

TEST(AuditDeterminism, ChangesNotClaimedAreReportedNotFailed) {
  // test.det.atomics moves bits on every call but claims neither run_to_run nor batch_invariant.
  const std::string dir = kvtest::tmpdir("audit_det_atomics");
  const auto o = audit(KV_TESTBIN, "--op rms_norm.fwd --impl test.det.atomics", dir);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(o.text.find("unsound contract"), std::string::npos) << o.text;
  const auto rows = rows_of(dir);
  for (const char* claim : {"run_to_run", "batch_invariant"}) {
    const auto& r = rows.at({"rstd", claim});
    EXPECT_EQ(r["status"], "not claimed") << r.dump();
    EXPECT_EQ(r["note"].get<std::string>().rfind("changed: ", 0), 0u) << r.dump();
  }
  EXPECT_EQ(rows.at({"y", "run_to_run"})["note"], "unchanged in 2 runs");
}

TEST(AuditDeterminism, HostImplsKeepTheirClaims) {
  for (const char* op : {"rms_norm.bwd", "softmax.fwd"}) {
    const std::string dir = kvtest::tmpdir("audit_det_host");
    const auto o = audit(KV_BIN, std::string("--op ") + op + " --impl host", dir);
    EXPECT_EQ(o.code, 0) << op << "\n" << o.text;
    const auto rows = rows_of(dir);
    EXPECT_FALSE(rows.empty()) << o.text;
    for (auto& [key, r] : rows) {
      const std::string what = std::string(op) + " " + r.dump();
      EXPECT_NE(r["status"], "violated") << what;
      if (!r["claimed"].get<bool>()) continue;
      EXPECT_EQ(r["status"], key.second == "gpu_invariant" ? "not auditable here" : "held") << what;
      if (key.second == "run_to_run") EXPECT_EQ(r["compared"], 2) << what;
      if (key.second == "batch_invariant") EXPECT_EQ(r["compared"], 10) << what;
    }
    // Not claimed but observed: the host's sums follow num_warps, so other configs change the bits.
    const std::string out = std::string(op) == "softmax.fwd" ? "y" : "dx";
    const auto& cfg = rows.at({out, "config_invariant"});
    EXPECT_EQ(cfg["status"], "not claimed");
    EXPECT_EQ(cfg["note"].get<std::string>().rfind("changed: ", 0), 0u) << cfg.dump();
  }
}

TEST(AuditDeterminism, FlagOffKeepsTheReductionAuditAlone) {
  // README (Audit): --determinism off audits the reductions alone; a broken claim is then not seen.
  const std::string dir = kvtest::tmpdir("audit_det_off");
  auto o = audit(KV_TESTBIN, "--op rms_norm.fwd --impl test.det.call_order --determinism off", dir);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_TRUE(rows_of(dir).empty());
  EXPECT_EQ(o.text.find("claim"), std::string::npos) << o.text;
  o = audit(KV_TESTBIN, "--op rms_norm.fwd --impl test.det.call_order --determinism maybe", dir);
  EXPECT_EQ(o.code, 2) << o.text;
  // README (Audit): gpu_invariant is reported as not auditable here, never as held.
  o = audit(KV_BIN, "--op softmax.fwd --impl host", dir);
  EXPECT_NE(o.text.find("gpu_invariant     not auditable here"), std::string::npos) << o.text;
}

}  // namespace
