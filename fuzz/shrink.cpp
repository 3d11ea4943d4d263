// The shrink loop (fuzz/shrink.hpp).
#include "fuzz/shrink.hpp"

#include <set>
#include <string>

namespace kv {

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
