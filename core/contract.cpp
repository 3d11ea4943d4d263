// Contracts to JSON and their hash.
#include "core/contract.hpp"

#include <xxhash.h>

#include <limits>
#include <set>

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

const MathError& Contract::math(const std::string& fn) const {
  auto it = math_ulps.find(fn);
  if (it == math_ulps.end()) throw HarnessError("contract declares no ulp error for math function '" + fn + "'");
  return it->second;
}

const MathError* Contract::op_error(const std::string& op) const {
  auto it = math_ulps.find(op);
  return it == math_ulps.end() ? nullptr : &it->second;
}

std::string Contract::form(const std::string& name) const {
  auto it = forms.find(name);
  return it == forms.end() ? "" : it->second;
}

nlohmann::json Contract::to_json() const {
  nlohmann::json j;
  j["acc"] = dtype_name(acc);
  j["u"] = unit();
  j["fma"] = fma;
  j["ftz"] = ftz;
  nlohmann::json mu = nlohmann::json::object();
  for (auto& [fn, x] : math_ulps) {
    mu[fn] = {{"ulps", x.ulps}, {"in", dtype_name(x.in)}};
    if (!x.via.empty()) mu[fn]["via"] = x.via;
  }
  j["math_ulps"] = mu;
  nlohmann::json r = nlohmann::json::object();
  for (auto& [axis, s] : reductions) {
    r[axis] = {{"serial", s.serial}, {"depth", s.depth}, {"partials", s.partials}, {"n_eff", s.n_eff()},
               {"acc", dtype_name(s.acc.value_or(acc))}};
    if (s.ftz) r[axis]["ftz"] = true;
  }
  j["reductions"] = r;
  j["determinism"] = determinism;
  if (!not_produced.empty()) j["not_produced"] = not_produced;
  if (!rounding_sites.empty()) {
    nlohmann::json s = nlohmann::json::object();
    for (auto& [name, d] : rounding_sites) s[name] = dtype_name(d);
    j["rounding_sites"] = s;
  }
  if (!forms.empty()) j["forms"] = forms;
  return j;
}

namespace {

DType dtype_field(const nlohmann::json& v, const std::string& where) {
  if (!v.is_string()) throw UsageError("contract: " + where + " must be a dtype name");
  auto d = parse_dtype(v.get<std::string>());
  if (!d || *d == DType::i32) throw UsageError("contract: " + where + " '" + v.get<std::string>() + "' is not fp32, fp16 or bf16");
  return *d;
}

int64_t count_field(const nlohmann::json& r, const char* key, const std::string& axis) {
  if (!r.contains(key)) return 0;
  const auto& v = r.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0)
    throw UsageError("contract: reductions." + axis + "." + key + " must be a non-negative integer");
  return v.get<int64_t>();
}

/// An error of 2^(p-1) ulps or more is a relative error of 1 or more: the enclosure of
/// every value through that function or division would be unbounded, so nothing the impl
/// computes there would be checked (a vacuous contract), and it is refused.
void check_ulps_bound(const std::string& fn, const MathError& e) {
  if (e.ulps * 2 * unit_roundoff(e.in) >= 1)
    throw UsageError("contract: math_ulps." + fn + ": " + std::to_string(e.ulps) + " ulps of " + std::string(dtype_name(e.in)) +
                     " is a relative error of 1 or more: nothing computed through it would be checked");
}

/// One math_ulps entry: a number (ulps of fp32) or {"ulps": x, "in": dtype, "via": form}.
void read_math_ulps(Contract& c, const std::string& fn, const nlohmann::json& v) {
  const std::string at = "contract: math_ulps." + fn;
  static const std::map<std::string, std::string> vias = {{"exp", "exp2"}, {"div", "rcp"}};
  if (v.is_number()) {
    if (!(v.get<double>() >= 0)) throw UsageError(at + " must be a number >= 0");
    c.math_ulps[fn] = v.get<double>();
    check_ulps_bound(fn, c.math_ulps[fn]);
    return;
  }
  if (!v.is_object() || !v.contains("ulps"))
    throw UsageError(at + " must be a number (ulps of fp32) or {\"ulps\": x, \"in\": dtype}");
  for (auto& [k, x] : v.items())
    if (k != "ulps" && k != "in" && k != "via") throw UsageError(at + ": unknown field '" + k + "' (ulps, in, via)");
  const auto& u = v["ulps"];
  if (!u.is_number() || !(u.get<double>() >= 0)) throw UsageError(at + ".ulps must be a number >= 0");
  MathError e(u.get<double>());
  if (v.contains("in")) e.in = dtype_field(v["in"], "math_ulps." + fn + ".in");
  if (v.contains("via")) {
    auto it = vias.find(fn);
    if (!v["via"].is_string() || it == vias.end() || it->second != v["via"].get<std::string>())
      throw UsageError(at + ".via: " + v["via"].dump() + " is not a known form (exp: \"exp2\", div: \"rcp\")");
    e.via = it->second;
  }
  c.math_ulps[fn] = e;
  check_ulps_bound(fn, e);
}

/// rounding_sites (name -> dtype) and forms (name -> choice); checked against the op later.
void read_sites_and_forms(Contract& c, const nlohmann::json& j) {
  if (j.contains("rounding_sites")) {
    if (!j["rounding_sites"].is_object()) throw UsageError("contract: rounding_sites must map site names to dtypes");
    for (auto& [name, d] : j["rounding_sites"].items())
      c.rounding_sites[name] = dtype_field(d, "rounding_sites." + name);
  }
  if (j.contains("forms")) {
    if (!j["forms"].is_object()) throw UsageError("contract: forms must map form names to choices");
    for (auto& [name, v] : j["forms"].items()) {
      if (!v.is_string()) throw UsageError("contract: forms." + name + " must be a string");
      c.forms[name] = v.get<std::string>();
    }
  }
}

}  // namespace

Contract Contract::from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw UsageError("contract: not a JSON object");
  static const std::set<std::string> keys = {"acc", "u", "fma", "ftz", "math_ulps", "reductions", "determinism",
                                                 "not_produced", "rounding_sites", "forms"};
  for (auto& [k, v] : j.items())
    if (!keys.count(k)) throw UsageError("contract: unknown field '" + k + "'");
  Contract c;
  if (j.contains("acc")) c.acc = dtype_field(j["acc"], "acc");
  // u: kept only where it differs from RN's unit roundoff (a directed rounding mode).
  if (j.contains("u")) {
    if (!j["u"].is_number() || !(j["u"].get<double>() > 0) || j["u"].get<double>() >= 1)
      throw UsageError("contract: u must be a number in (0, 1)");
    double u = j["u"].get<double>();
    if (u < unit_roundoff(c.acc)) throw UsageError("contract: u below the accumulator's unit roundoff");
    if (u != unit_roundoff(c.acc)) c.u = u;
  }
  for (const char* b : {"fma", "ftz"})
    if (j.contains(b)) {
      if (!j[b].is_boolean()) throw UsageError(std::string("contract: ") + b + " must be true or false");
      (b[1] == 'm' ? c.fma : c.ftz) = j[b].get<bool>();
    }
  if (j.contains("math_ulps")) {
    if (!j["math_ulps"].is_object()) throw UsageError("contract: math_ulps must map function names to ulps");
    for (auto& [fn, v] : j["math_ulps"].items()) read_math_ulps(c, fn, v);
  }
  if (j.contains("reductions")) {
    if (!j["reductions"].is_object()) throw UsageError("contract: reductions must map axis names to shapes");
    for (auto& [axis, r] : j["reductions"].items()) {
      if (!r.is_object()) throw UsageError("contract: reductions." + axis + " must be an object");
      static const std::set<std::string> rkeys = {"serial", "depth", "partials", "acc", "n_eff", "ftz"};
      for (auto& [k, v] : r.items())
        if (!rkeys.count(k)) throw UsageError("contract: reductions." + axis + ": unknown field '" + k + "'");
      ReductionShape s{count_field(r, "serial", axis), count_field(r, "depth", axis), count_field(r, "partials", axis),
                       std::nullopt};
      if (s.n_eff() == 0) throw UsageError("contract: reductions." + axis + " declares no rounding steps (serial + depth + partials = 0)");
      if (r.contains("acc")) {
        DType a = dtype_field(r["acc"], "reductions." + axis + ".acc");
        if (a != c.acc) s.acc = a;
      }
      if (r.contains("ftz")) {
        if (!r["ftz"].is_boolean()) throw UsageError("contract: reductions." + axis + ".ftz must be true or false");
        s.ftz = r["ftz"].get<bool>();
      }
      if (r.contains("n_eff") && (!r["n_eff"].is_number_integer() || r["n_eff"].get<int64_t>() != s.n_eff()))
        throw UsageError("contract: reductions." + axis + ".n_eff is not serial + depth + partials");
      c.reductions[axis] = s;
    }
  }
  if (j.contains("determinism")) {
    if (!j["determinism"].is_object()) throw UsageError("contract: determinism must map outputs to claim lists");
    static const std::set<std::string> claims = {"run_to_run", "config_invariant", "gpu_invariant", "batch_invariant"};
    for (auto& [out, v] : j["determinism"].items()) {
      if (!v.is_array()) throw UsageError("contract: determinism." + out + " must be a list");
      DeterminismClaims d;
      for (auto& x : v) {
        if (!x.is_string() || !claims.count(x.get<std::string>()))
          throw UsageError("contract: determinism." + out + ": unknown claim " + x.dump() +
                           " (run_to_run, config_invariant, gpu_invariant, batch_invariant)");
        d.push_back(x.get<std::string>());
      }
      c.determinism[out] = d;
    }
  }
  if (j.contains("not_produced")) {
    if (!j["not_produced"].is_array()) throw UsageError("contract: not_produced must be a list of output names");
    for (auto& x : j["not_produced"]) {
      if (!x.is_string()) throw UsageError("contract: not_produced: " + x.dump() + " is not an output name");
      c.not_produced.insert(x.get<std::string>());
    }
  }
  read_sites_and_forms(c, j);
  return c;
}

uint64_t Contract::hash() const {
  std::string s = to_json().dump();
  return XXH64(s.data(), s.size(), 7);
}

uint64_t Contract::numerics_hash() const {
  nlohmann::json j = to_json();
  j.erase("determinism");
  j.erase("not_produced");
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
