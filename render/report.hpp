// The tolerance report's model: result lines (and drift analyses) turned into one JSON
// document that the HTML page, `kverify compare` and scripts read. Its parts:
//   identity    GPUs, builds, runs and the files it was made from
//   summary     verdict counts, in all and per op
//   groups      per op / impl / dtypes / config: error quantiles in ulps and as a fraction of
//               the enclosure's half-width, the headroom used (max_used: the share of the
//               half-width taken before the output's own rounding), unverifiable share, bias,
//               kernel time
//   tolerances  per op / impl / dtype / value distribution / output: the smallest
//               assert_close (atol, rtol) covering every observed element, times the safety
//               factor, beside PyTorch's defaults and the upstream values of OPS.md
//   reduction   per op: error and enclosure half-width against the reduction length
//   drift       the drift analyses given (kverify drift's drift.json)
//   failures    every fail / error with its replay command
//   unverifiable the first 100 unverifiable cases with their replay commands
//   digests     per case id, each output's XXH64 (cross-GPU bit comparison in compare)
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "check/replay.hpp"  // replay_command: the failures' replay lines

namespace kv {

struct ReportOptions {
  std::string title;
  double safety = 2.0;                 // recommended pair = smallest covering pair x safety
  std::vector<std::string> sources;    // the files the lines came from, for the record
};

/// PyTorch's torch.testing.assert_close defaults for a dtype name (fp32, fp16, bf16, fp64):
/// {atol, rtol}; fp32's for anything else.
std::pair<double, double> torch_default_tolerance(const std::string& dtype);

nlohmann::json build_report(const std::vector<nlohmann::json>& lines, const std::vector<nlohmann::json>& drifts,
                            const ReportOptions& opt);

/// The report as one self-contained HTML page (charts inlined; works offline).
std::string render_report_html(const nlohmann::json& report);

/// JUnit XML for CI systems: a testsuite per op, a testcase per result line; fail is a
/// <failure>, error an <error>, skip and unverifiable a <skipped> with the reason.
std::string render_junit(const std::vector<nlohmann::json>& lines);

/// Two reports (two GPUs, or two builds) side by side: identity, verdicts, error and speed
/// per group, recommended tolerances, and cross-report bit comparison per case.
nlohmann::json build_comparison(const nlohmann::json& a, const nlohmann::json& b);
std::string render_compare_html(const nlohmann::json& cmp);

}  // namespace kv
