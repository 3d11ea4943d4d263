// CUDA tests: they run on a GPU machine and skip, saying why, where there is none.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "check/calibrate.hpp"
#include "check/results.hpp"
#include "core/cuda/cuda_device.hpp"
#include "op_cases.hpp"
#include "test_util.hpp"

namespace {

using kv::DType;

bool no_gpu(std::string* why) { return kv::cuda_device_count(why) == 0; }

#define REQUIRE_GPU()                                       \
  do {                                                      \
    std::string why_;                                       \
    if (no_gpu(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

nlohmann::json run_cuda(kv::Case c, const std::string& profile = "") {
  kv::registry().normalize(c);
  kv::RunEnv env;
  env.device = kv::cuda_device(0);
  env.device.profile.apply_overrides(profile);
  env.run_id = "test";
  kv::RefCache cache;
  return kv::run_case(c.str(), env, cache);
}

/// The test binary beside this one when the build tree is not here (a GPU machine).
std::string testbin() {
  if (std::filesystem::exists(KV_TESTBIN)) return KV_TESTBIN;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "kverify-testbin").string();
}

}  // namespace

TEST(Cuda, RmsNormPassesAcrossModesDtypesAndConfigs) {
  REQUIRE_GPU();
  for (bool bwd : {false, true})
    for (const char* mode : {"llama", "gemma", "none"})
      for (DType x : {DType::f32, DType::f16, DType::bf16})
        for (const char* nw : {"1", "32"}) {
          kv::Case c = kvtest::rms_case(bwd, "cuda", {5, 123, 123}, {{"x", x}}, mode, 1);
          c.config["num_warps"] = nw;
          if (bwd) c.config["dw"] = *nw == '1' ? "atomics" : "fixed_partials";
          auto j = run_cuda(c);
          EXPECT_TRUE(j["verdict"] == "pass" || (j["verdict"] == "unverifiable" && std::string(mode) == "none"))
              << j["case"] << ": " << j["verdict"] << " " << j.value("reason", "");
        }
}

TEST(Cuda, GluPassesAcrossDtypesDistsAndConfigs) {
  REQUIRE_GPU();
  for (const char* op : {"swiglu.fwd", "swiglu.bwd", "geglu.fwd", "geglu.bwd"})
    for (const char* x : {"fp32", "fp16", "bf16"})
      for (const char* dist : {"normal", "large", "wide"})
        for (const char* nw : {"1", "32"}) {
          kv::Case c = kvtest::op_case(op, {7, 333}, x, {}, dist, 3);
          c.impl = "cuda";
          c.config["num_warps"] = nw;
          auto j = run_cuda(c);
          EXPECT_EQ(j["verdict"], "pass") << j["case"] << ": " << j["verdict"] << " " << j.value("reason", "");
        }
}

TEST(Cuda, WarpSize64RejectsThirtyTwoWarps) {
  REQUIRE_GPU();
  kv::Case c = kvtest::rms_case(false, "cuda", {4, 256}, {{"x", DType::bf16}}, "llama", 1);
  c.config["num_warps"] = "32";
  kv::registry().normalize(c);
  kv::DeviceProfile p = kv::cuda_device(0).profile;
  p.apply_overrides("warp_size=64");
  auto why = kv::registry().impl(c.op, c.impl).invalid_reason(c, p);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("2048 threads"), std::string::npos) << *why;
  c.config["num_warps"] = "16";
  EXPECT_FALSE(kv::registry().impl(c.op, c.impl).invalid_reason(c, p).has_value());
}

TEST(Cuda, CalibrationMeasuresRsqrtWithinItsDocumentedTwoUlps) {
  REQUIRE_GPU();
  auto m = kv::calibrate_math();
  ASSERT_TRUE(m.max_ulps.count("rsqrt"));
  EXPECT_GT(m.max_ulps["rsqrt"], 0.5);  // not correctly rounded everywhere
  EXPECT_LE(m.max_ulps["rsqrt"], 2.0);
}

TEST(Cuda, StickyErrorEndsTheWorkerAndTheRunGoesOn) {
  REQUIRE_GPU();
  auto d = std::filesystem::temp_directory_path() / "kv_sticky";
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  std::ofstream(d / "suite.json") << R"({"entries": [{"ops": ["rms_norm.fwd"], "impls": ["test.fault", "cuda"],
    "shapes": ["2x64"], "seeds": [1]}]})";
  std::string cmd = testbin() + " run --device cuda --suite " + (d / "suite.json").string() + " --out " +
                    d.string() + " > " + (d / "log").string() + " 2>&1";
  int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  auto lines = kv::read_results((d / "results.jsonl").string());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["verdict"], "error");
  EXPECT_NE(lines[0]["reason"].get<std::string>().find("sticky"), std::string::npos) << lines[0]["reason"];
  EXPECT_EQ(lines[1]["verdict"], "pass") << lines[1].value("reason", "");
}
