// Shrinking a failing case through the case runner: walk RapidCheck's shrinks of the
// case, keep the first candidate that still fails the same way (same verdict, same failure
// class: fuzz/failure_class.hpp), repeat until none does.
#pragma once
#include <rapidcheck.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "core/case.hpp"
#include "fuzz/campaign.hpp"
#include "fuzz/failure_class.hpp"

namespace kv {

struct ShrinkResult {
  Case minimal;
  nlohmann::json result;  // the minimal case's result line
  int runs = 0;           // candidates run
  int steps = 0;          // candidates kept
  bool complete = true;   // false: stopped by the run bound or the time budget
};

/// Shrinks the failure `first` (the result of s.value()). Candidates the device refuses
/// and those already tried are skipped without a run; at most max_runs are run.
/// on_run sees every candidate's result line; out_of_time stops the search.
ShrinkResult shrink_failure(const rc::Shrinkable<Case>& s, const nlohmann::json& first, const CampaignIO& io,
                            int max_runs, const std::function<bool()>& out_of_time,
                            const std::function<void(const nlohmann::json&)>& on_run);

}  // namespace kv
