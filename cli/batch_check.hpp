// Running the batch-invariance check (fuzz/batch.hpp) through the worker: a case and its
// companion with more leading rows, each run keeping its outputs, compared bit by bit.
// The fuzz campaign runs it on a sample of passing cases; `kverify replay
// --batch-extra-rows N` reruns one pair, fails the same way and leaves a bundle.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/common.hpp"
#include "run/supervisor.hpp"
#include "core/safetensors.hpp"

namespace kv {

/// A worker that keeps every case's outputs in `kept_dir` (worker_args + --outputs-dir; the
/// directory is created).
std::vector<std::string> keeping_outputs(std::vector<std::string> worker_args, const std::string& kept_dir);

/// Runs k through `sup`, a worker keeping outputs in kept_dir, and takes its outputs off the
/// disk; none where it left no judged outputs (a verdict other than pass, unverifiable or
/// fail). `result`, where given, receives the case's result line.
std::optional<std::map<std::string, StoredTensor>> run_keeping(Supervisor& sup, const RunEnv& env,
                                                               const std::string& kept_dir, const Case& k,
                                                               nlohmann::json* result = nullptr);

struct BatchPair {
  nlohmann::json check;  // compare_batch's object, with "extra_rows"
  std::map<std::string, StoredTensor> small, big;
};

/// Runs c (whose result line is `result`) and `companion` through `sup`, a worker keeping
/// outputs in kept_dir, and compares them; none where either run left no judged outputs.
std::optional<BatchPair> run_batch_pair(Supervisor& sup, const RunEnv& env, const std::string& kept_dir, const Case& c,
                                        const Case& companion, const nlohmann::json& result);

/// `kverify replay '<case>' --batch-extra-rows N`: runs the case; where it passes and claims
/// batch_invariant, runs its companion with N more leading rows, appends the case's result
/// line (a fail naming the violations when its bits change) and on a violation leaves
/// <out>/repro/<case_id>/ with both runs' outputs. 0: the claim held (or none is made), 1:
/// a violation, or the case itself failed.
int replay_batch(const Case& c, int64_t extra_rows, const Common& common, const RunEnv& env, Extensions& ext);

}  // namespace kv
