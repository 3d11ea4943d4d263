// Loading the curated tier (fuzz/curated.hpp).
#include "fuzz/curated.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "kv_curated.hpp"

namespace kv {

std::vector<CuratedCase> load_curated(const std::string& which) {
  if (which == "none") return {};
  std::string text, where = which;
  if (which == "builtin") {
    text = kCuratedJson;
    where = "the built-in curated tier (fuzz/curated.json)";
  } else {
    std::ifstream f(which);
    if (!f) throw UsageError("cannot read curated file '" + which + "'");
    text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  return parse_curated(text, where);
}

std::vector<CuratedCase> parse_curated(const std::string& text, const std::string& where) {
  std::vector<CuratedCase> out;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw UsageError("malformed curated file " + where + ": " + e.what());
  }
  if (!j.contains("cases") || !j["cases"].is_array()) throw UsageError(where + " has no 'cases' list");
  for (size_t i = 0; i < j["cases"].size(); ++i) {
    const auto& e = j["cases"][i];
    const std::string at = where + ", case " + std::to_string(i + 1);
    if (!e.is_object() || !e.contains("case") || !e["case"].is_string()) throw UsageError(at + ": no 'case' string");
    if (!e.contains("note") || !e["note"].is_string() || e["note"].get<std::string>().empty())
      throw UsageError(at + ": every curated case needs a 'note' saying where it came from");
    CuratedCase cc;
    try {
      cc.c = Case::parse(e["case"].get<std::string>());
    } catch (const UsageError& err) {
      throw UsageError(at + ": " + err.what());
    }
    cc.note = e["note"].get<std::string>();
    out.push_back(std::move(cc));
  }
  return out;
}

}  // namespace kv
