// What an external impl takes (ext/accepts.hpp).
#include "ext/accepts.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/registry.hpp"

namespace kv {

namespace {

std::string list(const std::set<std::string>& s) {
  std::string r;
  for (auto& x : s) r += (r.empty() ? "" : ", ") + x;
  return r;
}

/// A list of strings, each among `allowed` (where not empty).
std::set<std::string> string_set(const nlohmann::json& v, const std::string& what, const std::set<std::string>& allowed) {
  if (!v.is_array()) throw UsageError(what + " must be a list of strings");
  if (v.empty()) throw UsageError(what + " is empty: the impl would accept nothing (leave the field out to accept any)");
  std::set<std::string> s;
  for (auto& x : v) {
    if (!x.is_string() || (!allowed.empty() && !allowed.count(x.get<std::string>())))
      throw UsageError(what + ": " + x.dump() + " is not one of the values it can hold");
    s.insert(x.get<std::string>());
  }
  return s;
}

/// An attribute's value as a normalized case holds it: reals as hex floats, integers in
/// decimal, choices among the op's.
std::string canonical(const AttrSpec& a, const std::string& v, const std::string& what) {
  try {
    if (a.real) return hex_float(parse_real(v, a.name));
    if (a.integer) return std::to_string(parse_int(v, a.name));
  } catch (const UsageError& e) {
    throw UsageError(what + ": " + e.what());
  }
  if (!a.text && std::find(a.choices.begin(), a.choices.end(), v) == a.choices.end()) {
    std::set<std::string> all(a.choices.begin(), a.choices.end());
    throw UsageError(what + ": \"" + v + "\" is not one of " + list(all));
  }
  return v;
}

}  // namespace

std::optional<std::string> Accepts::outside(const Case& c) const {
  if (dtypes)
    for (auto& [t, d] : c.dtypes)
      if (const std::string n(dtype_name(d)); is_float(d) && !dtypes->count(n))
        return "it accepts dtypes " + list(*dtypes) + ", not " + n + " for " + t;
  for (auto& [t, set] : tensor_dtypes)
    if (auto it = c.dtypes.find(t); it != c.dtypes.end() && !set.count(std::string(dtype_name(it->second))))
      return "it accepts dtypes " + list(set) + " for " + t + ", not " + std::string(dtype_name(it->second));
  for (auto& [a, vals] : attrs)
    if (auto it = c.attrs.find(a); it != c.attrs.end() && !vals.count(it->second))
      return "it accepts " + a + " " + list(vals) + ", not " + it->second;
  if (!c.layout.empty() && !layout("strided")) return "it accepts contiguous tensors only";
  if (!c.alias.empty() && !layout("in_place")) return "it does not write outputs over inputs";
  return std::nullopt;
}

bool Accepts::dtype(DType d) const {
  const std::string n(dtype_name(d));
  auto x = tensor_dtypes.find("x");
  return !is_float(d) || ((!dtypes || dtypes->count(n)) && (x == tensor_dtypes.end() || x->second.count(n)));
}

bool Accepts::layout(const std::string& l) const { return !layouts || layouts->count(l); }

nlohmann::json Accepts::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (dtypes) j["dtypes"] = *dtypes;
  if (!tensor_dtypes.empty()) j["dtypes"] = tensor_dtypes;
  if (layouts) j["layouts"] = *layouts;
  if (!attrs.empty()) j["attrs"] = attrs;
  return j;
}

const Accepts* impl_accepts(const Impl& impl) {
  auto* d = dynamic_cast<const DeclaresAccepts*>(&impl);
  return d ? d->accepts() : nullptr;
}

Accepts parse_accepts(const nlohmann::json& j, const std::string& op, const std::string& who) {
  if (!j.is_object()) throw UsageError(who + "accepts must be an object");
  Accepts a;
  for (auto& [k, v] : j.items()) {
    if (k == "dtypes" && v.is_object()) {
      Case ex;  // the op's tensors, from its example case
      ex.op = op, ex.shape = registry().op(op).example_shape(), ex.dtypes = {{"x", DType::f32}};
      registry().op(op).normalize(ex);
      for (auto& [t, vals] : v.items()) {
        if (!ex.dtypes.count(t)) throw UsageError(who + "accepts.dtypes: " + op + " has no tensor '" + t + "'");
        a.tensor_dtypes[t] = string_set(vals, who + "accepts.dtypes." + t, {"fp32", "fp16", "bf16"});
      }
    } else if (k == "dtypes") {
      a.dtypes = string_set(v, who + "accepts.dtypes", {"fp32", "fp16", "bf16"});
    } else if (k == "layouts") {
      a.layouts = string_set(v, who + "accepts.layouts", {"contiguous", "strided", "in_place"});
    } else if (k == "attrs") {
      if (!v.is_object()) throw UsageError(who + "accepts.attrs must map attribute names to value lists");
      const auto specs = registry().op(op).attrs();
      for (auto& [name, vals] : v.items()) {
        auto spec = std::find_if(specs.begin(), specs.end(), [&](const AttrSpec& s) { return s.name == name; });
        if (spec == specs.end()) throw UsageError(who + "accepts.attrs: " + op + " has no attribute '" + name + "'");
        const std::string what = who + "accepts.attrs." + name;
        for (auto& x : string_set(vals, what, {})) a.attrs[name].insert(canonical(*spec, x, what));
        a.attrs[name];  // an empty list: no value (nothing accepted)
      }
    } else {
      throw UsageError(who + "accepts: unknown field '" + k + "' (dtypes, attrs, layouts)");
    }
  }
  return a;
}

Accepts parse_accepts(const std::string& text, const std::string& op, const std::string& who) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    throw UsageError(who + "accepts is not JSON: " + e.what());
  }
  return parse_accepts(j, op, who);
}

}  // namespace kv
