// The batch-invariance pair through the worker, and its replay (cli/batch_check.hpp).
#include "cli/batch_check.hpp"

#include <filesystem>
#include <iostream>

#include "fuzz/batch.hpp"
#include "run/repro.hpp"
#include "check/results.hpp"
#include "core/digest.hpp"

namespace kv {

namespace fs = std::filesystem;

std::vector<std::string> keeping_outputs(std::vector<std::string> worker_args, const std::string& kept_dir) {
  fs::create_directories(kept_dir);
  worker_args.insert(worker_args.end(), {"--outputs-dir", fs::absolute(kept_dir).string()});
  return worker_args;
}

std::optional<std::map<std::string, StoredTensor>> run_keeping(Supervisor& sup, const RunEnv& env,
                                                               const std::string& kept_dir, const Case& k,
                                                               nlohmann::json* result) {
  const nlohmann::json res = sup.run(k, env);
  if (result) *result = res;
  const std::string v = res.value("verdict", "error");
  const fs::path path = fs::path(kept_dir) / (hex64(k.case_id()) + ".safetensors");
  if ((v != "pass" && v != "unverifiable" && v != "fail") || !fs::exists(path)) return std::nullopt;
  auto t = read_safetensors(path.string());
  fs::remove(path);
  return t;
}

std::optional<BatchPair> run_batch_pair(Supervisor& sup, const RunEnv& env, const std::string& kept_dir, const Case& c,
                                        const Case& companion, const nlohmann::json& result) {
  auto outputs_of = [&](const Case& k) { return run_keeping(sup, env, kept_dir, k); };
  BatchPair p;
  auto small = outputs_of(c);
  auto big = small ? outputs_of(companion) : std::nullopt;
  if (!small || !big) return std::nullopt;
  p.small = std::move(*small);
  p.big = std::move(*big);
  p.check = compare_batch(companion, result, p.small, p.big);
  p.check["extra_rows"] = companion.shape[0] - c.shape[0];
  return p;
}

int replay_batch(const Case& c, int64_t extra_rows, const Common& common, const RunEnv& env, Extensions& ext) {
  const fs::path out = common.out;
  fs::create_directories(out);
  const std::string kept = (out / "batch-outputs").string();
  Supervisor sup(keeping_outputs(worker_args(common, env, ext), kept), common.timeout_s);
  if (ext.has_worker()) sup.set_relay([&ext](const nlohmann::json& req) { return ext.relay(req); });
  ResultsWriter w((out / "results.jsonl").string());
  nlohmann::json j = sup.run(c, env);
  fs::remove(fs::path(kept) / (hex64(c.case_id()) + ".safetensors"));  // run_batch_pair runs it again
  const std::string v = j.value("verdict", "error");
  std::optional<Case> comp;
  if (v == "pass" || v == "unverifiable") comp = batch_companion(c, j, extra_rows);
  std::optional<BatchPair> pair;
  if (comp) pair = run_batch_pair(sup, env, kept, c, *comp, j);
  bool broken = false;
  if (pair) {
    broken = apply_batch_check(j, pair->check);
    if (broken) j["repro"] = write_batch_repro(fs::absolute(out / "repro").string(), c, j, pair->small, pair->big);
  }
  w.append(j);
  const std::string verdict = j.value("verdict", "error");
  std::cout << verdict << " " << c.str();
  if (j.contains("reason")) std::cout << "\n  " << j["reason"].get<std::string>();
  std::cout << "\n";
  if (!comp) {
    std::cout << "batch invariance: not checked ("
              << (v != "pass" && v != "unverifiable"
                      ? "the case itself did not pass"
                      : "no output claims batch_invariant, or the case has layouts or aliases")
              << ")\n";
  } else if (!pair) {
    std::cout << "batch invariance: not checked (the companion " << comp->str() << " left no judged outputs)\n";
  } else {
    for (auto& [name, o] : pair->check["outputs"].items())
      std::cout << "batch invariance of " << name << " at " << comp->shape[0] << " rows: " << o["n_diff"].get<int64_t>()
                << " elements differ\n";
    if (broken)
      std::cout << "  replay: " << j["replay"].get<std::string>() << "\n  repro: " << j["repro"].get<std::string>()
                << "\n";
  }
  const bool failed = verdict == "fail" || verdict == "error";
  return failed || !ext.failures().empty() ? 1 : 0;
}

}  // namespace kv
