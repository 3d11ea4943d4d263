// The kernel-change gate: a new results file against a baseline (the same GPU type, the
// previous build). A cause is a new failure, a determinism claim the bits break, or an
// output whose p99 error ratio more than doubled for the same case.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kv {

struct GateCause {
  std::string kind;    // new_failure | determinism | p99_growth
  std::string detail;  // what, with the figures
  std::string case_str;
  std::string replay;  // what reruns it: a replay of the case, a drift analysis for determinism (check/replay.hpp)
};

/// Both as read by read_results. Repeated lines of one case (a run repeated R times) are
/// compared with each other for run_to_run claims.
std::vector<GateCause> gate(const std::vector<nlohmann::json>& baseline, const std::vector<nlohmann::json>& current);

/// p99 growth beyond this factor for the same case is a cause.
inline constexpr double kGateP99Growth = 2.0;

}  // namespace kv
