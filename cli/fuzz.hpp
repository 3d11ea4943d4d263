// `kverify fuzz` (campaigns, fuzz/campaign.hpp) and `kverify merge` (shard results):
// their options and the wiring to the worker process.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "fuzz/campaign.hpp"

namespace kv {

struct FuzzCommand {
  Common common;
  CampaignOptions opts;
  uint64_t seed = 0;
  int64_t budget_cases = 0, max_elements = 0;
  double budget_seconds = 0;
  std::string shard, curated, memory_budget, devices = "1";
  int jobs_per_device = 1;
  std::vector<std::string> args;  // the command line after `fuzz` (what --devices hands its workers)
  CLI::Option *seed_opt = nullptr, *cases_opt = nullptr, *seconds_opt = nullptr, *max_opt = nullptr,
              *shard_opt = nullptr, *curated_opt = nullptr;
};

/// Registers `fuzz`; the parsed options land in f.
CLI::App* add_fuzz_command(CLI::App& app, FuzzCommand& f);
/// Runs the campaign: 0 no failures, 1 failures (or unusable plugins/workers); throws
/// UsageError for bad options.
int run_fuzz_command(FuzzCommand& f);

struct MergeCommand {
  std::string out;
  std::vector<std::string> in;
};

CLI::App* add_merge_command(CLI::App& app, MergeCommand& m);
int run_merge_command(const MergeCommand& m);

}  // namespace kv
