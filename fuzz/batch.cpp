// Batch invariance of a case against its companion (fuzz/batch.hpp).
#include "fuzz/batch.hpp"

#include "check/drift.hpp"
#include "check/replay.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "fuzz/gen.hpp"
#include "fuzz/targets.hpp"

namespace kv {

namespace {

std::vector<std::string> claimed(const nlohmann::json& result) {
  std::vector<std::string> out;
  if (!result.contains("contract") || !result["contract"].contains("determinism")) return out;
  for (auto& [name, claims] : result["contract"]["determinism"].items())
    for (auto& k : claims)
      if (k == "batch_invariant") out.push_back(name);
  return out;
}

}  // namespace

std::optional<Case> batch_companion(const Case& c, const nlohmann::json& result, int64_t extra_rows,
                                    const GenLimits* aim) {
  if (claimed(result).empty() || !c.layout.empty() || !c.alias.empty() || c.shape.size() < 2 || c.shape[0] < 1)
    return std::nullopt;
  Case big = c;
  int64_t grow = extra_rows > 0 ? extra_rows : 1 + c.shape[0] % 3;
  if (extra_rows <= 0 && aim)
    if (auto d0 = straddling_first_dim(c, aim->profile, aim->max_elements)) grow = *d0 - c.shape[0];
  big.shape[0] += grow;
  try {
    registry().normalize(big);
  } catch (const UsageError&) {
    return std::nullopt;
  }
  return big;
}

nlohmann::json compare_batch(const Case& companion, const nlohmann::json& result,
                             const std::map<std::string, StoredTensor>& small,
                             const std::map<std::string, StoredTensor>& big) {
  nlohmann::json j = {{"companion", companion.str()}, {"outputs", nlohmann::json::object()},
                      {"violations", nlohmann::json::array()}};
  for (const std::string& name : claimed(result)) {
    auto a = small.find(name), b = big.find(name);
    if (a == small.end() || b == big.end()) continue;
    const StoredTensor& s = a->second;
    const StoredTensor& l = b->second;
    // Only outputs that grow with the rows: the same trailing dims, more leading rows.
    if (s.shape.empty() || l.shape.size() != s.shape.size() || l.shape[0] <= s.shape[0] ||
        !std::equal(s.shape.begin() + 1, s.shape.end(), l.shape.begin() + 1) || l.dtype != s.dtype)
      continue;
    StoredTensor prefix = l;
    prefix.shape = s.shape;
    prefix.bytes.resize(s.bytes.size());
    DriftStats d = compare_outputs(s, prefix);
    j["outputs"][name] = {{"n_diff", d.n_diff}, {"max_ulps", d.max_ulps}};
    if (d.n_diff > 0)
      j["violations"].push_back(name + " claims batch_invariant but " + std::to_string(d.n_diff) +
                                " elements of its first " + std::to_string(s.shape[0]) + " rows change at " +
                                std::to_string(l.shape[0]) + " rows");
  }
  return j;
}

std::string batch_replay_flags(int64_t extra_rows) { return " --batch-extra-rows " + std::to_string(extra_rows); }

bool apply_batch_check(nlohmann::json& result, const nlohmann::json& check) {
  result["batch_invariance"] = check;
  if (check["violations"].empty()) return false;
  std::string why;
  for (auto& s : check["violations"]) append_sep(why, "; ", s.get<std::string>());
  result["verdict"] = "fail";
  result["reason"] = why + " (companion: " + check["companion"].get<std::string>() + ")";
  result["replay"] = replay_command(result, batch_replay_flags(check.value("extra_rows", int64_t(0))));
  return true;
}

}  // namespace kv
