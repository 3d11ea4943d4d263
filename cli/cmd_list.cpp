// `kverify list`: ops, attributes, impls, their knobs and a contract of each (--json:
// machine-readable), with the plugins and worker given loaded.
#include <iostream>

#include "cli/command.hpp"
#include "cli/common.hpp"
#include "core/registry.hpp"
#include "core/sites.hpp"
#include "ext/accepts.hpp"

namespace kv {

namespace {

struct ListArgs : CommandArgs {
  bool json = false;
  Common common;
};

/// Every op with its attributes and its impls (test-only ones left out), each impl with its
/// knobs, what it accepts (where it declares it) and its contract at the op's example
/// shape in bf16.
nlohmann::json list_json() {
  const Registry& reg = registry();
  nlohmann::json j = nlohmann::json::array();
  for (auto* op : reg.ops()) {
    nlohmann::json o = {{"op", op->name()}, {"dists", op->dists()}};
    nlohmann::json attrs = nlohmann::json::array();
    for (auto& a : op->attrs()) attrs.push_back({{"name", a.name}, {"default", a.def}, {"choices", a.choices}});
    o["attrs"] = attrs;
    nlohmann::json sites = nlohmann::json::array();  // rounding sites (core/sites.hpp)
    for (auto& s : sites_of(op->name())) {
      sites.push_back({{"name", s.name}, {"kind", s.kind}, {"what", s.what}, {"declarable", s.kind != "mandated"}});
      if (!s.alias.empty()) sites.back()["deprecated_attribute"] = s.alias;
    }
    o["rounding_sites"] = sites;
    // The functions the definition calls (a contract must give their error) and the
    // approximate operations it may declare; math_ulps name their unit ({"ulps": 2, "in":
    // "fp32"}; a bare number is ulps of fp32, the precision the definition evaluates in).
    nlohmann::json fns = nlohmann::json::array();
    const bool ce = op->name().rfind("cross_entropy", 0) == 0 || op->name().rfind("fused_linear_cross_entropy", 0) == 0;
    for (auto& f : math_functions_of(op->name())) {
      fns.push_back({{"name", f}, {"ulps_of", "fp32"}, {"via", vias_of(f)}, {"required", !(ce && f == "tanh")}});
      if (ce && f == "tanh") fns.back()["what"] = "required only under softcap > 0";
    }
    for (auto& f : approximate_ops_of(op->name()))
      fns.push_back({{"name", f}, {"ulps_of", "fp32"}, {"via", vias_of(f)}, {"required", false},
                     {"what", "every division of the definition; not declared: exact, then one acc rounding"}});
    o["math_functions"] = fns;
    nlohmann::json forms = nlohmann::json::array();
    for (auto& f : forms_of(op->name()))
      forms.push_back({{"name", f.name}, {"choices", f.choices}, {"default", f.choices.at(0)}, {"what", f.what}});
    o["forms"] = forms;
    nlohmann::json impls = nlohmann::json::array();
    for (auto* im : reg.impls(op->name())) {
      if (im->test_only()) continue;
      nlohmann::json knobs = nlohmann::json::object();
      for (auto& k : im->knobs()) knobs[k.name] = k.values;
      Case sample;
      sample.op = op->name();
      sample.impl = im->name();
      sample.shape = op->example_shape();
      sample.dtypes["x"] = DType::bf16;
      nlohmann::json example = {{"case", ""}};
      try {  // an external impl may not support the sample case, or not answer
        reg.normalize(sample);
        example["case"] = sample.str();
        example["contract"] = im->contract(sample, host_device().profile).to_json();
      } catch (const std::exception& e) {
        example["error"] = e.what();
      }
      impls.push_back({{"impl", im->name()}, {"device", im->device()}, {"version", im->version()}, {"knobs", knobs}, {"contract_example", example}});
      if (const Accepts* a = impl_accepts(*im)) impls.back()["accepts"] = a->to_json();
    }
    o["impls"] = impls;
    j.push_back(o);
  }
  return j;
}

/// The listing as text.
void print_list(const nlohmann::json& j) {
  for (auto& o : j) {
    std::cout << o["op"].get<std::string>() << "\n  attrs:";
    for (auto& a : o["attrs"]) {
      std::cout << " " << a["name"].get<std::string>();
      if (!a["choices"].empty()) {
        std::string ch;
        for (auto& c : a["choices"]) {
          if (!ch.empty()) ch += '|';
          ch += c.get<std::string>();
        }
        std::cout << "=" << ch;
      }
    }
    std::cout << "\n";
    std::string sites;
    for (auto& s : o["rounding_sites"])
      if (s["declarable"].get<bool>()) append_sep(sites, " ", s["name"].get<std::string>());
    if (!sites.empty()) std::cout << "  rounding sites: " << sites << "\n";
    std::string fns;
    for (auto& f : o["math_functions"]) {
      std::string name = f["name"].get<std::string>() + (f["required"].get<bool>() ? "" : "?");
      for (auto& v : f["via"]) name += "[via " + v.get<std::string>() + "]";
      append_sep(fns, " ", name);
    }
    if (!fns.empty()) std::cout << "  math functions (math_ulps, ulps of fp32 unless \"in\" says; ? optional): " << fns << "\n";
    for (auto& f : o["forms"]) {
      std::string ch;
      for (auto& c : f["choices"]) append_sep(ch, "|", c.get<std::string>());
      std::cout << "  form " << f["name"].get<std::string>() << " = " << ch << "\n";
    }
    for (auto& im : o["impls"]) {
      std::cout << "  impl " << im["impl"].get<std::string>() << " (" << im["device"].get<std::string>() << ")\n";
      for (auto& [k, v] : im["knobs"].items()) {
        std::string vals;
        for (auto& x : v) append_sep(vals, "|", x.get<std::string>());
        std::cout << "    " << k << " = " << vals << "\n";
      }
      if (im.contains("accepts")) std::cout << "    accepts " << im["accepts"].dump() << "\n";
      const auto& ex = im["contract_example"];
      if (ex.contains("contract"))
        std::cout << "    contract at " << ex["case"].get<std::string>() << ":\n      " << ex["contract"].dump() << "\n";
      else
        std::cout << "    contract: " << ex["error"].get<std::string>() << "\n";
    }
  }
}

}  // namespace

std::unique_ptr<CommandArgs> setup_list(CLI::App& sub) {
  auto a = std::make_unique<ListArgs>();
  sub.add_flag("--json", a->json, "machine-readable output");
  add_extension_options(&sub, a->common.ext);
  return a;
}

int run_list(CommandArgs& args, const Argv&) {
  ListArgs& a = static_cast<ListArgs&>(args);
  RunEnv env = make_env(a.common);
  auto ext = load_extensions(a.common, env);
  const nlohmann::json j = list_json();
  if (a.json) std::cout << j.dump(2) << "\n";
  else print_list(j);
  return ext->failures().empty() ? 0 : 1;
}

}  // namespace kv
