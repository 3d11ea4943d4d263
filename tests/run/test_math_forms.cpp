// Per-operation error and evaluation forms (issue 20, deliverable 2): math_ulps name their
// unit, an approximate division is declared only for the ops whose definition divides (and
// widens only their divisions), exp may be declared as computed through exp2, and softmax
// backward's distributed form is a declared form. Each claim has its negative control.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/sites.hpp"
#include "reference/policy.hpp"
#include "run/suite.hpp"
#include "test_util.hpp"

namespace {

using kvtest::Env;

kv::Case one_case(const std::string& op, const std::string& impl, const std::string& shape, uint64_t seed = 3,
                  const std::string& dtype = "fp32") {
  kv::SuiteEntry e;
  e.ops = {op}, e.impls = {impl}, e.dtypes = {dtype}, e.shapes = {shape}, e.seeds = {seed};
  return kv::expand_suite({e}, "host").at(0);
}

/// How much wider the enclosures of `wide` are than those of `base`, from the outputs' worst
/// error-to-half-width ratios (the same impl output judged twice): the largest quotient.
double widening(const nlohmann::json& wide, const nlohmann::json& base) {
  double r = 0;
  for (auto& [name, o] : wide["outputs"].items()) {
    const double b = base["outputs"][name].value("max_ratio", 0.0), w = o.value("max_ratio", 0.0);
    if (b > 0) r = std::max(r, w > 0 ? b / w : 1e300);
  }
  return r;
}

TEST(MathUnits, UlpsNameTheirUnitAndRoundTrip) {
  auto k = kv::Contract::from_json(
      {{"math_ulps", {{"rsqrt", 2}, {"exp", {{"ulps", 1}, {"in", "bf16"}, {"via", "exp2"}}}, {"div", {{"ulps", 0.5}, {"via", "rcp"}}}}}});
  EXPECT_EQ(k.math("exp").in, kv::DType::bf16);
  EXPECT_EQ(k.math("exp").via, "exp2");
  const auto j = k.to_json()["math_ulps"];
  EXPECT_EQ(j["rsqrt"], (nlohmann::json{{"ulps", 2.0}, {"in", "fp32"}}));  // a bare number is fp32 ulps
  EXPECT_EQ(j["div"]["via"], "rcp");
  EXPECT_EQ(kv::Contract::from_json(k.to_json()).to_json(), k.to_json());
  EXPECT_NE(kv::Contract::from_json({{"math_ulps", {{"exp", 1}}}}).numerics_hash(), k.numerics_hash());
  for (auto bad : {nlohmann::json{{"rsqrt", {{"ulps", 1}, {"via", "exp2"}}}}, nlohmann::json{{"exp", {{"ulps", 1}, {"unit", "fp32"}}}},
                   nlohmann::json{{"exp", {{"in", "fp32"}}}}, nlohmann::json{{"exp", {{"ulps", -1}}}},
                   nlohmann::json{{"exp", {{"ulps", 1}, {"in", "fp64"}}}}})
    EXPECT_THROW(kv::Contract::from_json({{"math_ulps", bad}}), kv::UsageError) << bad.dump();
}

// A declared error of relative size 1 or more would leave every element unbounded (a case that
// checks nothing): refused, in either unit.
TEST(MathUnits, AVacuousErrorIsRefused) {
  for (auto bad : {nlohmann::json(1e30), nlohmann::json(8388608.0), nlohmann::json{{"ulps", 128}, {"in", "bf16"}},
                   nlohmann::json{{"ulps", 1e300}, {"via", "rcp"}}})
    EXPECT_THROW(kv::Contract::from_json({{"math_ulps", {{"div", bad}}}}), kv::UsageError) << bad.dump();
  EXPECT_NO_THROW(kv::Contract::from_json({{"math_ulps", {{"exp", 8388607.0}, {"div", {{"ulps", 127}, {"in", "bf16"}}}}}}));
}

// Determinism claims and not_produced must name outputs of the op: a typo (dX) is an error in
// a run and exit 2 in an audit, never silently dropped claims.
TEST(Contracts, ClaimsNameOutputsOfTheOpAndAuditRefusesAnInvalidContract) {
  const kv::Case c = one_case("softmax.bwd", "test.contract_env", "4x40");
  nlohmann::json k = kvtest::run_in_process(c)["contract"];
  k["determinism"] = {{"dX", {"run_to_run"}}};
  {
    Env e("KV_TEST_CONTRACT", k.dump());
    const auto j = kvtest::run_in_process(c);
    EXPECT_EQ(j["verdict"], "error");
    EXPECT_NE(j.value("reason", "").find("determinism names 'dX', not an output of softmax.bwd (dx)"), std::string::npos)
        << j.value("reason", "");
  }
  for (auto bad : {nlohmann::json{{"determinism", {{"dX", {"run_to_run"}}}}}, nlohmann::json{{"forms", {{"softmax.bwd_dx", "bogus"}}}},
                   nlohmann::json{{"math_ulps", {{"div", 1}}}}}) {
    nlohmann::json kk = kvtest::run_in_process(c)["contract"];
    kk.update(bad);
    Env e("KV_TEST_CONTRACT", kk.dump());
    const auto o = kvtest::sh(KV_TESTBIN, "audit --device host --op softmax.bwd --impl test.contract_env --shape 4x40 --out " +
                                              kvtest::tmpdir("audit_bad"));
    EXPECT_EQ(o.code, 2) << bad.dump() << "\n" << o.text;
  }
}

// An ulp of bf16 is 2^16 ulps of fp32: the same error declared in either unit encloses the same.
TEST(MathUnits, AnUlpOfBf16IsTwoToTheSixteenUlpsOfFp32) {
  kv::Contract a, b;
  a.math_ulps["exp"] = 65536.0;
  kv::MathError e(1.0);
  e.in = kv::DType::bf16;
  b.math_ulps["exp"] = e;
  for (double x : {-3.0, 0.25, 7.5}) {
    const kv::Enc ea = kv::EncPolicy{&a}.exp(kv::enc_exact(x)), eb = kv::EncPolicy{&b}.exp(kv::enc_exact(x));
    EXPECT_NEAR(kv::enc_hi(ea) - kv::enc_lo(ea), kv::enc_hi(eb) - kv::enc_lo(eb), 1e-12 * std::exp(x)) << x;
  }
}

// exp via exp2: an impl computing exp2(fl32(x * fl32(log2 e))) rounded to fp32 lies in the
// enclosure of a contract declaring {"exp": {"ulps": 1, "via": "exp2"}} for every x, and outside
// the direct form's 1 ulp for large |x| (the argument's rounding costs |x| ulps).
TEST(MathUnits, ExpViaExp2EnclosesTheArgumentRounding) {
  kv::Contract direct, via;
  direct.math_ulps["exp"] = 1.0;
  kv::MathError e(1.0);
  e.via = "exp2";
  via.math_ulps["exp"] = e;
  const float log2e = static_cast<float>(1.4426950408889634);
  int outside_direct = 0;
  for (int i = 0; i <= 4000; ++i) {
    const double x = static_cast<float>(-87.0 + i * 0.02173913);
    const float t = static_cast<float>(x) * log2e;  // fp32 product
    const double y = static_cast<float>(std::exp2(static_cast<double>(t)));
    const kv::Enc ev = kv::EncPolicy{&via}.exp(kv::enc_exact(x)), ed = kv::EncPolicy{&direct}.exp(kv::enc_exact(x));
    EXPECT_TRUE(kv::enc_lo(ev) <= y && y <= kv::enc_hi(ev)) << x;
    outside_direct += !(kv::enc_lo(ed) <= y && y <= kv::enc_hi(ed));
  }
  EXPECT_GT(outside_direct, 100) << "the direct form should miss exp2's argument rounding at large |x|";
}

// "div" widens exactly the ops whose definition divides (approximate_ops_of, as list --json
// says); declaring it for another op is an error.
TEST(MathDiv, DeclaredDivisionWidensEveryDividingOpAndIsRefusedElsewhere) {
  for (const kv::OpBinding* op : kv::registry().ops()) {
    SCOPED_TRACE(op->name());
    std::string shape = "4x40";
    if (op->name().rfind("fused_linear", 0) == 0) shape = "8x16x40";
    if (op->name().rfind("rope.", 0) == 0) shape = "1x4x2x8";
    if (op->name().rfind("rope_table", 0) == 0) shape = "16x8";
    const kv::Case c = one_case(op->name(), "test.contract_env", shape);
    const nlohmann::json plain = kvtest::run_in_process(c);
    ASSERT_EQ(plain["verdict"], "pass") << plain.dump().substr(0, 600);
    nlohmann::json k = plain["contract"];
    k["math_ulps"]["div"] = {{"ulps", 4096}, {"in", "fp32"}};
    Env env("KV_TEST_CONTRACT", k.dump());
    const auto j = kvtest::run_in_process(c);
    if (kv::approximate_ops_of(op->name()).empty()) {
      EXPECT_EQ(j["verdict"], "error");
      EXPECT_NE(j.value("reason", "").find("never divides"), std::string::npos) << j.value("reason", "");
    } else {
      EXPECT_EQ(j["verdict"], "pass") << j.dump().substr(0, 600);
      EXPECT_GT(widening(j, plain), 2.0) << "no output's enclosure widened by the declared division";
    }
  }
}

// A division through a bf16 reciprocal: a fault where undeclared, a pass where the contract
// declares it in bf16 ulps, and a fail where it declares the same number of fp32 ulps.
TEST(MathDiv, ApproximateReciprocalPassesOnlyWhenDeclaredInItsUnit) {
  int bug_flagged = 0, fp32_flagged = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    auto run = [&](const char* impl) { return kvtest::run_in_process(one_case("softmax.fwd", impl, "6x200", seed)); };
    bug_flagged += run("host.bug.rcp_bf16")["verdict"] == "fail";
    fp32_flagged += run("test.softmax.rcp_bf16_fp32_units")["verdict"] == "fail";
    const auto ok = run("test.softmax.rcp_bf16_declared");
    EXPECT_EQ(ok["verdict"], "pass") << ok.dump().substr(0, 600);
  }
  EXPECT_EQ(bug_flagged, 4);
  EXPECT_EQ(fp32_flagged, 4);
}

// softmax backward's distributed form dx = r(dy*y) - y*t (ATen's): declared with the site it
// passes; the same impl under a contract naming only the site (factored form) fails, as does
// the factored impl under a contract naming the distributed form.
TEST(Forms, SoftmaxBackwardDistributedFormIsHonoured) {
  const kv::Case c = one_case("softmax.bwd", "test.contract_env", "6x200");
  nlohmann::json site = kvtest::run_in_process(c)["contract"];
  site["rounding_sites"] = {{"softmax.bwd_dy_y", "bf16"}};
  nlohmann::json dist = site;
  dist["forms"] = {{"softmax.bwd_dx", "distributed"}};
  {
    Env e("KV_TEST_CONTRACT", dist.dump());
    const auto j = kvtest::run_in_process(c);
    EXPECT_EQ(j["verdict"], "pass") << j.dump().substr(0, 600);
    EXPECT_EQ(j["contract"]["forms"]["softmax.bwd_dx"], "distributed");
  }
  {
    Env e("KV_TEST_CONTRACT", site.dump()), r("KV_TEST_RUN_CONTRACT", dist.dump());
    EXPECT_EQ(kvtest::run_in_process(c)["verdict"], "fail");
  }
  {
    Env e("KV_TEST_CONTRACT", dist.dump()), r("KV_TEST_RUN_CONTRACT", site.dump());
    EXPECT_EQ(kvtest::run_in_process(c)["verdict"], "fail");
  }
  // No site: both forms have the same exact value; the distributed impl passes under its form.
  nlohmann::json plain = kvtest::run_in_process(c)["contract"];
  plain["forms"] = {{"softmax.bwd_dx", "distributed"}};
  Env e("KV_TEST_CONTRACT", plain.dump());
  EXPECT_EQ(kvtest::run_in_process(c)["verdict"], "pass");
}

TEST(Forms, UnknownFormsAndChoicesAreErrorsAndListJsonNamesThem) {
  const kv::Case c = one_case("softmax.bwd", "test.contract_env", "4x40");
  for (auto [forms, why] : {std::pair{nlohmann::json{{"softmax.bwd_dx", "sideways"}}, "no choice 'sideways'"},
                            std::pair{nlohmann::json{{"softmax.fwd_y", "factored"}}, "not one softmax.bwd names"}}) {
    nlohmann::json k = kvtest::run_in_process(c)["contract"];
    k["forms"] = forms;
    Env e("KV_TEST_CONTRACT", k.dump());
    const auto j = kvtest::run_in_process(c);
    EXPECT_EQ(j["verdict"], "error");
    EXPECT_NE(j.value("reason", "").find(why), std::string::npos) << j.value("reason", "");
  }
  const auto o = kvtest::sh(KV_BIN, "list --json");
  ASSERT_EQ(o.code, 0) << o.text;
  int forms = 0, divs = 0;
  for (auto& op : nlohmann::json::parse(o.text)) {
    for (auto& f : op["forms"]) forms += f["name"] == "softmax.bwd_dx" && f["default"] == "factored";
    for (auto& f : op["math_functions"])
      if (f["name"] == "div") {
        ++divs;
        EXPECT_FALSE(f["required"].get<bool>());
        EXPECT_EQ(f["via"], nlohmann::json::array({"rcp"}));
      }
  }
  EXPECT_EQ(forms, 1);
  EXPECT_GE(divs, 10);
}

}  // namespace
