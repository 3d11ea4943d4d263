// The tolerance report's first screen (see report_glance.cpp).
#pragma once
#include <nlohmann/json.hpp>
#include <sstream>

namespace kv {

/// Writes <section id='first-screen'>: a status line, the failing and unverifiable cases with
/// their replay lines, and per op and impl the verdicts, headroom, the assert_close pair per
/// dtype beside PyTorch's default and the upstream's, and the drift claims and forecast.
/// An output's headroom figure in the report model: the share of the admissible half-width
/// used before the output's own rounding ("used"), or, for result lines from before kverify
/// recorded it, the error over the half-width ("ratio", which reads 1 for a correctly
/// rounded value; `from_ratio` says so). -1 where neither is recorded; inf outside the set.
double headroom_value(const nlohmann::json& output, bool& from_ratio);

void glance_section(std::ostringstream& o, const nlohmann::json& report);

/// The folded per-group headroom table (op, impl, dtype, config), closest to the edge first.
void headroom_section(std::ostringstream& o, const nlohmann::json& report);

}  // namespace kv
