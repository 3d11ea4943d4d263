// Every op's host impl: sound (passes for random valid cases, a RapidCheck property per
// op) and sensitive (each planted fault of each op is flagged on at least one of a fixed
// set of cases, while the correct impl passes those same cases).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstdio>

#include "op_cases.hpp"
#include "test_util.hpp"

namespace {

void check_sound(const std::string& op) {
  kv::Case c = kvtest::gen_op_case(op);
  auto j = kvtest::run_in_process(c);
  RC_LOG() << j.dump().substr(0, 3000) << "\n";
  RC_ASSERT(j["verdict"] == (kvtest::has_empty_output(j) ? "skip" : "pass"));
}

}  // namespace

RC_GTEST_PROP(OpsSoundness, SwigluFwd, ()) { check_sound("swiglu.fwd"); }
RC_GTEST_PROP(OpsSoundness, SwigluBwd, ()) { check_sound("swiglu.bwd"); }
RC_GTEST_PROP(OpsSoundness, GegluFwd, ()) { check_sound("geglu.fwd"); }
RC_GTEST_PROP(OpsSoundness, GegluBwd, ()) { check_sound("geglu.bwd"); }
RC_GTEST_PROP(OpsSoundness, SoftmaxFwd, ()) { check_sound("softmax.fwd"); }
RC_GTEST_PROP(OpsSoundness, SoftmaxBwd, ()) { check_sound("softmax.bwd"); }
RC_GTEST_PROP(OpsSoundness, LayerNormFwd, ()) { check_sound("layer_norm.fwd"); }
RC_GTEST_PROP(OpsSoundness, LayerNormBwd, ()) { check_sound("layer_norm.bwd"); }
RC_GTEST_PROP(OpsSoundness, CrossEntropyFwd, ()) { check_sound("cross_entropy.fwd"); }
RC_GTEST_PROP(OpsSoundness, CrossEntropyBwd, ()) { check_sound("cross_entropy.bwd"); }
RC_GTEST_PROP(OpsSoundness, RopeFwd, ()) { check_sound("rope.fwd"); }
RC_GTEST_PROP(OpsSoundness, RopeBwd, ()) { check_sound("rope.bwd"); }
RC_GTEST_PROP(OpsSoundness, RopeTable, ()) { check_sound("rope_table.fwd"); }
RC_GTEST_PROP(OpsSoundness, FlceFwd, ()) { check_sound("fused_linear_cross_entropy.fwd"); }
RC_GTEST_PROP(OpsSoundness, FlceBwd, ()) { check_sound("fused_linear_cross_entropy.bwd"); }

namespace {

/// Cases that give each fault a chance: fp32 and bf16 inputs (bf16 outputs for truncation),
/// the attributes the faults ignore switched on.
std::vector<kv::Case> sensitivity_cases(const std::string& op) {
  using kvtest::op_case;
  std::vector<kv::Case> v;
  const std::string base = op.substr(0, op.find('.'));
  std::map<std::string, std::string> a;
  std::vector<int64_t> shape = {4, 300};
  if (base == "cross_entropy" || base == "fused_linear_cross_entropy")
    a = {{"label_smoothing", "0.1"}, {"z_loss", "0.01"}, {"softcap", "3"}, {"reduction", "none"}};
  if (base == "fused_linear_cross_entropy") a["bias"] = "true", a["grad_rounding"] = "x_dtype", shape = {16, 64, 100};
  if (base == "cross_entropy") shape = {16, 300};
  if (base == "rope") shape = {2, 30, 2, 64};
  if (base == "rope_table") shape = {64, 64}, a = {{"pos_offset", "100"}};
  for (const char* dt : {"fp32", "bf16"})
    for (const char* dist : {"normal", "large"}) {
      if (base == "rope") {
        for (const char* pos : {"1d", "3d"}) {
          auto aa = a;
          aa["positions"] = pos;
          v.push_back(op_case(op, shape, dt, aa, dist));
        }
      } else {
        v.push_back(op_case(op, shape, dt, a, dist));
      }
    }
  return v;
}

}  // namespace

TEST(OpsSensitivity, EveryPlantedFaultIsFlagged) {
  std::printf("| op | fault | cases flagged |\n|---|---|---|\n");
  for (const auto& op : kvtest::new_ops()) {
    int faults = 0;
    auto cases = sensitivity_cases(op);
    for (auto& c : cases) {
      auto ok = kvtest::run_in_process(c);
      ASSERT_EQ(ok["verdict"], "pass") << c.str() << " " << ok.dump().substr(0, 2000);
    }
    for (const kv::Impl* im : kv::registry().impls(op)) {
      if (im->name().rfind("host.bug.", 0) != 0) continue;
      ++faults;
      int flagged = 0;
      for (auto c : cases) {
        c.impl = im->name();
        if (kvtest::run_in_process(c)["verdict"] == "fail") ++flagged;
      }
      std::printf("| %s | %s | %d/%zu |\n", op.c_str(), im->name().c_str() + 9, flagged, cases.size());
      EXPECT_GT(flagged, 0) << op << " " << im->name() << " never flagged";
    }
    EXPECT_GE(faults, 3) << op;
  }
}

// NaN and ±inf inputs (the nan_inject and inf_inject distributions): the defined
// computation follows IEEE rules, so the reference requires NaN where a NaN input reaches
// an output, and the host impls (which compute the definition) pass with NaN expected there.
TEST(OpsSpecialValues, NanInputsRequireNanWhereTheyReach) {
  for (const auto& op : kvtest::new_ops()) {
    const std::string base = op.substr(0, op.find('.'));
    if (base == "rope_table") continue;  // no drawn inputs
    std::vector<int64_t> shape = {8, 300};
    if (base == "rope") shape = {2, 9, 2, 64};
    if (base == "fused_linear_cross_entropy") shape = {12, 64, 30};
    int64_t expected = 0;
    for (const char* dt : {"fp32", "bf16"})
      for (const char* dist : {"nan_inject", "inf_inject"}) {
        auto j = kvtest::run_in_process(kvtest::op_case(op, shape, dt, {}, dist, 3));
        EXPECT_NE(j["verdict"], "fail") << op << " " << dt << " " << dist << " " << j.dump().substr(0, 2000);
        EXPECT_NE(j["verdict"], "error") << op << " " << dt << " " << dist << " " << j.dump().substr(0, 2000);
        if (std::string(dist) == "nan_inject") EXPECT_EQ(j["verdict"], "pass") << op << " " << dt;
        for (auto& [name, o] : j["outputs"].items()) expected += o["n_nan_expected"].get<int64_t>();
      }
    EXPECT_GT(expected, 0) << op << ": no output element required NaN";
  }
}
