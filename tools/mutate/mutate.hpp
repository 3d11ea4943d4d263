// kverify-mutate's run: each mutant of the catalog, for each op family it belongs to, runs
// in a worker process of its own (the worker reads KV_MUTANT) against that family's pool
// cases until one kills it: a `fail` or `error` verdict, or output bits that change
// between runs of a case whose impl claims run_to_run; failing those, a p99 error ratio
// more than twice the unmutated impl's, or (asked for) compute-sanitizer errors that the
// unmutated impl does not have. Writes the kill rate per op as mutation.md and mutation.json.
#pragma once
#include <string>
#include <vector>

#include "tools/mutate/pool.hpp"

namespace kv {

struct MutateOptions {
  std::string device = "host";        // host | cuda: the impls whose mutants run
  std::vector<std::string> families;  // op families to run (empty: every family of the device's mutants)
  std::vector<std::string> mutants;   // mutant names (empty: every mutant of the device)
  PoolOptions pool;
  std::string out = "out/mutation";
  double timeout_s = 300;
  std::vector<std::string> sanitize;  // compute-sanitizer tools run on a survivor's first case
  bool expect_killed = false;  // exit 1 when a mutant survives
  std::string expect_survivors;  // a mutation.json: exit 1 unless exactly its survivors survive
  std::string command;         // the command line, for the report
  bool list_cases = false;     // print the pool (normalized) and stop: no device needed
};

/// Runs the suite; 0, or 1 where the baseline (no mutant) fails a targeted case or the
/// survivors are not the expected ones. Throws UsageError for bad options.
int run_mutation(const MutateOptions& o);

}  // namespace kv
