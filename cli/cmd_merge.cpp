// `kverify merge OUT IN...`: result files of campaign shards joined into a new file, lines
// deduplicated by campaign seed and index (fuzz/state.hpp).
#include <iostream>

#include "check/results.hpp"
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
  sub.add_option("in", m.in, "results files of the shards (DIR/results.jsonl)")->required();
  return p;
}

int run_merge(CommandArgs& args, const Argv&) {
  const MergeArgs& m = static_cast<MergeArgs&>(args);
  int64_t total = 0;
  for (auto& p : m.in) total += static_cast<int64_t>(read_results(p).size());
  int64_t kept = merge_results(m.out, m.in);
  std::cout << "merged " << kept << " result lines from " << m.in.size() << " files (" << total - kept
            << " duplicates dropped): " << m.out << "\n";
  return 0;
}

}  // namespace kv
