// The minimal HTML summary of one run (the full tolerance report comes later).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kv {

/// Writes a self-contained HTML page (no scripts, no network) for the run's result lines.
void write_summary_html(const std::string& path, const std::vector<nlohmann::json>& lines, const std::string& run_id);

}  // namespace kv
