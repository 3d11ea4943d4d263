// What a plugin's impls declare they accept (kv_impl_desc.accepts), end to end through the
// kverify binary with tests/ext/accepts_plugin.c: a cross product runs the accepted cases
// and lists the others as skips declined by kverify itself; a malformed accepts makes that
// impl alone unusable (`error` with the reason on each of its cases); a descriptor of the
// header before `accepts` still loads; fuzz draws only accepted cases, so its budget is
// spent on cases that run; and a plugin contract's rounding sites reach the reference.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "check/results.hpp"
#include "cli_util.hpp"

namespace {

using kvtest::Out;
using kvtest::sh;

std::vector<nlohmann::json> results(const std::string& dir) { return kv::read_results(dir + "/results.jsonl", ""); }

/// `kverify run` with the accepts plugin and these arguments, and its result lines.
std::vector<nlohmann::json> run_plugin(const std::string& tag, const std::string& args, Out& o) {
  const std::string out = kvtest::tmpdir(tag);
  o = sh(KV_BIN, "run --plugin " KV_ACCEPTS_PLUGIN " " + args + " --out " + out);
  return results(out);
}

}  // namespace

TEST(PluginAccepts, ACrossProductRunsWhatItAcceptsAndDeclinesTheRest) {
  Out o;
  auto rs = run_plugin("plugin_accepts", "--op softmax.bwd --impl sm_site --dtype fp32 --dtype bf16 --dtype fp16 --shape 2x40", o);
  ASSERT_EQ(rs.size(), 3u) << o.text;
  EXPECT_EQ(o.code, 0) << o.text;
  int passed = 0, skipped = 0;
  for (auto& r : rs) {
    if (r["dtype"] == "fp32") {
      passed += r["verdict"] == "pass";
      continue;
    }
    skipped += r["verdict"] == "skip";
    EXPECT_EQ(r.value("reason", "").rfind("declined by sm_site: it accepts dtypes fp32, not ", 0), 0u) << r.dump();
  }
  EXPECT_EQ(passed, 1) << o.text;
  EXPECT_EQ(skipped, 2) << o.text;
}

TEST(PluginAccepts, AMalformedAcceptsMakesThatImplUnusableAndTheOthersRun) {
  for (auto [impl, says] : std::vector<std::pair<std::string, std::string>>{
           {"bad_dtype", "accepts.dtypes: \"fp8\" is not one of the values it can hold"},
           {"bad_json", "accepts is not JSON"},
           {"bad_mode", "accepts.attrs.mode: \"mistral\" is not one of gemma, llama, none"}}) {
    Out o;
    auto rs = run_plugin("plugin_" + impl, "--op rms_norm.fwd --impl " + impl + " --impl rms_gemma --dtype fp32 --dtype bf16"
                                           " --shape 2x8 --attrs mode=gemma", o);
    ASSERT_EQ(rs.size(), 4u) << o.text;
    EXPECT_EQ(o.code, 1) << o.text;
    for (auto& r : rs) {
      if (r["impl"] == "rms_gemma") {
        EXPECT_EQ(r["verdict"], r["dtype"] == "fp32" ? "pass" : "skip") << r.dump();
        continue;
      }
      EXPECT_EQ(r["verdict"], "error") << r.dump();
      EXPECT_NE(r.value("reason", "").find("plugin impl " + impl + " of rms_norm.fwd"), std::string::npos) << r.dump();
      EXPECT_NE(r.value("reason", "").find(says), std::string::npos) << r.dump();
    }
  }
}

// rms_old's descriptor ends at `launch` (struct_size as the older header had it): its
// `accepts` field, set to garbage, is not read; its own contract() declines bf16.
TEST(PluginAccepts, ADescriptorWithoutAcceptsStillLoadsAndAcceptsEverything) {
  Out o;
  auto rs = run_plugin("plugin_old_desc", "--op rms_norm.fwd --impl rms_old --dtype fp32 --dtype bf16 --shape 2x8", o);
  ASSERT_EQ(rs.size(), 2u) << o.text;
  EXPECT_EQ(o.code, 0) << o.text;
  for (auto& r : rs) {
    EXPECT_EQ(r["verdict"], r["dtype"] == "fp32" ? "pass" : "skip") << r.dump();
    if (r["dtype"] != "fp32") EXPECT_EQ(r.value("reason", ""), "declined by rms_old: contract(): fp32 only (x)") << r.dump();
  }
}

// rms_gemma accepts fp32 and mode gemma (not the default, llama): every generated index
// draws a case it accepts, none is declined, and the budget is all cases that ran.
TEST(PluginAccepts, FuzzDrawsOnlyWhatTheImplAccepts) {
  const std::string d = kvtest::tmpdir("plugin_accepts_fuzz");
  Out o = sh(KV_BIN, "fuzz --plugin " KV_ACCEPTS_PLUGIN " --device host --op rms_norm.fwd --impl rms_gemma"
                     " --budget-cases 16 --seed 3 --curated none --max-elements 4096 --out " + d);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find(" 0 rejected"), std::string::npos) << o.text;
  const auto rs = results(d);
  ASSERT_EQ(rs.size(), 16u) << o.text;
  for (auto& r : rs) {
    EXPECT_TRUE(r["verdict"] == "pass" || r["verdict"] == "unverifiable") << r.dump();
    EXPECT_EQ(r["attrs"]["mode"], "gemma") << r.dump();
    for (auto& [t, dt] : r["dtypes"].items()) EXPECT_EQ(dt, "fp32") << t << ": " << r.dump();
    EXPECT_EQ(r["case"].get<std::string>().find(" layout="), std::string::npos) << r.dump();
    EXPECT_EQ(r["case"].get<std::string>().find(" alias="), std::string::npos) << r.dump();
  }
}

// The plugin twin of External.AWorkerContractsRoundingSitesReachTheReference: both impls
// round each dy*y to bf16; sm_site declares it and passes, sm_nosite does not and fails.
TEST(PluginAccepts, APluginContractsRoundingSitesReachTheReference) {
  Out o;
  auto rs = run_plugin("plugin_sites", "--op softmax.bwd --impl sm_site --impl sm_nosite --dtype fp32 --shape 3x37 --shape 2x200", o);
  ASSERT_EQ(rs.size(), 4u) << o.text;
  EXPECT_EQ(o.code, 1) << o.text;
  for (auto& r : rs) {
    const bool site = r["impl"] == "sm_site";
    EXPECT_EQ(r["verdict"], site ? "pass" : "fail") << r.dump();
    if (site) EXPECT_EQ(r["contract"]["rounding_sites"]["softmax.bwd_dy_y"], "bf16") << r.dump();
    else EXPECT_FALSE(r["contract"].contains("rounding_sites") && !r["contract"]["rounding_sites"].empty()) << r.dump();
  }
}

// An accepted real is compared as kverify canonicalizes it: 1e-5 and 0.00001 are one value.
TEST(PluginAccepts, AcceptedRealAttributeValuesAreComparedCanonically) {
  for (auto [eps, accepted] : std::vector<std::pair<std::string, bool>>{{"0.00001", true}, {"1e-6", false}}) {
    Out o;
    auto rs = run_plugin("plugin_eps_" + eps, "--op rms_norm.fwd --impl rms_eps --dtype fp32 --shape 2x8 --attrs eps=" + eps, o);
    ASSERT_EQ(rs.size(), 1u) << o.text;
    EXPECT_EQ(o.code, 0) << o.text;
    EXPECT_EQ(rs[0]["verdict"], accepted ? "pass" : "skip") << rs[0].dump();
    if (!accepted)
      EXPECT_EQ(rs[0].value("reason", ""), "declined by rms_eps: it accepts eps 0x1.4f8b588e368f1p-17, not " +
                                               rs[0]["attrs"]["eps"].get<std::string>()) << rs[0].dump();
  }
}

// `list --json` shows each impl's accepts (canonical) and, for a malformed one, the reason.
TEST(PluginAccepts, ListShowsWhatEachImplAccepts) {
  Out o = sh(KV_BIN, "list --json --plugin " KV_ACCEPTS_PLUGIN);
  ASSERT_EQ(o.code, 0) << o.text;
  const auto j = nlohmann::json::parse(o.text.substr(o.text.find("[\n")));
  std::map<std::string, nlohmann::json> impls;
  for (auto& op : j)
    for (auto& im : op["impls"]) impls[im["impl"].get<std::string>()] = im;
  EXPECT_EQ(impls["rms_gemma"]["accepts"],
            nlohmann::json::parse(R"({"dtypes": ["fp32"], "attrs": {"mode": ["gemma"]}, "layouts": ["contiguous"]})"));
  EXPECT_EQ(impls["rms_eps"]["accepts"], nlohmann::json::parse(R"({"attrs": {"eps": ["0x1.4f8b588e368f1p-17"]}})"));
  EXPECT_FALSE(impls["rms_old"].contains("accepts")) << impls["rms_old"].dump();
  EXPECT_NE(impls["bad_dtype"]["contract_example"].value("error", "").find("accepts.dtypes"), std::string::npos)
      << impls["bad_dtype"].dump();
}
