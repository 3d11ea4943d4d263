// `kverify gate`: a kernel change against a baseline of the same GPU type: exit 1 on a new
// failure, a determinism claim the bits break, or a p99 error ratio grown more than 2x.
#include <iostream>

#include "check/gate.hpp"
#include "check/results.hpp"
#include "cli/command.hpp"
#include "core/error.hpp"

namespace kv {

namespace {

struct GateArgs : CommandArgs {
  std::string baseline, results, run_id;
};

}  // namespace

std::unique_ptr<CommandArgs> setup_gate(CLI::App& sub) {
  auto a = std::make_unique<GateArgs>();
  sub.add_option("--baseline", a->baseline, "the baseline results file (same GPU type, previous build)")->required();
  sub.add_option("--results", a->results, "the new results file")->required();
  sub.add_option("--run-id", a->run_id, "only this run of the new results file");
  return a;
}

int run_gate(CommandArgs& args, const Argv&) {
  const GateArgs& a = static_cast<GateArgs&>(args);
  auto base = read_results(a.baseline), now = read_results(a.results, a.run_id);
  if (now.empty()) throw UsageError("no result lines in " + a.results + (a.run_id.empty() ? "" : " for run " + a.run_id));
  auto causes = gate(base, now);
  for (auto& c : causes) std::cout << c.kind << ": " << c.detail << "\n    " << c.replay << "\n";
  std::cout << "gate: " << now.size() << " result lines against " << base.size() << " baseline lines: "
            << (causes.empty() ? "pass" : std::to_string(causes.size()) + " causes") << "\n";
  return causes.empty() ? 0 : 1;
}

}  // namespace kv
