// `kverify merge OUT IN...`: result files of campaign shards joined into a new file, lines
// deduplicated by campaign seed and index (fuzz/state.hpp).
#include <filesystem>
#include <iostream>

#include "check/results.hpp"
#include "core/error.hpp"
#include "cli/command.hpp"
#include "fuzz/campaign.hpp"

namespace kv {

namespace {

struct MergeArgs : CommandArgs {
  std::string out;
  std::vector<std::string> in;
};

}  // namespace

std::unique_ptr<CommandArgs> setup_merge(CLI::App& sub) {
  auto p = std::make_unique<MergeArgs>();
  MergeArgs& m = *p;
  sub.add_option("out", m.out, "the merged results file to write (must not exist)")->required();
  sub.add_option("in", m.in, "results files of the shards (DIR/results.jsonl; a campaign's DIR takes its results.jsonl)")
      ->required();
  return p;
}

/// A shard's results file: the path itself, or a campaign directory's results.jsonl. A path
/// that is neither is a usage error: merging nothing from it must not pass for a merge.
std::string results_file(const std::string& p) {
  namespace fs = std::filesystem;
  if (fs::is_directory(p)) {
    if (fs::is_regular_file(fs::path(p) / "results.jsonl")) return (fs::path(p) / "results.jsonl").string();
    throw UsageError("'" + p + "' is a directory without results.jsonl (not a campaign's --out)");
  }
  if (!fs::is_regular_file(p)) throw UsageError("'" + p + "' does not exist (a shard's results file, DIR/results.jsonl)");
  return p;
}

int run_merge(CommandArgs& args, const Argv&) {
  const MergeArgs& m = static_cast<MergeArgs&>(args);
  std::vector<std::string> in;
  for (auto& p : m.in) in.push_back(results_file(p));
  int64_t total = 0;
  for (auto& p : in) total += static_cast<int64_t>(read_results(p).size());
  int64_t kept = merge_results(m.out, in);
  std::cout << "merged " << kept << " result lines from " << m.in.size() << " files (" << total - kept
            << " duplicates dropped): " << m.out << "\n";
  return 0;
}

}  // namespace kv
