// Contracts to JSON and their hash.
#include "core/contract.hpp"

#include <xxhash.h>

#include <limits>

#include "core/error.hpp"

namespace kv {

const ReductionShape& Contract::reduction(const std::string& axis) const {
  auto it = reductions.find(axis);
  if (it == reductions.end()) throw HarnessError("contract declares no reduction shape for axis '" + axis + "'");
  return it->second;
}

double Contract::unit_of(const std::string& axis) const {
  const ReductionShape& r = reduction(axis);
  if (!r.acc || *r.acc == acc) return unit();
  // A directed-rounding contract (u = 2^(1-p)) keeps its factor of two on every axis.
  return unit_roundoff(*r.acc) * (unit() / unit_roundoff(acc));
}

double Contract::ulps(const std::string& fn) const {
  auto it = math_ulps.find(fn);
  if (it == math_ulps.end()) throw HarnessError("contract declares no ulp error for math function '" + fn + "'");
  return it->second;
}

nlohmann::json Contract::to_json() const {
  nlohmann::json j;
  j["acc"] = dtype_name(acc);
  j["u"] = unit();
  j["fma"] = fma;
  j["ftz"] = ftz;
  j["math_ulps"] = math_ulps;
  nlohmann::json r = nlohmann::json::object();
  for (auto& [axis, s] : reductions)
    r[axis] = {{"serial", s.serial}, {"depth", s.depth}, {"partials", s.partials}, {"n_eff", s.n_eff()},
               {"acc", dtype_name(s.acc.value_or(acc))}};
  j["reductions"] = r;
  j["determinism"] = determinism;
  return j;
}

uint64_t Contract::hash() const {
  std::string s = to_json().dump();
  return XXH64(s.data(), s.size(), 7);
}

uint64_t Contract::numerics_hash() const {
  nlohmann::json j = to_json();
  j.erase("determinism");
  std::string s = j.dump();
  return XXH64(s.data(), s.size(), 11);
}

double gamma_n(int64_t n, double u) {
  double nu = static_cast<double>(n) * u;
  if (nu >= 1.0) return std::numeric_limits<double>::infinity();
  // Rounded up: the quotient's own rounding error is covered by the factor.
  return nu / (1.0 - nu) * (1.0 + 0x1p-50);
}

}  // namespace kv
