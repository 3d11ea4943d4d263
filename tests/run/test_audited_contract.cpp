// Audited contracts (run/audit.hpp audited_contract, `--contract audited`): the reduction
// shapes the audit measures replace the declared ones in the enclosure, each result line says
// which axes were measured, and the planted kernel bug host.bug.dw_product_rounded (dW's
// products rounded to bf16 under an "any order" contract) passes as declared and fails audited.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "check/results.hpp"
#include "cli_util.hpp"

namespace {

/// The first result line of `bin run <args>` into a fresh folder, which must exit want_exit.
nlohmann::json first_result(const std::string& bin, const std::string& args, int want_exit) {
  const std::string dir = kvtest::tmpdir("audited");
  const auto o = kvtest::sh(bin, "run " + args + " --quiet --out " + dir);
  EXPECT_EQ(o.code, want_exit) << o.text;
  const auto rs = kv::read_results(dir + "/results.jsonl");
  EXPECT_FALSE(rs.empty()) << o.text;
  return rs.empty() ? nlohmann::json::object() : rs.front();
}

/// rms_norm.bwd of `impl` at 4096x256 (contract: declared or audited).
nlohmann::json run_one(const std::string& bin, const std::string& impl, const std::string& contract, int want_exit) {
  return first_result(bin, "--impl " + impl + " --contract " + contract +
                               " --device host --op rms_norm.bwd --dtype x:bf16,w:bf16,dy:bf16,dw:fp32 --shape 4096x256",
                      want_exit);
}

double half_width(const nlohmann::json& j) { return j["outputs"]["dw"]["bound"]["contract_half_width"].get<double>(); }

}  // namespace

TEST(AuditedContract, TheCorrectHostImplPassesWithEveryProbedAxisMeasured) {
  const auto j = run_one(KV_BIN, "host", "audited", 0);
  EXPECT_EQ(j["verdict"], "pass") << j.dump().substr(0, 1500);
  EXPECT_EQ(j["contract_source"]["row"], "measured") << j["contract_source"];
  EXPECT_EQ(j["contract_source"]["rows"], "measured") << j["contract_source"];
  // The host sums' first add into a zero lane is exact: fewer roundings than declared (the
  // exact counts are tests/run/test_audit.cpp's).
  for (const char* axis : {"row", "rows"})
    EXPECT_LT(j["contract"]["reductions"][axis]["n_eff"].get<int64_t>(),
              j["contract_declared"]["reductions"][axis]["n_eff"].get<int64_t>()) << axis;
  EXPECT_NE(j["replay"].get<std::string>().find("--contract audited"), std::string::npos) << j["replay"];
}

TEST(AuditedContract, APlantedBugThatAnyOrderMissesFailsAudited) {
  const auto any = run_one(KV_TESTBIN, "host.bug.dw_product_rounded", "declared", 0);
  const auto aud = run_one(KV_TESTBIN, "host.bug.dw_product_rounded", "audited", 1);
  EXPECT_EQ(any["verdict"], "pass") << any.dump().substr(0, 1500);
  EXPECT_EQ(any["contract"]["reductions"]["rows"]["serial"], 4096);
  EXPECT_EQ(aud["verdict"], "fail") << aud.dump().substr(0, 1500);
  EXPECT_EQ(aud["contract_source"]["rows"], "measured");
  EXPECT_EQ(aud["outputs"]["dw"]["verdict"], "fail");
  EXPECT_EQ(aud["outputs"]["dx"]["verdict"], "pass");
  // 64 partials of 64 rows: 63 + 63 roundings measured, against 4096 declared.
  EXPECT_EQ(aud["contract"]["reductions"]["rows"]["n_eff"], 126) << aud["contract"];
  EXPECT_LT(half_width(aud) * 10, half_width(any)) << half_width(aud) << " vs " << half_width(any);
}

TEST(AuditedContract, ASumThatDropsTermsFailsTheCaseAudited) {
  const auto j = first_result(
      KV_TESTBIN, "--impl host.bug.drop_last_term --contract audited --device host --op softmax.bwd --shape 16x300", 1);
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_NE(j.value("reason", "").find("audit: the impl's sums drop or double terms"), std::string::npos) << j["reason"];
}

TEST(AuditedContract, AnUnknownContractModeIsAUsageError) {
  const auto o = kvtest::sh(KV_BIN, "run --impl host --op softmax.fwd --contract audit --device host --out " + kvtest::tmpdir("audited"));
  EXPECT_EQ(o.code, 2) << o.text;
}
