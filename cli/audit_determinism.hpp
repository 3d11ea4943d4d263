// `kverify audit --determinism on` (the default; issue 20, deliverable 3): each output's
// determinism claims (Contract::determinism) held to the bits the impl gives. The case runs
// in workers that keep their outputs (cli/batch_check.hpp): twice in one worker process
// and once in a fresh one (run_to_run; autotuners choose per process), under other configs
// (config_invariant), and as batch companions with more leading rows (batch_invariant,
// fuzz/batch.hpp), all at the rows run/determinism_plan.hpp picks. gpu_invariant needs a
// second GPU: "not auditable here". Claims not made are reported with what was observed.
// Impls of an external worker (--worker) get a fresh case-running process, but the external
// worker itself is shared by all runs: a per-process choice inside it is not exercised.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/common.hpp"
#include "core/case.hpp"
#include "run/determinism_plan.hpp"

namespace kv {

/// One (output, claim) of one case.
struct ClaimAudit {
  std::string op, impl, config, output, claim;
  bool claimed = false;
  /// held | violated | not claimed | not checked (claimed, nothing to compare) | not auditable here
  std::string status;
  std::string note;      // what was compared, or what changed
  int64_t compared = 0;  // runs compared with the first one
  int64_t n_diff = 0;    // the first differing run's differing elements (violated, or changed)
  int64_t first_diff = -1;
  std::string where;     // that run: "a run in a fresh process", "config ...", "N rows (why)"
  std::vector<std::string> runs;  // every run compared
  bool violated() const { return status == "violated"; }
  /// The one-line reason a violated claim makes the contract unsound.
  std::string reason() const;
  nlohmann::json to_json() const;  // with "kind": "determinism"
};

/// Every output of c's op, each claim in determinism_claims() order.
std::vector<ClaimAudit> audit_determinism(const Case& c, const Common& common, const RunEnv& env, Extensions& ext,
                                          const DeterminismLimits& lim = {});

void print_determinism_table(const std::vector<ClaimAudit>& rows);

}  // namespace kv
