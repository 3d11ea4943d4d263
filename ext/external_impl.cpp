// External impls: contracts asked per case (cached), tensors through .safetensors files.
#include "ext/external_impl.hpp"

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "core/error.hpp"
#include "core/safetensors.hpp"
#include "core/sites.hpp"
#include "ext/accepts.hpp"

namespace kv {

namespace {

struct ExternalDecl {
  std::string op, impl, device, version;
  std::vector<ConfigKnob> knobs;
  nlohmann::json contract;  // null: asked per case
  std::optional<Accepts> accepts;  // unset: anything
};

class ExternalImpl : public Impl, public DeclaresAccepts {
 public:
  ExternalImpl(ExternalDecl d, std::shared_ptr<ExternalTransport> t, std::string io_dir)
      : d_(std::move(d)), t_(std::move(t)), io_dir_(std::move(io_dir)) {}
  std::string op() const override { return d_.op; }
  std::string name() const override { return d_.impl; }
  std::string device() const override { return d_.device; }
  std::string version() const override { return d_.version; }
  std::vector<ConfigKnob> knobs() const override { return d_.knobs; }
  const Accepts* accepts() const override { return d_.accepts ? &*d_.accepts : nullptr; }

  std::optional<std::string> declines(const Case& c, const DeviceProfile&) const override {
    if (auto why = d_.accepts ? d_.accepts->outside(c) : std::nullopt) return why;
    if (!d_.contract.is_null()) return std::nullopt;
    const nlohmann::json& a = contract_answer(c);
    if (a.contains("unsupported")) return a["unsupported"].get<std::string>();
    return std::nullopt;
  }

  Contract contract(const Case& c, const DeviceProfile& p) const override {
    if (!d_.contract.is_null()) return Contract::from_json(d_.contract);
    if (auto why = refusal(c, p)) throw UsageError(*why);
    const nlohmann::json& a = contract_answer(c);
    try {
      return Contract::from_json(a.at("contract"));
    } catch (const std::exception& e) {
      throw ExternalError("worker impl " + d_.impl + " declared an unusable contract: " + e.what());
    }
  }

  void run(TensorSet& ts, const Case& c, const DeviceProfile&) const override {
    nlohmann::json req = case_fields(c);
    req["type"] = "run";
    req["tensors"] = nlohmann::json::array();
    for (auto& s : ts.slots)
      req["tensors"].push_back({{"name", s.desc.name},
                                {"role", s.role == Role::input ? "input" : "output"},
                                {"dtype", dtype_name(s.desc.dtype)},
                                {"shape", s.desc.shape}});
    if (t_->run_in_place(req, ts)) return;
    static std::atomic<int64_t> seq{0};
    const std::string stem = (std::filesystem::path(io_dir_) / (std::to_string(getpid()) + "-" + std::to_string(++seq))).string();
    const std::string in = stem + "-in.safetensors", out = stem + "-out.safetensors";
    struct Cleanup {
      std::string a, b;
      ~Cleanup() {
        std::error_code ec;
        std::filesystem::remove(a, ec);
        std::filesystem::remove(b, ec);
      }
    } cleanup{in, out};
    std::map<std::string, StoredTensor> inputs;
    for (auto& s : ts.slots)
      if (s.role == Role::input) inputs[s.desc.name] = gather(s.view());
    write_safetensors(in, inputs, {{"case", c.str()}, {"kverify_protocol", std::to_string(kWorkerProtocol)}});
    req["inputs"] = in;
    req["outputs"] = out;
    nlohmann::json a = t_->request(req);
    if (!a.value("ok", false)) {
      std::string why = a.contains("error") && a["error"].is_string() ? a["error"].get<std::string>() : a.dump();
      throw ExternalError("worker impl " + d_.impl + " failed: " + why);
    }
    if (a.contains("impl_ms") && a["impl_ms"].is_number()) ts.timings["impl_ms"] = a["impl_ms"].get<double>();
    std::map<std::string, StoredTensor> outs;
    try {
      outs = read_safetensors(out);
    } catch (const std::exception& e) {
      throw ExternalError(std::string("worker impl ") + d_.impl + " outputs: " + e.what());
    }
    for (auto& s : ts.slots) {
      if (s.role != Role::output) continue;
      auto it = outs.find(s.desc.name);
      if (it == outs.end()) throw ExternalError("worker impl " + d_.impl + " wrote no tensor '" + s.desc.name + "'");
      try {
        scatter(it->second, s.view());
      } catch (const std::exception& e) {
        throw ExternalError("worker impl " + d_.impl + " output: " + e.what());
      }
    }
  }

 private:
  ExternalDecl d_;
  std::shared_ptr<ExternalTransport> t_;
  std::string io_dir_;
  mutable std::map<std::string, nlohmann::json> answers_;  // contract answers by case

  const nlohmann::json& contract_answer(const Case& c) const {
    const std::string key = c.str();
    if (auto it = answers_.find(key); it != answers_.end()) return it->second;
    nlohmann::json req = case_fields(c);
    req["type"] = "contract";
    nlohmann::json a = t_->request(req);
    if (a.contains("error"))
      throw ExternalError("worker impl " + d_.impl + " could not state its contract: " +
                          (a["error"].is_string() ? a["error"].get<std::string>() : a["error"].dump()));
    if (!a.contains("unsupported") && !a.contains("contract"))
      throw ExternalError("worker impl " + d_.impl + " answered the contract request with neither contract nor unsupported");
    if (a.contains("unsupported") && !a["unsupported"].is_string())
      throw ExternalError("worker impl " + d_.impl + ": 'unsupported' must be a string");
    if (answers_.size() > 4096) answers_.clear();
    return answers_[key] = a;
  }
};

ExternalDecl parse_decl(const nlohmann::json& j) {
  ExternalDecl d;
  auto str = [&](const char* k, bool required) -> std::string {
    if (!j.contains(k)) {
      if (required) throw ExternalError(std::string("hello: an impl has no '") + k + "'");
      return "";
    }
    if (!j[k].is_string()) throw ExternalError(std::string("hello: impl field '") + k + "' must be a string");
    return j[k].get<std::string>();
  };
  d.op = str("op", true);
  d.impl = str("impl", true);
  d.device = str("device", true);
  d.version = str("version", false);
  const std::string who = "hello: impl " + d.impl + " of " + d.op + ": ";
  if (d.device != "cuda" && d.device != "host") throw ExternalError(who + "device must be cuda or host, not " + d.device);
  try {
    registry().op(d.op);
  } catch (const UsageError& e) {
    throw ExternalError(who + e.what());
  }
  if (j.contains("knobs")) {
    if (!j["knobs"].is_object()) throw ExternalError(who + "knobs must map names to value lists");
    for (auto& [k, v] : j["knobs"].items()) {
      ConfigKnob kn{k, {}};
      if (!v.is_array() || v.empty()) throw ExternalError(who + "knob " + k + " needs a non-empty list of values");
      for (auto& x : v) {
        if (!x.is_string()) throw ExternalError(who + "knob " + k + ": values must be strings");
        kn.values.push_back(x.get<std::string>());
      }
      d.knobs.push_back(kn);
    }
  }
  if (j.contains("accepts")) {
    try {
      d.accepts = parse_accepts(j["accepts"], d.op, who);
    } catch (const UsageError& e) {
      throw ExternalError(e.what());
    }
  }
  if (j.contains("contract") && !j["contract"].is_null()) {
    try {
      Contract::from_json(j["contract"]);
    } catch (const std::exception& e) {
      throw ExternalError(who + e.what());
    }
    d.contract = j["contract"];
  }
  return d;
}

}  // namespace

nlohmann::json RelayTransport::request(const nlohmann::json& req) {
  std::string line = nlohmann::json{{"external", req}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
  std::string answer;
  if (!std::getline(std::cin, answer)) throw ExternalError("the parent closed the relay");
  nlohmann::json a = nlohmann::json::parse(answer);
  if (a.contains("external_error")) throw ExternalError(a["external_error"].get<std::string>());
  return a.at("external_answer");
}

nlohmann::json relay_answer(ExternalTransport& t, const nlohmann::json& req) {
  try {
    return {{"external_answer", t.request(req)}};
  } catch (const std::exception& e) {
    return {{"external_error", e.what()}};
  }
}

nlohmann::json case_fields(const Case& c) {
  const OpBinding& op = registry().op(c.op);
  nlohmann::json dt = nlohmann::json::object();
  for (auto& t : op.tensors(c)) dt[t.name] = dtype_name(t.dtype);
  nlohmann::json vals = nlohmann::json::object();
  for (auto& a : op.attrs()) {
    auto it = c.attrs.find(a.name);
    if (it == c.attrs.end()) continue;
    if (a.real) vals[a.name] = parse_real(it->second, a.name);
    else if (a.integer) vals[a.name] = parse_int(it->second, a.name);
    else vals[a.name] = it->second;
  }
  return {{"op", c.op}, {"impl", c.impl}, {"case", c.str()},   {"config", c.config},
          {"shape", c.shape}, {"dtypes", dt}, {"attrs", c.attrs}, {"attr_values", vals},
          {"axes", op.reduced_axes(c)}, {"math_functions", math_functions_of(c.op)},
          {"approximate_ops", approximate_ops_of(c.op)}};
}

void register_external(Registry& r, const nlohmann::json& impls, std::shared_ptr<ExternalTransport> t,
                       const std::string& io_dir) {
  std::vector<ExternalDecl> decls;
  for (auto& j : impls) {
    if (!j.is_object()) throw ExternalError("hello: impls must be objects");
    decls.push_back(parse_decl(j));
  }
  for (auto& d : decls) {
    for (auto* im : r.impls(d.op))
      if (im->name() == d.impl) throw ExternalError("hello: impl " + d.impl + " of " + d.op + " is already registered");
    r.add(std::make_unique<ExternalImpl>(std::move(d), t, io_dir));
  }
}

}  // namespace kv
