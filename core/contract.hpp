// Numerics contracts: what an impl declares, per config, about how it computes.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace kv {

/// How one reduced axis is summed: a serial run per thread, a tree, then partials
/// summed serially. Every term passes through at most n_eff = s + d + p roundings.
struct ReductionShape {
  int64_t serial = 0;
  int64_t depth = 0;
  int64_t partials = 0;
  /// The dtype this axis accumulates in, where it differs from the contract's acc (e.g.
  /// dW summed in fp32 while mode none computes rows in x's dtype).
  std::optional<DType> acc;
  /// The sum flushes subnormal operands and results to zero (fp32 atomicAdd on global
  /// memory does, whatever -ftz says): each term and each addition may lose up to the
  /// accumulator's smallest normal.
  bool ftz = false;
  int64_t n_eff() const { return serial + depth + partials; }
};

/// Determinism claims per output: any of run_to_run, config_invariant, gpu_invariant,
/// batch_invariant; an empty list means none.
using DeterminismClaims = std::vector<std::string>;

struct Contract {
  DType acc = DType::f32;
  /// Unit roundoff of one accumulator operation; 0 means RN's 2^-p of acc. A directed
  /// rounding mode needs 2^(1-p).
  double u = 0;
  bool fma = false;
  bool ftz = false;
  /// Max ulp error of each math function in its own precision (rsqrt: fp32 rsqrtf),
  /// checked against calibrate-math on each GPU.
  std::map<std::string, double> math_ulps;
  std::map<std::string, ReductionShape> reductions;   // per reduced axis
  std::map<std::string, DeterminismClaims> determinism;  // per output tensor
  /// Outputs of the op this impl does not compute (a norm backward giving dx but not dW):
  /// judged on the others, these listed as not produced (in JSON only when not empty).
  std::set<std::string> not_produced;
  /// Rounding sites of the op's definition this impl rounds, and to which dtype (core/sites.hpp;
  /// in JSON only when not empty).
  std::map<std::string, DType> rounding_sites;

  double unit() const { return u > 0 ? u : unit_roundoff(acc); }
  /// Accumulator dtype and unit roundoff of one reduced axis.
  DType acc_of(const std::string& axis) const { return reduction(axis).acc.value_or(acc); }
  double unit_of(const std::string& axis) const;
  const ReductionShape& reduction(const std::string& axis) const;
  double ulps(const std::string& fn) const;
  nlohmann::json to_json() const;
  /// A contract declared outside kverify (plugins, workers): the schema of to_json, read
  /// strictly (unknown fields, dtypes, claims or negative lengths throw UsageError naming them).
  static Contract from_json(const nlohmann::json& j);
  uint64_t hash() const;
  /// Hash of what determines the enclosure (everything but the determinism claims).
  uint64_t numerics_hash() const;
};

/// gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability, Lemma 3.1); +inf when n u >= 1.
double gamma_n(int64_t n, double u);

}  // namespace kv
