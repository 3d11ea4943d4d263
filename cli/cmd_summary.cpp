// `kverify summary`: the HTML summary of a results file (malformed lines skipped, named,
// and exit 1).
#include <iostream>

#include "check/results.hpp"
#include "cli/command.hpp"
#include "render/summary.hpp"

namespace kv {

namespace {

struct SummaryArgs : CommandArgs {
  std::string results, out = "out/summary.html", run_id;
};

}  // namespace

std::unique_ptr<CommandArgs> setup_summary(CLI::App& sub) {
  auto a = std::make_unique<SummaryArgs>();
  sub.add_option("--results", a->results, "results file (JSON Lines)")->required();
  sub.add_option("--run-id", a->run_id, "only this run (default: every line)");
  sub.add_option("--out", a->out, "HTML file to write");
  return a;
}

int run_summary(CommandArgs& args, const Argv&) {
  const SummaryArgs& a = static_cast<SummaryArgs&>(args);
  int64_t skipped = 0;
  auto lines = read_results_skipping(a.results, a.run_id, skipped);
  write_summary_html(a.out, lines, a.run_id.empty() ? "all runs in " + a.results : a.run_id);
  std::cout << "summary: " << a.out << " (" << lines.size() << " cases";
  if (skipped) std::cout << ", " << skipped << " malformed lines skipped";
  std::cout << ")\n";
  return skipped ? 1 : 0;
}

}  // namespace kv
