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

/// A math function's or approximate operation's error: ulps of `in` (JSON {"ulps": 2, "in":
/// "fp32", "via": ...}; a bare number is ulps of fp32). via: how the impl evaluates it where
/// that is not the direct form: "exp": "exp2" (exp2(x * log2 e), the product rounded in fp32,
/// then exp2 within these ulps), "div": "rcp" (a * rcp(b), rcp within these ulps, the product
/// one acc rounding).
struct MathError {
  double ulps = 0;
  DType in = DType::f32;
  std::string via;
  MathError(double u = 0) : ulps(u) {}  // NOLINT: a bare number is ulps of fp32
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
  /// Max ulp error of each math function and approximate operation, in ulps of the dtype it
  /// names (MathError::in; fp32, the precision the functions compute in, for rsqrt's rsqrtf),
  /// checked against calibrate-math on each GPU. "div" (approximate division) is optional:
  /// without it a division is one acc rounding.
  std::map<std::string, MathError> math_ulps;
  /// Evaluation forms the op's definition names (core/sites.hpp form_defs), where the impl
  /// evaluates another algebraically equal form: e.g. {"softmax.bwd_dx": "distributed"}
  /// (in JSON only when not empty).
  std::map<std::string, std::string> forms;
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
  /// fn's declared error (throws where the contract declares none).
  const MathError& math(const std::string& fn) const;
  /// An optional approximate operation's ("div") declared error, if declared.
  const MathError* op_error(const std::string& op) const;
  /// The form the contract declares for form point `name`, or "" (the definition's own).
  std::string form(const std::string& name) const;
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
