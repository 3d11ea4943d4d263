// A campaign's identity and budgets (DIR/campaign.json): everything that decides its case
// sequence, so a resumed campaign regenerates the same cases, and the options a resume
// must not change.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/campaign.hpp"

namespace kv {

struct Shard {
  int64_t i = 0, n = 1;
  bool has(int64_t index) const { return ((index % n) + n) % n == i; }
  std::string str() const { return std::to_string(i) + "/" + std::to_string(n); }
};
/// "i/N" with 0 <= i < N; throws UsageError.
Shard parse_shard(const std::string& s);

struct CampaignState {
  uint64_t seed = 0;
  std::vector<std::string> ops;
  std::vector<std::pair<std::string, std::string>> pairs;  // (op, impl), in sequence order
  int64_t max_elements = int64_t(1) << 20;
  Shard shard;
  std::string curated = "builtin";
  std::string device;
  DeviceProfile profile = host_profile();  // the generator's targets (k * sm_count rows, thresholds)
  int64_t budget_cases = -1;   // -1: bounded by time only
  double budget_seconds = 0;   // 0: no time bound
  int sessions = 0;            // runs of the campaign (1 + resumes)

  nlohmann::json to_json() const;
};

/// A new campaign from the options, or the one in o.out when resuming (options given on
/// the command line must match it, budgets may change). Writes campaign.json. Throws
/// UsageError for a directory that already holds a campaign (without --resume) and for
/// mismatching options.
CampaignState open_campaign(const CampaignOptions& o);

/// The ops of the campaign stored in dir (empty when there is none or it is unreadable):
/// what a resume that names no --op fuzzes.
std::vector<std::string> stored_ops(const std::string& dir);

}  // namespace kv
