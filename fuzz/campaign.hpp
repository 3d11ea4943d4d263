// Fuzz campaigns: a deterministic sequence of cases per campaign seed (the curated tier
// first, then generated cases), each run through the caller's case runner, results
// appended per case, failures shrunk to a minimal case; resumable and shardable.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/device.hpp"
#include "fuzz/gen.hpp"

namespace kv {

/// Bumped whenever the generator draws different cases for the same seed and index: a
/// campaign is resumed only by a build with the same generator.
/// 2: shapes moved to the impls' thresholds (issue 18); 3: draws inside what the impl accepts.
inline constexpr int kFuzzGeneratorVersion = 3;

struct CampaignOptions {
  std::string out;                                 // the campaign directory
  std::string device;                              // the run's device kind (picks default impls)
  DeviceProfile profile = host_profile();          // what generated shapes aim at (a new campaign's; kept)
  std::vector<std::string> ops, impls;             // impls empty: every non-test impl of the op on the device
  std::optional<uint64_t> seed;                    // unset: a fresh random seed (a new campaign)
  std::optional<int64_t> budget_cases;             // generated cases (indices 0..N-1)
  std::optional<double> budget_seconds;            // wall time, checked before each case
  std::optional<int64_t> max_elements;             // cap on the product of a shape's dims
  std::optional<std::string> shard;                // "i/N": indices = i mod N
  std::optional<std::string> curated;              // "builtin", "none" or a curated file
  bool resume = false;
  int max_shrink_runs = 200;
  double max_shrink_seconds = 300;                 // per failure: a hang costs the watchdog per run
  int sanitize_every = 0;                          // > 0: generated indices divisible by it are sanitized
};

/// How the campaign reaches the device: `run` runs one normalized case and returns its
/// result line (never throws); `refused` says why the device refuses a case, if it does
/// (Impl::invalid_reason: the case is counted as rejected, never launched).
struct CampaignIO {
  std::function<nlohmann::json(const Case&)> run;
  std::function<std::optional<std::string>(const Case&)> refused;
  /// Optional: the batch-invariance check of a case that passed (fuzz/batch.hpp), run for
  /// every 8th generated case: compare_batch's object with "extra_rows" (and "repro", the
  /// bundle of a violation), none where it does not apply. Violations make the case fail.
  /// The limits are the campaign's: a companion aims at its profile's thresholds.
  std::function<std::optional<nlohmann::json>(const Case&, const nlohmann::json&, const GenLimits&)> batch;
  /// Reruns a case under the sanitizer tools: per tool {"errors": N, "log": ...} or
  /// {"skipped": why}. Errors make the case fail.
  std::function<nlohmann::json(const Case&)> sanitize;
};

/// Runs (or resumes) a campaign; returns 0 when no case failed or errored, 1 otherwise.
/// Throws UsageError for bad options, a campaign directory that does not match, and a
/// malformed results or failures file (naming the file and line).
int run_campaign(const CampaignOptions& o, const CampaignIO& io);

/// Joins result files of shards into `out` (a new file): lines of a campaign are
/// deduplicated by (campaign seed, index), others kept; returns the lines written.
int64_t merge_results(const std::string& out, const std::vector<std::string>& in);

}  // namespace kv
