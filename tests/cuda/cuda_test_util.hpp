// Helpers of the CUDA tests: a visible skip without a GPU, one case run on the GPU through
// the runner, and a pass expectation naming the case.
#pragma once
#include <gtest/gtest.h>

#include <string>

#include "run/runner.hpp"
#include "device/cuda_device.hpp"
#include "core/registry.hpp"

namespace kvtest {

inline bool no_gpu(std::string* why) { return kv::cuda_device_count(why) == 0; }

#define REQUIRE_GPU()                                                       \
  do {                                                                      \
    std::string why_;                                                       \
    if (kvtest::no_gpu(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)

inline nlohmann::json run_cuda(kv::Case c, const std::string& profile = "") {
  kv::registry().normalize(c);
  kv::RunEnv env;
  env.device = kv::cuda_device(0);
  env.device.profile.apply_overrides(profile);
  env.run_id = "test";
  kv::RefCache cache;
  return kv::run_case(c.str(), env, cache);
}

inline void expect_pass(const kv::Case& c, const std::string& profile = "") {
  auto j = run_cuda(c, profile);
  EXPECT_EQ(j["verdict"], "pass") << j["case"] << ": " << j["verdict"] << " " << j.value("reason", "");
}

}  // namespace kvtest
