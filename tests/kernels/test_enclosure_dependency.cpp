// Enclosures that remember what independent intervals forget (GPU soundness campaign,
// seed 18018): a square is never below 0, and a max-subtracted exp sum holds exp(0). Under
// the CUDA impls' contracts, copied from that campaign's result lines, the host impl's
// outputs were unverifiable; now they are checked: they pass, and a planted NaN fails
// where it used to be admitted (ContractFromEnv, tests/test_impls.cpp).
#include <gtest/gtest.h>

#include <cstdlib>

#include "test_util.hpp"

namespace {

using kvtest::Env;

/// Sets an environment variable for one scope.
/// FLCE with confident logits (|z| ~ 1.1e5) under cuda's contract: products summed over
/// 174 steps give the logits a radius of about 4, z - max z was [-8, 8] and row 367's
/// d = sum exp(z - m) reached 0.
const char* kFlceCase =
    "kv1 op=fused_linear_cross_entropy.fwd impl=test.contract_env config=num_warps:32 shape=511x23x4 "
    "dtypes=bias:bf16,loss:fp32,target:i32,weight:bf16,x:bf16 attrs=bias:true,grad_rounding:fp32,ignore_index:1,"
    "label_smoothing:0x0p+0,reduction:none,softcap:0x0p+0,z_loss:0x1.47ae147ae147bp-7 dist=confident_margin "
    "seed=1736115091 gen=1";
const char* kFlceCuda =
    R"({"acc": "fp32", "determinism": {"loss": ["run_to_run"]}, "fma": true, "ftz": true,
        "math_ulps": {"exp": 2.0, "log": 1.0, "tanh": 2.0},
        "reductions": {"h": {"acc": "fp32", "depth": 128, "n_eff": 174, "partials": 0, "serial": 46},
                       "row": {"acc": "fp32", "depth": 0, "n_eff": 4, "partials": 0, "serial": 4},
                       "rows": {"acc": "fp32", "depth": 8, "n_eff": 10, "partials": 0, "serial": 2},
                       "v": {"acc": "fp32", "depth": 128, "n_eff": 136, "partials": 0, "serial": 8}},
        "u": 5.960464477539063e-08})";

/// The same with label smoothing and logits of radius ~23 (|z| ~ 1.9e5): d's bounds
/// [0.99, 1.3e20] have a midpoint form whose lower end rounds to 0, so log d is taken from
/// the bounds (row 92).
const char* kFlceWideCase =
    "kv1 op=fused_linear_cross_entropy.fwd impl=test.contract_env config=num_warps:2 shape=264x67x3 "
    "dtypes=bias:bf16,loss:fp32,target:i32,weight:bf16,x:bf16 attrs=bias:false,grad_rounding:x_dtype,"
    "ignore_index:-100,label_smoothing:0x1.999999999999ap-4,reduction:none,softcap:0x0p+0,z_loss:0x0p+0 "
    "dist=confident_margin seed=1352196617 gen=1";
const char* kFlceWideCuda =
    R"({"acc": "fp32", "determinism": {"loss": ["run_to_run"]}, "fma": true, "ftz": true,
        "math_ulps": {"exp": 2.0, "log": 1.0, "tanh": 2.0},
        "reductions": {"h": {"acc": "fp32", "depth": 128, "n_eff": 262, "partials": 0, "serial": 134},
                       "row": {"acc": "fp32", "depth": 0, "n_eff": 3, "partials": 0, "serial": 3},
                       "rows": {"acc": "fp32", "depth": 8, "n_eff": 10, "partials": 0, "serial": 2},
                       "v": {"acc": "fp32", "depth": 128, "n_eff": 134, "partials": 0, "serial": 6}},
        "u": 5.960464477539063e-08})";

/// LayerNorm of rows of 256 with eps 1e-12 under cuda's contract: the variance's enclosure
/// reached below 0 ((x - mean)^2 as a product of two intervals), so rstd was unbounded.
const char* kLnCase =
    "kv1 op=layer_norm.fwd impl=test.contract_env config=num_warps:1 shape=19x2047 "
    "dtypes=b:bf16,mean:fp32,rstd:fp32,w:bf16,x:bf16,y:bf16 attrs=eps:0x1.19799812dea11p-40,stat_dtype:fp32 "
    "dist=big_mean seed=259573328 gen=1";
const char* kLnCuda =
    R"({"acc": "fp32", "determinism": {}, "fma": true, "ftz": false, "math_ulps": {"rsqrt": 2.0},
        "reductions": {"row": {"acc": "fp32", "depth": 5, "n_eff": 69, "partials": 0, "serial": 64}},
        "u": 5.960464477539063e-08})";

nlohmann::json run(const char* c, const char* contract) {
  Env e("KV_TEST_CONTRACT", contract);
  return kvtest::run_in_process(kv::Case::parse(c));
}

}  // namespace

TEST(EnclosureDependency, MaxSubtractedSumHoldsExpZero) {
  const auto j = run(kFlceCase, kFlceCuda);
  const auto& loss = j["outputs"]["loss"];
  EXPECT_EQ(j["verdict"], "pass") << loss.dump().substr(0, 1500);
  EXPECT_EQ(loss["n_unverifiable"], 0);
  Env nan("KV_TEST_NAN_AT", "367");
  const auto f = run(kFlceCase, kFlceCuda);
  EXPECT_EQ(f["verdict"], "fail") << f["outputs"]["loss"].dump().substr(0, 1500);
  EXPECT_EQ(f["outputs"]["loss"]["n_fail"], 1);
  EXPECT_EQ(f["outputs"]["loss"]["n_nan_admitted"], 0);
}

TEST(EnclosureDependency, LogOfAWideMaxSubtractedSumKeepsItsCut) {
  const auto j = run(kFlceWideCase, kFlceWideCuda);
  EXPECT_EQ(j["verdict"], "pass") << j["outputs"]["loss"].dump().substr(0, 1500);
  Env nan("KV_TEST_NAN_AT", "92");
  const auto f = run(kFlceWideCase, kFlceWideCuda);
  EXPECT_EQ(f["verdict"], "fail") << f["outputs"]["loss"].dump().substr(0, 1500);
  EXPECT_EQ(f["outputs"]["loss"]["n_nan_admitted"], 0);
}

TEST(EnclosureDependency, SquaresAreNeverNegative) {
  const auto j = run(kLnCase, kLnCuda);
  EXPECT_EQ(j["verdict"], "pass") << j["outputs"].dump().substr(0, 2000);
  for (const char* o : {"y", "mean", "rstd"}) EXPECT_EQ(j["outputs"][o]["n_unverifiable"], 0) << o;
  Env nan("KV_TEST_NAN_AT", "0");
  const auto f = run(kLnCase, kLnCuda);
  EXPECT_EQ(f["verdict"], "fail") << f["outputs"].dump().substr(0, 2000);
}
