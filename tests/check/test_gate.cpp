// The kernel-change gate on real result files: a run passes against itself and against a
// rerun; a worsened host impl (a planted bug under the name "host") fails it with a new
// failure; a baseline with smaller p99 ratios shows growth; a repeated case whose bits
// changed breaks its run_to_run claim.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "check/gate.hpp"
#include "check/results.hpp"
#include "cli_util.hpp"

namespace {

const char* kCases = "run --op rms_norm.fwd --op rms_norm.bwd --impl host --dtype bf16 --shape 4x300 --shape 2x3x64 --quiet";

void write_lines(const std::string& path, const std::vector<nlohmann::json>& lines) {
  std::ofstream f(path);
  for (auto& j : lines) f << j.dump() << "\n";
}

}  // namespace

TEST(Gate, AWorsenedHostImplFailsTheGateAndAnUnchangedOnePasses) {
  const std::string dir = kvtest::tmpdir("gate");
  ASSERT_EQ(kvtest::sh(KV_BIN, std::string(kCases) + " --out " + dir + "/base").code, 0);
  ASSERT_EQ(kvtest::sh(KV_BIN, std::string(kCases) + " --out " + dir + "/again").code, 0);
  auto same = kvtest::sh(KV_BIN, "gate --baseline " + dir + "/base/results.jsonl --results " + dir + "/again/results.jsonl");
  EXPECT_EQ(same.code, 0) << same.text;
  EXPECT_NE(same.text.find("gate: 4 result lines against 4 baseline lines: pass"), std::string::npos) << same.text;

  auto worse = kvtest::sh("KV_TEST_WORSEN_HOST=drop_last_square " KV_TESTBIN, std::string(kCases) + " --out " + dir + "/worse");
  EXPECT_EQ(worse.code, 1) << worse.text;
  auto g = kvtest::sh(KV_BIN, "gate --baseline " + dir + "/base/results.jsonl --results " + dir + "/worse/results.jsonl");
  EXPECT_EQ(g.code, 1) << g.text;
  EXPECT_NE(g.text.find("new_failure: fail: y:"), std::string::npos) << g.text;
  EXPECT_NE(g.text.find("kverify replay 'kv1 op=rms_norm.fwd impl=host"), std::string::npos) << g.text;
  // Only the forward carries that bug: the backward is unchanged and raises nothing.
  EXPECT_EQ(g.text.find("op=rms_norm.bwd"), std::string::npos) << g.text;
}

TEST(Gate, P99GrowthAndBrokenRunToRunClaimsAreCauses) {
  const std::string dir = kvtest::tmpdir("gate_rules");
  ASSERT_EQ(kvtest::sh(KV_BIN, std::string(kCases) + " --out " + dir).code, 0);
  auto lines = kv::read_results(dir + "/results.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(kv::gate(lines, lines).empty());
  // A baseline whose y errors were a third as large: growth on every y (ratios > 0 here).
  auto base = lines;
  int grown = 0;
  for (auto& b : base)
    if (b["outputs"].contains("y") && b["outputs"]["y"]["p99_ratio"].get<double>() > 0) {
      b["outputs"]["y"]["p99_ratio"] = b["outputs"]["y"]["p99_ratio"].get<double>() / 3;
      ++grown;
    }
  ASSERT_GT(grown, 0);
  int p99 = 0;
  for (auto& c : kv::gate(base, lines)) p99 += c.kind == "p99_growth";
  EXPECT_EQ(p99, grown);
  // Growth of exactly 2x is not a cause.
  for (auto& b : base)
    if (b["outputs"].contains("y")) b["outputs"]["y"]["p99_ratio"] = b["outputs"]["y"]["p99_ratio"].get<double>() * 1.5;
  for (auto& c : kv::gate(base, lines)) EXPECT_NE(c.kind, "p99_growth") << c.detail;
  // A repeat of one case with other bits for an output claiming run_to_run.
  auto rep = lines;
  nlohmann::json again = lines[0];
  again["outputs"]["y"]["digest"]["xxh64"] = "0000000000000000";
  rep.push_back(again);
  auto causes = kv::gate(lines, rep);
  ASSERT_EQ(causes.size(), 1u);
  EXPECT_EQ(causes[0].kind, "determinism");
  EXPECT_NE(causes[0].detail.find("claims run_to_run but repeated runs give 2 different bits"), std::string::npos) << causes[0].detail;
  write_lines(dir + "/rep.jsonl", rep);
  auto g = kvtest::sh(KV_BIN, "gate --baseline " + dir + "/results.jsonl --results " + dir + "/rep.jsonl");
  EXPECT_EQ(g.code, 1) << g.text;
}

namespace {

/// Gate causes of kind determinism from running `impl` as `runs` (each a `run` command's
/// options, into one results file) against a baseline run of `base`.
std::vector<kv::GateCause> determinism_causes(const std::string& dir, const std::string& impl, const std::string& base,
                                              const std::vector<std::string>& runs) {
  const std::string sel = " --op rms_norm.fwd --impl " + impl + " --dtype fp32 --shape 64x128 --quiet --out ";
  EXPECT_EQ(kvtest::sh(KV_TESTBIN, "run" + sel + dir + "/base " + base).code, 0);
  for (auto& r : runs) EXPECT_EQ(kvtest::sh(KV_TESTBIN, "run" + sel + dir + "/now " + r).code, 0);
  std::vector<kv::GateCause> out;
  for (auto& c : kv::gate(kv::read_results(dir + "/base/results.jsonl"), kv::read_results(dir + "/now/results.jsonl")))
    if (c.kind == "determinism") out.push_back(c);
  return out;
}

/// The lines of a results file as if run on another GPU (the same impl version).
void as_other_gpu(const std::string& path) {
  auto lines = kv::read_results(path);
  for (auto& j : lines) j["device_name"] = "another GPU";
  write_lines(path, lines);
}

}  // namespace

TEST(Gate, PlantedClaimBreakersAreDeterminismCausesWithADriftReplay) {
  const std::string d = kvtest::tmpdir("gate_claims");
  for (const char* impl : {"test.breaks_run_to_run", "test.claims_kept"}) {
    // Two runs of one case: their bits must agree (and the baseline's, same GPU).
    auto c = determinism_causes(d + "/r2r_" + impl, impl, "", {"", ""});
    if (std::string(impl) == "test.claims_kept") {
      EXPECT_TRUE(c.empty()) << c[0].detail;
      continue;
    }
    ASSERT_FALSE(c.empty());
    EXPECT_NE(c[0].detail.find("claims run_to_run"), std::string::npos) << c[0].detail;
    EXPECT_EQ(c[0].replay.rfind("kverify drift --op rms_norm.fwd --impl test.breaks_run_to_run ", 0), 0u) << c[0].replay;
  }
  for (const char* impl : {"test.breaks_config_invariant", "test.claims_kept"}) {
    auto c = determinism_causes(d + "/cfg_" + impl, impl, "", {"--config num_warps=4 --config num_warps=8"});
    if (std::string(impl) == "test.claims_kept") {
      EXPECT_TRUE(c.empty()) << c[0].detail;
      continue;
    }
    ASSERT_EQ(c.size(), 1u);
    EXPECT_NE(c[0].detail.find("claims config_invariant but its configs give 2 different bits"), std::string::npos)
        << c[0].detail;
    // The printed drift analysis, run as printed, shows the same broken claim.
    auto again = kvtest::sh_as_printed(c[0].replay, d + "/cfg_drift", KV_TESTBIN);
    EXPECT_EQ(again.code, 1) << c[0].replay << "\n" << again.text;
    EXPECT_NE(again.text.find("claims config_invariant but the configs give 2 different results"), std::string::npos)
        << again.text;
  }
  for (const char* impl : {"test.breaks_gpu_invariant", "test.claims_kept"}) {
    // A baseline from a GPU with 108 SMs: the profile forecasts it, the name says so.
    const std::string dir = d + "/gpu_" + impl;
    ASSERT_EQ(kvtest::sh(KV_TESTBIN, std::string("run --op rms_norm.fwd --impl ") + impl +
                                         " --dtype fp32 --shape 64x128 --quiet --device-profile sm_count=108 --out " + dir +
                                         "/base").code, 0);
    as_other_gpu(dir + "/base/results.jsonl");
    ASSERT_EQ(kvtest::sh(KV_TESTBIN, std::string("run --op rms_norm.fwd --impl ") + impl +
                                         " --dtype fp32 --shape 64x128 --quiet --out " + dir + "/now").code, 0);
    std::vector<kv::GateCause> c;
    for (auto& x : kv::gate(kv::read_results(dir + "/base/results.jsonl"), kv::read_results(dir + "/now/results.jsonl")))
      if (x.kind == "determinism") c.push_back(x);
    if (std::string(impl) == "test.claims_kept") {
      EXPECT_TRUE(c.empty()) << c[0].detail;
      continue;
    }
    ASSERT_EQ(c.size(), 1u);
    EXPECT_NE(c[0].detail.find("claims gpu_invariant"), std::string::npos) << c[0].detail;
    EXPECT_NE(c[0].replay.find("--forecast sm_count=108"), std::string::npos) << c[0].replay;
  }
}
