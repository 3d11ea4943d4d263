// Reduction-order drift of one impl on one input: its configs' outputs compared bit by
// bit and in ulps (which configs agree, how far the others are), repeats of each config
// (run to run), and the same configs under another device profile (the forecast: would
// the bits change on, say, a 108-SM GPU). Each difference is classed identical / both
// inside their admissible sets / outside, and the impl is held to its determinism claims.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/safetensors.hpp"

namespace kv {

/// One run of one config: its result line and its outputs.
struct DriftRun {
  nlohmann::json result;
  std::map<std::string, StoredTensor> outputs;
};

struct DriftConfig {
  std::string config;             // k=v,... (the case's config)
  std::vector<DriftRun> repeats;  // run to run, in order
  std::optional<DriftRun> forecast;
};

struct DriftStats {
  int64_t n_diff = 0;     // elements whose bits differ
  double max_ulps = 0;    // largest distance in units in the last place (inf: a NaN against a number)
};

/// Elements whose bits differ and the largest ulp distance between two outputs of one dtype
/// and shape (throws std::runtime_error otherwise).
DriftStats compare_outputs(const StoredTensor& a, const StoredTensor& b);

/// The analysis as JSON: per output the run-to-run and forecast changes per config, the
/// config x config matrix of max ulp distances and classes, groups of configs with identical
/// bits, and `violations` (claims the bits break; forecast changes under a gpu_invariant claim).
nlohmann::json analyze_drift(const std::vector<DriftConfig>& configs, const std::string& forecast_profile);

/// The analysis as Markdown (groups and per-config tables; the full matrices stay in JSON).
std::string drift_markdown(const nlohmann::json& report);

}  // namespace kv
