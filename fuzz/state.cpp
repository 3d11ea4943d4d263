// Campaign state: campaign.json, option checks on resume, (op, impl) pairs (fuzz/state.hpp).
#include "fuzz/state.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.hpp"
#include "core/registry.hpp"

namespace kv {

namespace fs = std::filesystem;

Shard parse_shard(const std::string& s) {
  auto slash = s.find('/');
  if (slash == std::string::npos) throw UsageError("malformed --shard '" + s + "' (expected i/N)");
  Shard sh{parse_int(s.substr(0, slash), "shard index"), parse_int(s.substr(slash + 1), "shard count")};
  if (sh.n < 1 || sh.i < 0 || sh.i >= sh.n) throw UsageError("--shard " + s + ": need 0 <= i < N");
  return sh;
}

nlohmann::json CampaignState::to_json() const {
  nlohmann::json p = nlohmann::json::array();
  for (auto& [op, impl] : pairs) p.push_back({op, impl});
  return {{"schema", 1},
          {"generator", kFuzzGeneratorVersion},
          {"seed", seed},
          {"ops", ops},
          {"pairs", p},
          {"max_elements", max_elements},
          {"shard", shard.str()},
          {"curated", curated},
          {"device", device},
          {"profile", profile.to_json()},
          {"budget_cases", budget_cases},
          {"budget_seconds", budget_seconds},
          {"sessions", sessions},
          {"resume", "kverify fuzz --out DIR --resume (the options above are read from here)"}};
}

namespace {

std::vector<std::pair<std::string, std::string>> resolve_pairs(const std::vector<std::string>& ops,
                                                               const std::vector<std::string>& impls,
                                                               const std::string& device) {
  const Registry& reg = registry();
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& op : ops) {
    reg.op(op);  // unknown op: UsageError naming the known ones
    size_t before = out.size();
    for (auto* im : reg.impls(op)) {
      bool named = std::find(impls.begin(), impls.end(), im->name()) != impls.end();
      if (impls.empty() ? (!im->test_only() && im->device() == device) : named) out.push_back({op, im->name()});
    }
    if (out.size() == before)
      throw UsageError("no impl of " + op + (impls.empty() ? " on device " + device : " among the --impl names"));
  }
  for (auto& name : impls)
    if (std::none_of(out.begin(), out.end(), [&](auto& p) { return p.second == name; }))
      reg.impl(ops.front(), name);  // throws, naming the known impls
  return out;
}

std::vector<std::string> expand_ops(const std::vector<std::string>& ops) {
  if (std::find(ops.begin(), ops.end(), "all") == ops.end()) return ops;
  std::vector<std::string> all;
  for (auto* op : registry().ops()) all.push_back(op->name());
  return all;
}

template <class T>
void must_match(const std::optional<T>& given, const T& stored, const std::string& what, const std::string& path) {
  if (given && !(*given == stored))
    throw UsageError("--resume: " + what + " differs from the campaign's (" + path +
                     "); leave it out to use the campaign's, or start a new campaign in another --out");
}

}  // namespace

CampaignState open_campaign(const CampaignOptions& o) {
  const fs::path dir(o.out), file = dir / "campaign.json";
  CampaignState st;
  const bool exists = fs::exists(file);
  if (exists && !o.resume)
    throw UsageError(o.out + " already holds a campaign (campaign.json): pass --resume to continue it, or choose another --out");
  if (!exists && fs::exists(dir / "results.jsonl") && fs::file_size(dir / "results.jsonl") > 0)
    throw UsageError(o.out + "/results.jsonl exists but no campaign.json: choose another --out for the campaign");
  if (exists) {
    try {
      std::ifstream f(file);
      auto j = nlohmann::json::parse(f);
      if (j.at("generator").get<int>() != kFuzzGeneratorVersion)
        throw UsageError(file.string() + " was written by fuzz generator version " +
                         std::to_string(j.at("generator").get<int>()) + ", this build has " +
                         std::to_string(kFuzzGeneratorVersion) + ": its cases cannot be regenerated; start a new campaign");
      st.seed = j.at("seed").get<uint64_t>();
      st.ops = j.at("ops").get<std::vector<std::string>>();
      for (auto& p : j.at("pairs")) st.pairs.push_back({p.at(0).get<std::string>(), p.at(1).get<std::string>()});
      st.max_elements = j.at("max_elements").get<int64_t>();
      st.shard = parse_shard(j.at("shard").get<std::string>());
      st.curated = j.at("curated").get<std::string>();
      st.device = j.at("device").get<std::string>();
      st.profile = DeviceProfile::from_json(j.at("profile"));
      st.budget_cases = j.at("budget_cases").get<int64_t>();
      st.budget_seconds = j.at("budget_seconds").get<double>();
      st.sessions = j.value("sessions", 1);
    } catch (const UsageError&) {
      throw;
    } catch (const std::exception& e) {
      throw UsageError("malformed " + file.string() + ": " + e.what());
    }
    const std::string p = file.string();
    must_match(o.seed, st.seed, "--seed", p);
    if (!o.ops.empty()) must_match(std::optional(expand_ops(o.ops)), st.ops, "--op", p);
    if (!o.impls.empty()) must_match(std::optional(resolve_pairs(st.ops, o.impls, st.device)), st.pairs, "--impl", p);
    must_match(o.max_elements, st.max_elements, "--max-elements", p);
    if (o.shard) must_match(std::optional(parse_shard(*o.shard).str()), st.shard.str(), "--shard", p);
    must_match(o.curated, st.curated, "--curated", p);
    must_match(std::optional(o.device), st.device, "--device", p);
  } else {
    if (o.ops.empty()) throw UsageError("fuzz needs at least one --op (or --op all)");
    if (o.seed) {
      st.seed = *o.seed;
    } else {
      std::random_device rd;
      st.seed = rd();
    }
    st.ops = expand_ops(o.ops);
    st.device = o.device;
    st.profile = o.profile;
    st.pairs = resolve_pairs(st.ops, o.impls, st.device);
    if (o.max_elements) st.max_elements = *o.max_elements;
    if (st.max_elements < 1) throw UsageError("--max-elements must be >= 1");
    if (o.shard) st.shard = parse_shard(*o.shard);
    if (o.curated) st.curated = *o.curated;
    if (!o.budget_cases && !o.budget_seconds) st.budget_cases = 100;
  }
  if (o.budget_cases) st.budget_cases = *o.budget_cases;
  if (o.budget_seconds) st.budget_seconds = *o.budget_seconds;
  if (st.budget_cases < -1) throw UsageError("--budget-cases must be >= 0");
  if (st.budget_seconds < 0) throw UsageError("--budget-seconds must be >= 0");
  ++st.sessions;
  fs::create_directories(dir);
  std::ofstream(file) << st.to_json().dump(2) << "\n";
  return st;
}

std::vector<std::string> stored_ops(const std::string& dir) {
  try {
    std::ifstream f(fs::path(dir) / "campaign.json");
    if (!f) return {};
    return nlohmann::json::parse(f).at("ops").get<std::vector<std::string>>();
  } catch (const std::exception&) {
    return {};
  }
}

}  // namespace kv
