// The campaign's sanitizer sample (CampaignIO::sanitize): which cases it reruns, and a
// tool's finding becoming a recorded, unshrunk failure with a replay line that reruns the
// tool. The tool is stood in for here (compute-sanitizer needs a GPU); the real wiring
// runs on the GPU machine (tools/bench/fuzz_campaign.sh).
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "check/results.hpp"
#include "fuzz/campaign.hpp"
#include "test_util.hpp"

namespace {

std::string fresh_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("kv_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  return d.string();
}

kv::CampaignOptions options(const std::string& dir) {
  kv::CampaignOptions o;
  o.out = dir;
  o.device = "host";
  o.ops = {"softmax.fwd"};
  o.seed = 11;
  o.budget_cases = 12;
  o.max_elements = 2048;
  o.curated = "none";
  o.sanitize_every = 5;
  return o;
}

kv::CampaignIO host_io(kv::RefCache& cache) {
  kv::CampaignIO io;
  io.run = [&cache](const kv::Case& c) { return kv::run_case(c.str(), kvtest::host_env(), cache); };
  return io;
}

}  // namespace

TEST(CampaignSanitize, EveryKthGeneratedIndexIsRerunAndAFindingFailsItsCase) {
  const std::string dir = fresh_dir("campaign_sanitize");
  kv::RefCache cache;
  kv::CampaignIO io = host_io(cache);
  std::vector<std::string> sanitized;
  // The stand-in tool finds 2 errors in the case it sees second (index 5), none elsewhere.
  io.sanitize = [&](const kv::Case& c) {
    sanitized.push_back(c.str());
    const int64_t errors = sanitized.size() == 2 ? 2 : 0;
    return nlohmann::json{{"memcheck", {{"errors", errors}, {"log", "memcheck.log"}}},
                          {"racecheck", {{"skipped", "the tool refused the device"}}}};
  };
  const kv::CampaignOptions o = options(dir);
  EXPECT_EQ(kv::run_campaign(o, io), 1);
  ASSERT_EQ(sanitized.size(), 3u);  // indices 0, 5, 10
  std::set<int64_t> with_sanitizer;
  for (auto& j : kv::read_results(dir + "/results.jsonl")) {
    const int64_t idx = j["fuzz"]["index"].get<int64_t>();
    if (!j.contains("sanitizer")) continue;
    with_sanitizer.insert(idx);
    if (idx == 5) {
      EXPECT_EQ(j["verdict"], "fail");
      EXPECT_NE(j["reason"].get<std::string>().find("memcheck: 2 errors"), std::string::npos) << j["reason"];
    } else {
      EXPECT_EQ(j["verdict"], "pass") << j.dump();
    }
  }
  EXPECT_EQ(with_sanitizer, (std::set<int64_t>{0, 5, 10}));
  auto f = kv::read_results(dir + "/failures.jsonl");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0]["fuzz"]["index"], 5);
  EXPECT_EQ(f[0]["shrink"]["runs"], 0);  // recorded as found, not shrunk
  EXPECT_NE(f[0]["replay"].get<std::string>().find("--sanitize memcheck,racecheck"), std::string::npos) << f[0].dump();

  // Without findings the same campaign passes, and resuming it sanitizes nothing again.
  const std::string clean = fresh_dir("campaign_sanitize_clean");
  kv::CampaignOptions o2 = options(clean);
  sanitized.clear();
  io.sanitize = [&](const kv::Case& c) {
    sanitized.push_back(c.str());
    return nlohmann::json{{"memcheck", {{"errors", 0}, {"log", "memcheck.log"}}}};
  };
  EXPECT_EQ(kv::run_campaign(o2, io), 0);
  EXPECT_EQ(sanitized.size(), 3u);
  o2.resume = true;
  EXPECT_EQ(kv::run_campaign(o2, io), 0);
  EXPECT_EQ(sanitized.size(), 3u);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(clean);
}
