// `kverify drift`: one impl on one input across every valid config, each run --repeat
// times, optionally again under a forecast device profile (check/drift.hpp).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/common.hpp"

namespace kv {

struct DriftCommand {
  Common common;
  std::string op, impl, dtype = "bf16", shape = "64x1536", attrs, dist = "normal", forecast;
  uint64_t seed = 1;
  int repeat = 2;
};

CLI::App* add_drift_command(CLI::App& app, DriftCommand& d);
/// 0: every claim holds; 1: a violation (or a case that errored); throws UsageError.
int run_drift_command(DriftCommand& d);

}  // namespace kv
