// Outputs a contract declares not produced (core/contract.hpp: not_produced): an impl that
// computes only dx of rms_norm.bwd is judged on dx, dW listed as not produced; undeclared, the
// same impl fails on dW's unwritten elements; the outputs it does produce are still judged.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.hpp"
#include "test_util.hpp"

namespace {

using kvtest::Env;

const char* kCase =
    "kv1 op=rms_norm.bwd impl=test.contract_env config=num_warps:4,order:asc,dw:fixed_partials shape=7x123 "
    "dtypes=dw:bf16,dx:bf16,dy:bf16,rstd:fp32,w:bf16,x:bf16 attrs=eps:0x1.0c6f7a0b5ed8dp-20,mode:llama,offset:0x0p+0 "
    "dist=normal seed=3 gen=1";

/// The host impl's own contract for kCase, with `not_produced` set to `names`.
std::string contract_without(const std::vector<std::string>& names) {
  nlohmann::json k = kvtest::run_in_process(kv::Case::parse(kCase))["contract"];
  k["not_produced"] = names;
  return k.dump();
}

}  // namespace

TEST(NotProduced, AnImplGivingDxAloneIsJudgedOnDx) {
  Env unwritten("KV_TEST_UNWRITTEN", "dw");
  {  // negative control: undeclared, dW's unwritten elements fail the case
    const auto j = kvtest::run_in_process(kv::Case::parse(kCase));
    EXPECT_EQ(j["verdict"], "fail") << j.dump().substr(0, 1500);
    EXPECT_GT(j["outputs"]["dw"]["n_unwritten"].get<int64_t>(), 0) << j["outputs"]["dw"].dump();
  }
  Env k("KV_TEST_CONTRACT", contract_without({"dw"}));
  const auto j = kvtest::run_in_process(kv::Case::parse(kCase));
  EXPECT_EQ(j["verdict"], "pass") << j.dump().substr(0, 1500);
  EXPECT_TRUE(j["outputs"].contains("dx"));
  EXPECT_FALSE(j["outputs"].contains("dw"));
  EXPECT_EQ(j["not_produced"], nlohmann::json::array({"dw"}));
  EXPECT_EQ(j["contract"]["not_produced"], nlohmann::json::array({"dw"}));
}

TEST(NotProduced, TheOutputsItDoesProduceAreStillJudged) {
  Env unwritten("KV_TEST_UNWRITTEN", "dx");
  Env k("KV_TEST_CONTRACT", contract_without({"dw"}));
  const auto j = kvtest::run_in_process(kv::Case::parse(kCase));
  EXPECT_EQ(j["verdict"], "fail") << j.dump().substr(0, 1500);
  EXPECT_GT(j["outputs"]["dx"]["n_unwritten"].get<int64_t>(), 0);
}

TEST(NotProduced, AnImplProducingNothingChecksNothing) {
  Env k("KV_TEST_CONTRACT", contract_without({"dw", "dx"}));
  const auto j = kvtest::run_in_process(kv::Case::parse(kCase));
  EXPECT_EQ(j["verdict"], "skip") << j.dump().substr(0, 1500);
  EXPECT_NE(j.value("reason", "").find("produces none"), std::string::npos) << j.dump().substr(0, 1500);
}

TEST(NotProduced, ANameThatIsNoOutputIsAnError) {
  Env k("KV_TEST_CONTRACT", contract_without({"dy"}));  // an input
  const auto j = kvtest::run_in_process(kv::Case::parse(kCase));
  EXPECT_NE(j.value("verdict", ""), "pass") << j.dump().substr(0, 1500);
  EXPECT_NE(j.dump().find("not_produced names 'dy'"), std::string::npos) << j.dump().substr(0, 1500);
  EXPECT_THROW(kv::Contract::from_json(nlohmann::json::parse(R"({"not_produced": "dw"})")), kv::UsageError);
}
