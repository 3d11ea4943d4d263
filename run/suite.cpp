// Suite expansion.
#include "run/suite.hpp"

#include <algorithm>
#include <fstream>
#include <set>

#include "core/error.hpp"
#include "core/registry.hpp"

namespace kv {

namespace {

template <class T>
std::vector<T> list_of(const nlohmann::json& j, const char* key, std::vector<T> def) {
  if (!j.contains(key)) return def;
  std::vector<T> out;
  for (auto& v : j.at(key)) out.push_back(v.get<T>());
  return out;
}

/// Seeds as JSON numbers or decimal strings, never negative (nlohmann would wrap -1 to 2^64 - 1).
std::vector<uint64_t> seeds_of(const nlohmann::json& j) {
  if (!j.contains("seeds")) return {1};
  std::vector<uint64_t> out;
  for (auto& v : j.at("seeds")) out.push_back(parse_seed(v.is_string() ? v.get<std::string>() : v.dump()));
  return out;
}

/// A field this reader does not know is a typo that would otherwise be ignored.
void check_fields(const nlohmann::json& j, const std::vector<std::string>& known, const std::string& where) {
  if (!j.is_object()) throw UsageError(where + " must be a JSON object");
  for (auto& [k, v] : j.items())
    if (std::find(known.begin(), known.end(), k) == known.end()) throw UsageError(unknown_name("field", k, known, " in " + where));
}

std::map<std::string, std::vector<std::string>> map_of(const nlohmann::json& j, const char* key) {
  std::map<std::string, std::vector<std::string>> out;
  if (!j.contains(key)) return out;
  for (auto& [k, v] : j.at(key).items())
    for (auto& x : v) out[k].push_back(x.is_string() ? x.get<std::string>() : x.dump());
  return out;
}

}  // namespace

std::map<std::string, DType> parse_dtypes_arg(const std::string& s) {
  std::map<std::string, DType> out;
  auto one = [](const std::string& name) {
    auto d = parse_dtype(name);
    if (!d) throw UsageError("unknown dtype '" + name + "' (fp32, fp16, bf16)");
    return *d;
  };
  if (s.find_first_of(":=") == std::string::npos) {
    out["x"] = one(s);
    return out;
  }
  for (auto& [k, v] : parse_kv_list(s, "dtypes")) out[k] = one(v);
  return out;
}

namespace {

/// Cartesian product of a map of lists.
std::vector<std::map<std::string, std::string>> product(const std::map<std::string, std::vector<std::string>>& m) {
  std::vector<std::map<std::string, std::string>> out = {{}};
  for (auto& [k, vals] : m) {
    std::vector<std::map<std::string, std::string>> next;
    for (auto& partial : out)
      for (auto& v : vals) {
        auto p = partial;
        p[k] = v;
        next.push_back(std::move(p));
      }
    out = std::move(next);
  }
  return out;
}

}  // namespace

std::vector<SuiteEntry> load_suite(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw UsageError("cannot read suite file '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return parse_suite(text, path);
}

std::vector<SuiteEntry> parse_suite(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
    check_fields(j, {"name", "about", "entries"}, "suite file '" + path + "'");
    std::vector<SuiteEntry> out;
    for (auto& e : j.at("entries")) {
      check_fields(e, {"ops", "impls", "dtypes", "shapes", "attrs", "configs", "dists", "seeds", "layouts", "about"},
                   "an entry of suite file '" + path + "'");
      SuiteEntry s;
      s.ops = list_of<std::string>(e, "ops", {});
      s.impls = list_of<std::string>(e, "impls", {});
      s.dtypes = list_of<std::string>(e, "dtypes", {"fp32"});
      s.shapes = list_of<std::string>(e, "shapes", {});
      s.attrs = map_of(e, "attrs");
      s.configs = map_of(e, "configs");
      s.dists = list_of<std::string>(e, "dists", {"normal"});
      s.layouts = list_of<std::string>(e, "layouts", {""});
      s.seeds = seeds_of(e);
      if (s.ops.empty() || s.shapes.empty()) throw UsageError("suite entry needs 'ops' and 'shapes'");
      out.push_back(std::move(s));
    }
    return out;
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError("malformed suite file '" + path + "': " + e.what());
  }
}

std::vector<Case> expand_suite(const std::vector<SuiteEntry>& entries, const std::string& device) {
  std::vector<Case> out;
  std::set<std::string> seen;
  const Registry& reg = registry();
  for (auto& e : entries) {
    // An attribute or knob that no op (impl) of the entry has is a typo, not a choice
    // that applies elsewhere: name it rather than run without it.
    std::vector<std::string> attr_names, knob_names;
    for (auto& opname : e.ops) {
      for (auto& a : reg.op(opname).attrs()) attr_names.push_back(a.name);  // unknown op: UsageError
      for (auto* i : reg.impls(opname))
        for (auto& kn : i->knobs()) knob_names.push_back(kn.name);
    }
    for (auto* v : {&attr_names, &knob_names}) {
      std::sort(v->begin(), v->end());
      v->erase(std::unique(v->begin(), v->end()), v->end());
    }
    for (auto& [k, v] : e.attrs)
      if (std::find(attr_names.begin(), attr_names.end(), k) == attr_names.end())
        throw UsageError(unknown_name("attribute", k, attr_names, " for the selected ops"));
    for (auto& [k, v] : e.configs)
      if (std::find(knob_names.begin(), knob_names.end(), k) == knob_names.end())
        throw UsageError("invalid config: " + unknown_name("knob", k, knob_names, " for the selected impls"));
    for (auto& opname : e.ops) {
      std::vector<const Impl*> impls;
      if (e.impls.empty()) {
        for (auto* i : reg.impls(opname))
          if (!i->test_only() && i->device() == device) impls.push_back(i);
      } else {
        for (auto& n : e.impls) impls.push_back(&reg.impl(opname, n));
      }
      for (auto* impl : impls) {
        std::map<std::string, std::vector<std::string>> knobs;
        for (auto& kn : impl->knobs())
          if (auto it = e.configs.find(kn.name); it != e.configs.end()) knobs[kn.name] = it->second;
        const OpBinding& op = reg.op(opname);
        std::map<std::string, std::vector<std::string>> attrs;
        for (auto& a : op.attrs())
          if (auto it = e.attrs.find(a.name); it != e.attrs.end()) attrs[a.name] = it->second;
        for (auto& cfg : product(knobs))
          for (auto& at : product(attrs))
            for (auto& dt : e.dtypes)
              for (auto& sh : e.shapes)
                for (auto& dist : e.dists)
                  for (auto& lay : e.layouts)
                    for (auto seed : e.seeds) {
                      Case c;
                      c.op = opname;
                      c.impl = impl->name();
                      c.config = cfg;
                      c.attrs = at;
                      c.shape = parse_shape(sh);
                      c.dist = dist;
                      c.seed = seed;
                      c.dtypes = parse_dtypes_arg(dt);
                      if (!lay.empty()) c.layout = parse_layout(lay);
                      reg.normalize(c);
                      if (seen.insert(c.str()).second) out.push_back(std::move(c));
                    }
      }
    }
  }
  return out;
}

}  // namespace kv
