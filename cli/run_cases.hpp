// Running cases through the worker process for `run` and `replay`: validation against
// the device, then every case's result appended to <out>/results.jsonl as it finishes,
// and the summary and report of what finished.
#pragma once
#include <vector>

#include "cli/common.hpp"
#include "core/case.hpp"

namespace kv {

/// Validates one case (replay) before it is queued: one the impl declines or this device
/// cannot run is a usage error (Impl::refusal's words). An impl that cannot even answer (a
/// crashed worker) reports it when the case runs.
void check_runnable(const Case& c, const RunEnv& env);

/// Runs cases through the worker, appending each result as it finishes; quiet: print only
/// failures and the totals. SIGINT/SIGTERM abandon the case in flight; the summary and
/// report then cover what finished. 0 all pass, 1 any failure, error or unusable plugin
/// or worker, 130/143 after a signal.
int run_cases(const std::vector<Case>& in, const Common& c, const RunEnv& env, bool quiet, Extensions& ext);

}  // namespace kv
