// Drift analysis: ulp distances between kept outputs; claims held against repeats,
// configs and a forecast profile; and end to end, the host RMSNorm's dW under a 108-SM
// forecast changes its bits with per-SM partials and keeps them with fixed partials.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>

#include "check/drift.hpp"
#include "cli_util.hpp"

namespace {

using kv::DType;
using kv::StoredTensor;

StoredTensor f32s(std::vector<float> v) {
  StoredTensor t;
  t.dtype = DType::f32;
  t.shape = {static_cast<int64_t>(v.size())};
  t.bytes.resize(v.size() * 4);
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

kv::DriftRun run(std::vector<float> y, nlohmann::json claims, const char* verdict = "pass") {
  kv::DriftRun r;
  r.result = {{"op", "x.fwd"}, {"impl", "i"}, {"verdict", verdict}, {"contract", {{"determinism", {{"y", claims}}}}}};
  r.outputs["y"] = f32s(std::move(y));
  return r;
}

}  // namespace

TEST(Drift, UlpDistancesOrderSignsAndNans) {
  const float one_up = std::nextafter(1.0f, 2.0f);
  auto s = kv::compare_outputs(f32s({1.0f, 1.0f, -0.0f, 2.0f}), f32s({1.0f, one_up, 0.0f, -2.0f}));
  EXPECT_EQ(s.n_diff, 3);  // -0 and +0 differ in bits, at distance 0
  EXPECT_EQ(s.max_ulps, 2.0 * 0x40000000);  // 2 and -2: 2^30 steps each side of zero
  auto n = kv::compare_outputs(f32s({NAN, 1.0f}), f32s({NAN, 1.0f}));
  EXPECT_EQ(n.n_diff, 0);
  auto m = kv::compare_outputs(f32s({NAN}), f32s({1.0f}));
  EXPECT_TRUE(std::isinf(m.max_ulps));
  StoredTensor other = f32s({1.0f});
  other.dtype = DType::i32;
  EXPECT_THROW(kv::compare_outputs(f32s({1.0f}), other), std::runtime_error);
}

TEST(Drift, ClaimsAreHeldToRepeatsConfigsAndTheForecast) {
  const float up = std::nextafter(1.0f, 2.0f);
  std::vector<kv::DriftConfig> cs(2);
  cs[0].config = "a=1";
  cs[0].repeats = {run({1.0f}, {"run_to_run", "config_invariant"}), run({up}, {"run_to_run", "config_invariant"})};
  cs[0].forecast = run({1.0f}, {"run_to_run"});
  cs[1].config = "a=2";
  cs[1].repeats = {run({up}, {"gpu_invariant"}, "fail"), run({up}, {"gpu_invariant"})};
  cs[1].forecast = run({2.0f}, {"gpu_invariant"});
  auto rep = kv::analyze_drift(cs, "sm_count=108");
  ASSERT_EQ(rep["violations"].size(), 3u) << rep.dump(1);
  EXPECT_NE(rep["violations"][0].get<std::string>().find("a=1 claims run_to_run but 1 elements changed between repeats (max 1 ulps)"),
            std::string::npos);
  EXPECT_NE(rep["violations"][1].get<std::string>().find("a=2 claims gpu_invariant but its bits would change under sm_count=108"),
            std::string::npos);
  EXPECT_NE(rep["violations"][2].get<std::string>().find("a=1 claims config_invariant but the configs give 2 different results"),
            std::string::npos);
  EXPECT_EQ(rep["outputs"]["y"]["classes"][0][1], "outside");  // a=2 failed
  EXPECT_EQ(rep["outputs"]["y"]["max_ulps_matrix"][0][1], 1.0);
  EXPECT_EQ(rep["configs"][0]["forecast"]["y"]["changes"], false);
  EXPECT_EQ(rep["configs"][1]["forecast"]["y"]["changes"], true);
}

TEST(Drift, PerSmDwChangesUnderA108SmForecastAndFixedPartialsDoNot) {
  const std::string out = kvtest::tmpdir("drift");
  auto o = kvtest::sh(KV_BIN, "drift --op rms_norm.bwd --impl host --dtype x:bf16,w:fp32 --shape 512x32 --forecast sm_count=108 --out " + out);
  ASSERT_EQ(o.code, 0) << o.text;
  std::ifstream f(out + "/drift.json");
  auto rep = nlohmann::json::parse(f);
  EXPECT_TRUE(rep["violations"].empty());
  ASSERT_EQ(rep["configs"].size(), 54u);  // dw 3 x num_warps 6 x order 3
  int per_sm = 0;
  for (auto& c : rep["configs"]) {
    const std::string cfg = c["config"];
    const bool changes = c["forecast"]["dw"]["changes"];
    EXPECT_EQ(changes, cfg.find("dw=per_sm") != std::string::npos) << cfg;
    EXPECT_FALSE(c["forecast"]["dx"]["changes"].get<bool>()) << cfg;  // dx is per row
    EXPECT_TRUE(c["run_to_run"]["dw"]["identical"].get<bool>()) << cfg;
    per_sm += cfg.find("dw=per_sm") != std::string::npos;
  }
  EXPECT_EQ(per_sm, 18);
  // The dW strategy and the order of the partials are knobs: dW takes several values
  // across configs (dx, one bf16 rounding of a 32-term row, takes one here).
  EXPECT_GT(rep["outputs"]["dw"]["identical_groups"].size(), 1u);
  std::ifstream md(out + "/drift.md");
  std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("| `dw=per_sm,num_warps=8,order=asc` | pass,pass | run_to_run | identical | **changes**"), std::string::npos)
      << text.substr(0, 2000);
}

TEST(Drift, EachPlantedClaimBreakerIsFlaggedForItsClaimAndTheHonestImplsPass) {
  // test.breaks_<claim> moves its rstd by an ulp exactly where <claim> says the bits stay
  // (tests/test_impls.cpp); test.claims_kept makes the same four claims and keeps them.
  const std::string out = kvtest::tmpdir("drift_breakers");
  const std::string args = " --op rms_norm.fwd --dtype fp32 --shape 64x256 --repeat 2 --forecast sm_count=108 --out ";
  const std::vector<std::string> all = {"run_to_run", "config_invariant", "gpu_invariant"};
  for (const std::string& claim : all) {
    auto o = kvtest::sh(KV_TESTBIN, "drift --impl test.breaks_" + claim + args + out + "/" + claim);
    EXPECT_EQ(o.code, 1) << o.text;
    std::ifstream f(out + "/" + claim + "/drift.json");
    auto rep = nlohmann::json::parse(f);
    ASSERT_FALSE(rep["violations"].empty()) << claim;
    int own = 0;
    for (auto& v : rep["violations"]) {
      const std::string s = v.get<std::string>();
      own += s.find("claims " + claim) != std::string::npos;
      // Bits that change from run to run differ between configs and forecast too; the
      // others break their own claim alone.
      if (claim != "run_to_run") {
        EXPECT_NE(s.find("claims " + claim), std::string::npos) << s;
      }
    }
    EXPECT_GT(own, 0) << rep["violations"].dump();
  }
  auto kept = kvtest::sh(KV_TESTBIN, "drift --impl test.claims_kept" + args + out + "/kept");
  EXPECT_EQ(kept.code, 0) << kept.text;
  // The honest host impls under the same analysis: RMSNorm (no config_invariant claim: its
  // sums follow num_warps) and SwiGLU (elementwise: config_invariant claimed and kept).
  EXPECT_EQ(kvtest::sh(KV_BIN, "drift --impl host" + args + out + "/host").code, 0);
  auto glu = kvtest::sh(KV_BIN, "drift --op swiglu.fwd --impl host --dtype bf16 --shape 64x256 --repeat 2 "
                                "--forecast sm_count=108 --out " + out + "/glu");
  EXPECT_EQ(glu.code, 0) << glu.text;
  std::ifstream g(out + "/glu/drift.json");
  auto grep = nlohmann::json::parse(g);
  EXPECT_EQ(grep["configs"][0]["claims"]["c"], nlohmann::json({"run_to_run", "config_invariant", "gpu_invariant", "batch_invariant"}));
}
