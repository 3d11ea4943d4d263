// Gate rules over result lines.
#include "check/gate.hpp"

#include <map>
#include <set>
#include <sstream>

#include "check/replay.hpp"
#include "check/results.hpp"

namespace kv {

namespace {

using nlohmann::json;

bool failed(const json& r) {
  const std::string v = r.value("verdict", "error");
  return v == "fail" || v == "error";
}

bool judged(const json& r) {
  const std::string v = r.value("verdict", "");
  return v == "pass" || v == "unverifiable" || v == "fail";
}

std::string digest_of(const json& r, const std::string& out) {
  if (!r.contains("outputs") || !r["outputs"].contains(out)) return "";
  return r["outputs"][out].value("digest", json::object()).value("xxh64", "");
}

double p99(const json& o) {
  const json& v = o.value("p99_ratio", json(0.0));
  if (v.is_number()) return v.get<double>();
  return v == "inf" ? 1e300 : 0.0;  // "nan" never counts as growth here; the verdict covers it
}

std::string cfg(const json& r) {
  std::string s;
  const json c = r.value("config", json::object());
  for (auto& [k, v] : c.items()) s += (s.empty() ? "" : ",") + k + "=" + v.get<std::string>();
  return s;
}

/// Outputs of lines that share a digest key whose bits differ, under a claim. The cause's
/// replay is a drift analysis of the case (one run cannot show a determinism claim broken),
/// under `forecast` (the other GPU's profile) when given.
void bits_must_agree(const std::vector<const json*>& lines, const std::string& claim, const std::string& what,
                     std::vector<GateCause>& out, const std::string& forecast = "") {
  if (lines.size() < 2) return;
  const json& r0 = *lines[0];
  const json outs = r0.value("outputs", json::object());
  for (auto& [name, o] : outs.items()) {
    std::map<std::string, std::vector<std::string>> by_digest;
    bool all_claim = true;
    for (auto* r : lines) {
      all_claim &= claims(*r, name, claim);
      by_digest[digest_of(*r, name)].push_back(cfg(*r).empty() ? r->value("run_id", "") : cfg(*r));
    }
    if (!all_claim || by_digest.size() < 2) continue;
    std::string groups;
    for (auto& [d, who] : by_digest) {
      std::string w;
      for (auto& x : who) w += (w.empty() ? "" : " ") + x;
      groups += (groups.empty() ? "" : " | ") + d.substr(0, 8) + ": " + w;
    }
    out.push_back({"determinism", r0.value("op", "") + " " + r0.value("impl", "") + " output " + name + " claims " + claim +
                                      " but " + what + " give " + std::to_string(by_digest.size()) + " different bits (" +
                                      groups + ")",
                   r0.value("case", ""), drift_command(r0, forecast)});
  }
}

}  // namespace

std::vector<GateCause> gate(const std::vector<json>& baseline, const std::vector<json>& current) {
  std::vector<GateCause> out;
  std::map<std::string, std::vector<const json*>> base, cur;
  for (auto& r : baseline) base[r.value("case_id", r.value("case", ""))].push_back(&r);
  for (auto& r : current) cur[r.value("case_id", r.value("case", ""))].push_back(&r);

  // New failures: failing now, not failing in the baseline (or not there).
  for (auto& [id, rs] : cur) {
    const json* bad = nullptr;
    for (auto* r : rs)
      if (failed(*r)) bad = r;
    if (!bad) continue;
    bool failed_before = false;
    if (auto it = base.find(id); it != base.end())
      for (auto* r : it->second) failed_before |= failed(*r);
    if (!failed_before)
      out.push_back({"new_failure", bad->value("verdict", "") + ": " + bad->value("reason", ""), bad->value("case", ""),
                     replay_command(*bad)});
  }

  // Determinism: repeats of one case (run_to_run), the baseline's lines of the same case
  // on the same GPU and impl version (run_to_run) or another GPU (gpu_invariant), and the
  // configs of one impl on one input (config_invariant).
  for (auto& [id, rs] : cur) {
    std::vector<const json*> judged_now;
    for (auto* r : rs)
      if (judged(*r)) judged_now.push_back(r);
    bits_must_agree(judged_now, "run_to_run", "repeated runs", out);
    if (judged_now.empty()) continue;
    auto it = base.find(id);
    if (it == base.end()) continue;
    for (auto* b : it->second) {
      if (!judged(*b) || b->value("impl_version", "") != judged_now[0]->value("impl_version", "")) continue;
      const bool same_gpu = b->value("device_name", "") == judged_now[0]->value("device_name", "");
      const json sms = b->value("device", json::object()).value("profile", json::object()).value("sm_count", json());
      bits_must_agree({judged_now[0], b}, same_gpu ? "run_to_run" : "gpu_invariant",
                      same_gpu ? "the baseline and this run (same GPU, same impl version)"
                               : "the baseline's GPU and this one (same impl version)",
                      out, same_gpu || !sms.is_number() ? "" : "sm_count=" + std::to_string(sms.get<int64_t>()));
      break;
    }
  }
  std::map<std::string, std::vector<const json*>> by_input;
  for (auto& r : current)
    if (judged(r) && r.value("case", "").find("layout=") == std::string::npos)
      by_input[r.value("op", "") + " " + r.value("impl", "") + " " + r.value("input_id", "")].push_back(&r);
  for (auto& [k, rs] : by_input) {
    std::vector<const json*> one_per_config;
    std::set<std::string> seen;
    for (auto* r : rs)
      if (seen.insert(cfg(*r)).second) one_per_config.push_back(r);
    bits_must_agree(one_per_config, "config_invariant", "its configs", out);
  }

  // p99 growth for the same case.
  for (auto& [id, rs] : cur) {
    auto it = base.find(id);
    if (it == base.end()) continue;
    const json* b = it->second.back();
    const json* r = rs.back();
    if (!judged(*b) || !judged(*r) || failed(*r)) continue;
    const json outs = r->value("outputs", json::object());
    for (auto& [name, o] : outs.items()) {
      if (!b->contains("outputs") || !(*b)["outputs"].contains(name)) continue;
      const double was = p99((*b)["outputs"][name]), now = p99(o);
      if (now > kGateP99Growth * was) {
        std::ostringstream s;
        s << r->value("op", "") << " " << r->value("impl", "") << " output " << name << ": p99 error ratio " << now
          << " against the baseline's " << was << " (more than " << kGateP99Growth << "x)";
        out.push_back({"p99_growth", s.str(), r->value("case", ""), replay_command(*r)});
      }
    }
  }
  return out;
}

}  // namespace kv
