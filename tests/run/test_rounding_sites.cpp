// Rounding sites (core/sites.hpp, issue 20 deliverable 1): every declarable site of every op
// is honoured by the definition. An impl that rounds there under a contract that says so
// passes; the same contract over an impl that does not round there fails (each site's
// negative control), as does declaring a site the op does not have. Sites round-trip through
// contract JSON and are listed per op by `kverify list --json`.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/sites.hpp"
#include "run/suite.hpp"
#include "test_util.hpp"

namespace {

using kvtest::Env;

kv::Case site_case(const std::string& op, const std::string& shape) {
  kv::SuiteEntry e;
  e.ops = {op}, e.impls = {"test.contract_env"}, e.dtypes = {"fp32"}, e.shapes = {shape}, e.seeds = {3};
  auto cases = kv::expand_suite({e}, "host");
  EXPECT_EQ(cases.size(), 1u);
  return cases.at(0);
}

/// The host impl's own contract for c with `sites` declared.
std::string contract_with(const kv::Case& c, const nlohmann::json& sites) {
  nlohmann::json k = kvtest::run_in_process(c)["contract"];
  k["rounding_sites"] = sites;
  return k.dump();
}

struct SiteCase {
  const char* op;
  const char* site;
  const char* shape;
};

const SiteCase kSites[] = {
    {"rms_norm.bwd", "rms_norm.m", "16x300"},          {"rms_norm.bwd", "rms_norm.dw_product", "256x64"},
    {"softmax.bwd", "softmax.bwd_dy_y", "16x300"},     {"swiglu.fwd", "glu.act", "16x300"},
    {"swiglu.bwd", "glu.act", "16x300"},               {"geglu.fwd", "glu.act", "16x300"},
    {"geglu.bwd", "glu.act", "16x300"},                {"fused_linear_cross_entropy.bwd", "flce.grad", "16x32x64"},
    {"cross_entropy.fwd", "ce.row_loss", "16x300"},    {"fused_linear_cross_entropy.fwd", "ce.row_loss", "16x32x64"},
    {"cross_entropy.bwd", "ce.grad", "16x300"},        {"swiglu.bwd", "glu.dc_b", "16x300"},
    {"geglu.bwd", "glu.dc_b", "16x300"},
    {"fused_linear_cross_entropy.fwd", "flce.logits", "16x32x64"},
    {"fused_linear_cross_entropy.bwd", "flce.logits", "16x32x64"},
};

}  // namespace

TEST(RoundingSites, EveryDeclarableSiteIsHonouredByItsDefinition) {
  int declarable = 0;
  for (auto& s : kv::site_defs())
    if (s.kind != "mandated") ++declarable;
  int covered = 0;
  std::set<std::string> seen;
  for (const SiteCase& s : kSites) {
    SCOPED_TRACE(std::string(s.op) + " " + s.site);
    const kv::Case c = site_case(s.op, s.shape);
    Env k("KV_TEST_CONTRACT", contract_with(c, {{s.site, "bf16"}}));
    const auto j = kvtest::run_in_process(c);
    EXPECT_EQ(j["verdict"], "pass") << j.dump().substr(0, 1200);
    EXPECT_EQ(j["contract"]["rounding_sites"][s.site], "bf16");
    Env ignore("KV_TEST_IGNORE_SITES", "1");  // negative control: declared, not done
    const auto bad = kvtest::run_in_process(c);
    EXPECT_EQ(bad["verdict"], "fail") << bad.dump().substr(0, 1200);
    covered += seen.insert(s.site).second;
  }
  EXPECT_EQ(covered, declarable) << "a declarable site without a test case here";
}

TEST(RoundingSites, ASiteTheOpDoesNotHaveIsAnError) {
  const kv::Case c = site_case("softmax.fwd", "8x64");
  for (const char* site : {"rms_norm.dw_product", "no.such_site"}) {
    Env k("KV_TEST_CONTRACT", contract_with(c, {{site, "bf16"}}));
    const auto j = kvtest::run_in_process(c);
    EXPECT_EQ(j["verdict"], "error") << j.dump().substr(0, 800);
    EXPECT_NE(j.value("reason", "").find("is not one softmax.fwd declares (declarable: none)"), std::string::npos)
        << j.value("reason", "");
  }
  const kv::Case r = site_case("rms_norm.fwd", "8x64");
  Env k("KV_TEST_CONTRACT", contract_with(r, {{"rms_norm.xr", "bf16"}}));  // mandated: op semantics
  EXPECT_EQ(kvtest::run_in_process(r)["verdict"], "error");
}

TEST(RoundingSites, RoundTripThroughContractJsonAndChangeTheHashes) {
  kv::Contract k;
  k.reductions["row"] = {4, 2, 0, std::nullopt};
  const uint64_t plain = k.numerics_hash();
  EXPECT_FALSE(k.to_json().contains("rounding_sites"));  // old contracts keep their JSON and hashes
  k.rounding_sites["softmax.bwd_dy_y"] = kv::DType::bf16;
  const kv::Contract back = kv::Contract::from_json(k.to_json());
  EXPECT_EQ(back.rounding_sites, k.rounding_sites);
  EXPECT_NE(k.numerics_hash(), plain);
  EXPECT_THROW(kv::Contract::from_json({{"rounding_sites", {{"glu.act", "fp8"}}}}), kv::UsageError);
  EXPECT_THROW(kv::Contract::from_json({{"rounding_sites", {"glu.act"}}}), kv::UsageError);
  kv::Case c = site_case("softmax.bwd", "8x64");
  const uint64_t id = c.input_id();
  EXPECT_NE(kv::with_sites(c, k).input_id(), id);  // a reference of its own
  EXPECT_EQ(kv::with_sites(c, k).str(), c.str());  // not in the case string
}

TEST(RoundingSites, ListJsonNamesEachOpsSites) {
  const auto o = kvtest::sh(KV_BIN, "list --json");
  ASSERT_EQ(o.code, 0) << o.text;
  const auto j = nlohmann::json::parse(o.text);
  std::map<std::string, std::set<std::string>> seen;
  for (auto& op : j) {
    ASSERT_TRUE(op.contains("rounding_sites")) << op["op"];
    for (auto& s : op["rounding_sites"]) seen[op["op"]].insert(s["name"].get<std::string>());
  }
  for (auto& s : kv::site_defs())
    for (auto& op : s.ops) EXPECT_TRUE(seen[op].count(s.name)) << op << " " << s.name;
  for (auto& op : j)
    if (op["op"] == "rms_norm.bwd")
      for (auto& s : op["rounding_sites"])
        if (s["name"] == "rms_norm.m") EXPECT_EQ(s["deprecated_attribute"], "m_rounding=x_dtype");
}

// Deliverable 2's listing: the math functions each op's definition calls, as `list --json`
// gives them (math_functions_of), held to what the definition really calls: a contract
// declaring exactly those passes, and one missing any of them is an error.
TEST(MathFunctions, TheListingIsWhatEachDefinitionCalls) {
  for (const kv::OpBinding* op : kv::registry().ops()) {
    SCOPED_TRACE(op->name());
    kv::SuiteEntry e;
    e.ops = {op->name()}, e.impls = {"test.contract_env"}, e.dtypes = {"fp32"}, e.seeds = {3};
    if (op->name().rfind("cross_entropy", 0) == 0) e.attrs["softcap"] = {"30"};
    if (op->name().rfind("fused_linear", 0) == 0) e.attrs["softcap"] = {"30"}, e.shapes = {"8x16x40"};
    if (op->name().rfind("rope.", 0) == 0) e.shapes = {"1x4x2x8"};
    if (op->name().rfind("rope_table", 0) == 0) e.shapes = {"16x8"};
    if (e.shapes.empty()) e.shapes = {"4x40"};
    const kv::Case c = kv::expand_suite({e}, "host").at(0);
    nlohmann::json k = kvtest::run_in_process(c)["contract"];
    const std::vector<std::string> fns = kv::math_functions_of(op->name());
    k["math_ulps"] = nlohmann::json::object();
    for (auto& f : fns) k["math_ulps"][f] = 1.0;
    {
      Env env("KV_TEST_CONTRACT", k.dump());
      const auto j = kvtest::run_in_process(c);
      EXPECT_EQ(j["verdict"], "pass") << j.dump().substr(0, 800);
    }
    for (auto& f : fns) {
      nlohmann::json less = k;
      less["math_ulps"].erase(f);
      Env env("KV_TEST_CONTRACT", less.dump());
      const auto j = kvtest::run_in_process(c);
      EXPECT_EQ(j["verdict"], "error") << f;
      EXPECT_NE(j.value("reason", "").find("'" + f + "'"), std::string::npos) << j.value("reason", "");
    }
  }
}
