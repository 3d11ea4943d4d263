// The shrink loop (fuzz/shrink.hpp).
#include "fuzz/shrink.hpp"

#include <set>
#include <string>

namespace kv {

namespace {

/// The parts of a failure, from its reason ("y: 3 of 10 elements fail ...; out-of-bounds
/// write on y: ..."): each fragment up to its first ':'.
std::set<std::string> fail_parts(const nlohmann::json& j) {
  std::set<std::string> out;
  if (j.contains("outputs"))
    for (auto& [name, o] : j["outputs"].items())
      if (o.value("verdict", "") == "fail") out.insert(name);
  const std::string r = j.value("reason", "");
  for (size_t start = 0; start < r.size();) {
    size_t end = r.find("; ", start);
    std::string frag = r.substr(start, end == std::string::npos ? std::string::npos : end - start);
    out.insert(frag.substr(0, frag.find(':')));
    if (end == std::string::npos) break;
    start = end + 2;
  }
  return out;
}

std::string error_kind(const nlohmann::json& j) {
  const std::string r = j.value("reason", "");
  return r.substr(0, r.find_first_of(":("));
}

}  // namespace

bool same_failure(const nlohmann::json& a, const nlohmann::json& b) {
  const std::string va = a.value("verdict", ""), vb = b.value("verdict", "");
  if (va != vb) return false;
  if (va == "error") return error_kind(a) == error_kind(b);
  if (va != "fail") return false;
  auto pa = fail_parts(a), pb = fail_parts(b);
  for (auto& p : pa)
    if (pb.count(p)) return true;
  return false;
}

ShrinkResult shrink_failure(const rc::Shrinkable<Case>& s, const nlohmann::json& first, const CampaignIO& io,
                            int max_runs, const std::function<bool()>& out_of_time,
                            const std::function<void(const nlohmann::json&)>& on_run) {
  ShrinkResult res;
  res.minimal = s.value();
  res.result = first;
  std::set<std::string> tried = {res.minimal.str()};
  rc::Shrinkable<Case> cur = s;
  while (true) {
    bool kept = false;
    auto seq = cur.shrinks();
    while (auto cand = seq.next()) {
      Case c = cand->value();
      if (!tried.insert(c.str()).second) continue;
      std::optional<std::string> refused;
      try {
        refused = io.refused ? io.refused(c) : std::nullopt;
      } catch (const std::exception&) {
        // An impl that cannot answer reports it when the case runs.
      }
      if (refused) continue;
      if (res.runs >= max_runs || (out_of_time && out_of_time())) {
        res.complete = false;
        return res;
      }
      nlohmann::json j = io.run(c);
      ++res.runs;
      if (on_run) on_run(j);
      if (same_failure(first, j)) {
        res.minimal = c;
        res.result = j;
        ++res.steps;
        cur = *cand;
        kept = true;
        break;
      }
    }
    if (!kept) return res;
  }
}

}  // namespace kv
