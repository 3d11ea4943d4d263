// The C ABI (include/kverify/kverify_c.h): impls of the calling process registered as
// external impls whose tensors stay in this process, campaigns and replays run here (no
// case-running child process: the impl lives in this one), reports written from results.
#include "kverify/kverify_c.h"

#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>

#include "capi/callback_transport.hpp"
#include "check/results.hpp"
#include "cli/common.hpp"
#include "cli/report_files.hpp"
#include "core/child_io.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "fuzz/campaign.hpp"
#include "run/runner.hpp"

namespace {

using json = nlohmann::json;

char* dup(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

char* dup(const json& j) { return dup(j.dump(-1, ' ', false, json::error_handler_t::replace)); }

void init() {
  static std::once_flag once;
  std::call_once(once, [] { kv::register_builtin(); });
}

/// The run's environment: the device (host unless "device" says cuda) and a fresh run id.
kv::RunEnv env_of(const json& o) {
  kv::Common cm;
  cm.device = o.value("device", "host");
  cm.contract = o.value("contract", "declared");
  if (cm.contract != "declared" && cm.contract != "audited")
    throw kv::UsageError("contract must be declared or audited, not '" + cm.contract + "'");
  return kv::make_env(cm);
}

kv::CampaignOptions campaign_options(const json& o, const kv::RunEnv& env) {
  kv::CampaignOptions co;
  co.out = o.at("out").get<std::string>();
  co.device = env.device.kind;
  co.profile = env.device.profile;
  co.ops = {o.at("op").get<std::string>()};
  co.impls = {o.at("impl").get<std::string>()};
  co.seed = o.value("seed", uint64_t(0));
  if (o.contains("cases")) co.budget_cases = o["cases"].get<int64_t>();
  if (o.contains("seconds")) co.budget_seconds = o["seconds"].get<double>();
  if (!co.budget_cases && !co.budget_seconds) co.budget_cases = 100;
  if (o.contains("max_elements")) co.max_elements = o["max_elements"].get<int64_t>();
  if (o.contains("shard")) co.shard = o["shard"].get<std::string>();
  co.curated = o.value("curated", std::string("builtin"));
  co.resume = o.value("resume", false);
  co.max_shrink_runs = o.value("max_shrink_runs", 200);
  co.max_shrink_seconds = o.value("max_shrink_seconds", 300.0);
  return co;
}

/// The caller's SIGINT and SIGTERM handling, kept while a campaign installs its own (which
/// record the signal and wind the campaign down) and given back after it; the recorded
/// signal is cleared on both sides, so one Ctrl-C does not stop every later campaign.
struct CallerSignals {
  struct sigaction int_{}, term_{};
  CallerSignals() {
    sigaction(SIGINT, nullptr, &int_);
    sigaction(SIGTERM, nullptr, &term_);
    kv::clear_stop_signal();
  }
  ~CallerSignals() {
    sigaction(SIGINT, &int_, nullptr);
    sigaction(SIGTERM, &term_, nullptr);
    kv::clear_stop_signal();
  }
};

json check(const json& o) {
  kv::RunEnv env = env_of(o);
  kv::CampaignOptions co = campaign_options(o, env);
  kv::registry().impl(co.ops[0], co.impls[0]);  // UsageError naming the known impls
  kv::make_out_dir(co.out);
  env.repro_dir = (std::filesystem::path(co.out) / "repro").string();
  kv::RefCache cache;
  kv::CampaignIO io;
  io.run = [&](const kv::Case& c) { return kv::run_case(c.str(), env, cache); };
  io.refused = [&](const kv::Case& c) { return kv::registry().impl(c.op, c.impl).refusal(c, env.device.profile); };
  int code = 0, stopped = 0;
  {
    CallerSignals keep;
    code = kv::run_campaign(co, io);
    stopped = kv::stop_signal();
  }
  const std::string results = (std::filesystem::path(co.out) / "results.jsonl").string();
  std::map<std::string, int64_t> counts;
  for (auto& j : kv::read_results(results)) ++counts[j.value("verdict", "error")];
  // Each failure's minimal case again, for its whole result line (the worst element's bound).
  json failures = json::array();
  for (auto& f : kv::read_results((std::filesystem::path(co.out) / "failures.jsonl").string())) {
    json line = kv::run_case(f.value("case", ""), env, cache);
    const std::string v = line.value("verdict", "");
    if (v != f.value("verdict", "")) {  // the impl answers this case differently run to run
      line["reason"] = f.value("reason", "") + " (a rerun of this case gave " + v + ": the impl is not deterministic)";
      line["verdict"] = f.value("verdict", "");
    }
    line["shrink"] = f.value("shrink", json::object());
    line["original"] = f.value("original", json::object());
    failures.push_back(line);
  }
  json a = {{"code", code}, {"results", results}, {"counts", counts}, {"failures", failures}, {"run_id", env.run_id}};
  if (stopped) a["interrupted"] = stopped;
  return a;
}

}  // namespace

extern "C" {

uint32_t kvc_abi_version(void) { return KVC_ABI_VERSION; }

char* kvc_register(const char* decl_json, kvc_run_fn run, kvc_contract_fn contract, void* user) {
  try {
    init();
    if (!run) return dup(std::string("kvc_register: no run function"));
    json d = json::parse(decl_json);
    kv::registry().remove_impl(d.value("op", ""), d.value("impl", ""));
    kv::register_external(kv::registry(), json::array({d}), std::make_shared<kv::CallbackTransport>(run, contract, user), "");
    return nullptr;
  } catch (const std::exception& e) {
    return dup(std::string("kvc_register: ") + e.what());
  }
}

char* kvc_check(const char* options_json) {
  try {
    init();
    return dup(check(json::parse(options_json)));
  } catch (const kv::UsageError& e) {
    return dup(json{{"code", 2}, {"error", e.what()}});
  } catch (const std::exception& e) {
    return dup(json{{"code", 2}, {"error", std::string(e.what())}});
  }
}

char* kvc_replay(const char* case_line, const char* options_json) {
  try {
    init();
    json o = options_json && *options_json ? json::parse(options_json) : json::object();
    kv::RunEnv env = env_of(o);
    try {
      kv::Case c = kv::Case::parse(case_line);
      kv::registry().normalize(c);
    } catch (const std::exception& e) {
      return dup(json{{"usage_error", std::string(e.what())}});
    }
    kv::RefCache cache;
    return dup(kv::run_case(case_line, env, cache));
  } catch (const std::exception& e) {
    return dup(json{{"verdict", "error"}, {"reason", std::string(e.what())}});
  }
}

char* kvc_report(const char* results_path, const char* out_dir, const char* title) {
  try {
    init();
    const auto lines = kv::read_results(results_path);
    std::filesystem::create_directories(out_dir);
    kv::write_report_files(out_dir, lines, {}, 2.0, title ? title : "", {results_path});
    return nullptr;
  } catch (const std::exception& e) {
    return dup(std::string("kvc_report: ") + e.what());
  }
}

void kvc_free(char* p) { std::free(p); }

}  // extern "C"
