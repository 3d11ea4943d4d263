// The class of a failure: which part failed and how (an output out of its enclosure, NaN,
// unwritten, padding written; an out-of-bounds write, a modified input, a broken claim, a
// sanitizer finding; the kind of an error). Shrinking keeps it, so a minimal case shows the
// bug that was found and not another one met on the way; campaigns report failures by it.
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace kv {

/// The class of a failing result line: its parts as `<part>:<kind>`, sorted, joined by
/// ", " (e.g. "loss:out_of_enclosure", "y:nan, oob:rstd", "error:watchdog"); "" for a
/// result that neither failed nor errored. An output's kind is its worst: unwritten, then
/// nan, then out_of_enclosure, then padding.
std::string failure_class(const nlohmann::json& result);

/// Whether result b fails the way result a did: the same verdict and the same class.
bool same_failure(const nlohmann::json& a, const nlohmann::json& b);

/// Every failure line (failures.jsonl) with its reason and replay line, grouped by class
/// (the `class` field, else computed from the line), classes in order of first appearance.
void print_failures_by_class(const std::vector<nlohmann::json>& failures, std::ostream& out);

}  // namespace kv
