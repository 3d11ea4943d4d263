// Plugin probes (ext/plugin_probe.hpp): the probe process and the parent's side.
//
// Protocol (one JSON object per line): the probe starts with {"impls": [{"op", "impl",
// "device", "version", "knobs": [{"name", "values"}], "accepts"?, "unusable"?}]} or
// {"load_error": why} ("unusable": why that impl cannot run, a malformed accepts); then each
// request {"impl", "case", "profile"} is answered by {"declined": why} (the plugin does not
// take such cases), {"invalid": why} (not on this device), {"contract": {...}}
// or {"error": why, "usage": bool}.
#include "ext/plugin_probe.hpp"

#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "ext/accepts.hpp"
#include "ext/plugin.hpp"
#include "ext/plugin_call.hpp"

namespace kv {

namespace {

nlohmann::json profile_json(const DeviceProfile& p) {
  return {{"sm_count", p.sm_count},
          {"warp_size", p.warp_size},
          {"max_threads_per_block", p.max_threads_per_block},
          {"smem_per_block", p.smem_per_block},
          {"overrides", p.overrides}};
}

DeviceProfile profile_from(const nlohmann::json& j) {
  DeviceProfile p;
  p.sm_count = j.at("sm_count").get<int64_t>();
  p.warp_size = j.at("warp_size").get<int64_t>();
  p.max_threads_per_block = j.at("max_threads_per_block").get<int64_t>();
  p.smem_per_block = j.at("smem_per_block").get<int64_t>();
  p.overrides = j.at("overrides").get<std::string>();
  return p;
}

/// A plugin's impl as the parent sees it: what it registered (from the probe's hello), its
/// contract through the probe. Cases outside what it accepts are declined here.
class ProbedPluginImpl : public Impl, public DeclaresAccepts {
 public:
  ProbedPluginImpl(std::shared_ptr<PluginProbe> probe, const nlohmann::json& d)
      : probe_(std::move(probe)), op_(d.at("op").get<std::string>()), name_(d.at("impl").get<std::string>()),
        device_(d.at("device").get<std::string>()), version_(d.at("version").get<std::string>()),
        unusable_(d.value("unusable", std::string())) {
    for (auto& k : d.at("knobs")) knobs_.push_back({k.at("name").get<std::string>(), k.at("values").get<std::vector<std::string>>()});
    if (d.contains("accepts")) accepts_ = parse_accepts(d["accepts"], op_, "");
  }
  std::string op() const override { return op_; }
  std::string name() const override { return name_; }
  std::string device() const override { return device_; }
  std::string version() const override { return version_; }
  std::vector<ConfigKnob> knobs() const override { return knobs_; }
  const Accepts* accepts() const override { return accepts_ ? &*accepts_ : nullptr; }
  std::optional<std::string> declines(const Case& c, const DeviceProfile& p) const override {
    if (!unusable_.empty()) return std::nullopt;  // its cases are errors (probe_failure)
    if (auto why = accepts_ ? accepts_->outside(c) : std::nullopt) return why;
    return answer(c, p).declined;
  }
  std::optional<std::string> invalid_reason(const Case& c, const DeviceProfile& p) const override {
    if (!unusable_.empty()) return std::nullopt;
    return answer(c, p).invalid;
  }
  Contract contract(const Case& c, const DeviceProfile& p) const override {
    if (!unusable_.empty()) throw HarnessError(unusable_);
    if (auto why = refusal(c, p)) throw UsageError(*why);
    return Contract::from_json(answer(c, p).contract);
  }
  void run(TensorSet&, const Case&, const DeviceProfile&) const override {
    throw HarnessError("plugin impl " + name_ + " runs in the worker process only");
  }
  const PluginProbe& probe() const { return *probe_; }
  const std::string& unusable() const { return unusable_; }

 private:
  std::shared_ptr<PluginProbe> probe_;
  std::string op_, name_, device_, version_, unusable_;
  std::vector<ConfigKnob> knobs_;
  std::optional<Accepts> accepts_;

  const PluginProbe::Answer& answer(const Case& c, const DeviceProfile& p) const {
    const auto& a = probe_->ask(name_, c, p);
    if (a.error.empty()) return a;
    if (a.usage_error) throw UsageError(a.error);
    throw HarnessError(a.error);
  }
};

}  // namespace

int plugin_probe_main(const std::string& path) {
  // As in the worker: the protocol gets the original stdout, and whatever the plugin
  // prints goes to stderr.
  const int proto = dup(1);
  dup2(2, 1);
  FILE* out = fdopen(proto, "w");
  auto say = [&](const nlohmann::json& j) {
    const std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(s.data(), 1, s.size(), out);
    std::fflush(out);
  };
  Registry& reg = registry();
  std::set<std::pair<std::string, std::string>> before;
  for (auto* op : reg.ops())
    for (auto* im : reg.impls(op->name())) before.insert({op->name(), im->name()});
  try {
    load_plugin(reg, path);
  } catch (const std::exception& e) {
    say({{"load_error", e.what()}});
    return 0;
  }
  nlohmann::json impls = nlohmann::json::array();
  for (auto* op : reg.ops())
    for (auto* im : reg.impls(op->name())) {
      if (before.count({op->name(), im->name()})) continue;
      nlohmann::json knobs = nlohmann::json::array();
      for (auto& k : im->knobs()) knobs.push_back({{"name", k.name}, {"values", k.values}});
      nlohmann::json d = {{"op", im->op()}, {"impl", im->name()}, {"device", im->device()}, {"version", im->version()}, {"knobs", knobs}};
      if (auto* pd = plugin_desc(*im)) {
        if (pd->accepts) d["accepts"] = pd->accepts->to_json();
        if (!pd->unusable.empty()) d["unusable"] = pd->unusable;
      }
      impls.push_back(d);
    }
  say({{"impls", impls}});
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    try {
      const auto req = nlohmann::json::parse(line);
      const Case c = Case::parse(req.at("case").get<std::string>());
      const DeviceProfile p = profile_from(req.at("profile"));
      const Impl& im = reg.impl(c.op, req.at("impl").get<std::string>());
      if (auto why = im.declines(c, p)) say({{"declined", *why}});
      else if (auto why = im.invalid_reason(c, p)) say({{"invalid", *why}});
      else say({{"contract", im.contract(c, p).to_json()}});
    } catch (const UsageError& e) {
      say({{"error", e.what()}, {"usage", true}});
    } catch (const std::exception& e) {
      say({{"error", e.what()}, {"usage", false}});
    }
  }
  return 0;
}

PluginProbe::PluginProbe(std::string path, double timeout_s) : path_(std::move(path)), timeout_s_(timeout_s) {
  signal(SIGPIPE, SIG_IGN);
}

std::string PluginProbe::source() const { return "plugin:" + std::filesystem::path(path_).stem().string(); }

nlohmann::json PluginProbe::exchange(const std::string& request, const std::string& doing) {
  std::string line;
  LineWait got = LineWait::closed;
  if (request.empty() || child_.write(request + "\n")) got = child_.read_line(deadline_after(timeout_s_), line);
  if (got == LineWait::line) {
    try {
      auto j = nlohmann::json::parse(line);
      if (j.is_object()) return j;
    } catch (const std::exception&) {
    }
  }
  if (got == LineWait::interrupted) {  // the run stops: no verdict on the plugin
    child_.stop(0);
    throw Interrupted{stop_signal()};
  }
  std::ostringstream t;
  t << timeout_s_;
  // A closed pipe is a probe that is dying: a moment to reap it with its own signal.
  const std::string how = child_.stop(got == LineWait::closed ? 5 : 0);
  if (got == LineWait::timeout) failure_ = "plugin " + path_ + ": no answer within " + t.str() + " s " + doing + " (a hang); killed";
  else if (got == LineWait::closed) failure_ = "plugin " + path_ + ": crashed " + doing + " (" + how + ")";
  else failure_ = "plugin " + path_ + ": its probe answered '" + line.substr(0, 80) + "' " + doing;
  // A failure while loading is reported with the others found then (cli load_extensions).
  if (loaded_) std::cerr << "kverify: " << source() << " unusable, its cases will be errors: " << failure_ << "\n";
  throw HarnessError(failure_);
}

void PluginProbe::start(Registry& r) {
  try {
    SpawnOptions o;
    o.argv = {self_exe(), "__plugin-probe", path_};
    child_.start(o);
  } catch (const std::exception& e) {
    throw HarnessError("plugin " + path_ + ": cannot start its probe: " + e.what());
  }
  const nlohmann::json hello = exchange("", "while loading and registering");
  if (hello.contains("load_error")) {
    child_.stop(0);
    throw UsageError(hello["load_error"].get<std::string>());
  }
  std::vector<std::unique_ptr<Impl>> impls;
  try {
    for (auto& d : hello.at("impls")) impls.push_back(std::make_unique<ProbedPluginImpl>(shared_from_this(), d));
  } catch (const std::exception& e) {
    child_.stop(0);
    throw HarnessError("plugin " + path_ + ": its probe's hello is malformed: " + e.what());
  }
  // Each probe loads one plugin beside the built-in impls: a name another plugin of this
  // run registered already is found here, as the in-process loader would have found it.
  for (auto& im : impls)
    for (auto* known : r.impls(im->op()))
      if (known->name() == im->name()) {
        child_.stop(0);
        throw UsageError("plugin " + path_ + ": impl " + im->name() + " of " + im->op() + " is already registered");
      }
  for (auto& im : impls) r.add(std::move(im));
  loaded_ = true;
}

const PluginProbe::Answer& PluginProbe::ask(const std::string& impl, const Case& c, const DeviceProfile& p) {
  if (!failure_.empty()) throw HarnessError(failure_);
  const nlohmann::json req = {{"impl", impl}, {"case", c.str()}, {"profile", profile_json(p)}};
  const std::string key = req.dump();
  if (auto it = answers_.find(key); it != answers_.end()) return it->second;
  const nlohmann::json j = exchange(key, "in contract() of impl " + impl + " for " + c.str());
  Answer a;
  if (j.contains("declined")) a.declined = j["declined"].get<std::string>();
  else if (j.contains("invalid")) a.invalid = j["invalid"].get<std::string>();
  else if (j.contains("contract")) a.contract = j["contract"];
  else a.error = j.value("error", std::string("the probe's answer names no contract")), a.usage_error = j.value("usage", false);
  return answers_[key] = a;
}

std::optional<std::string> probe_failure(const Impl& impl) {
  if (auto* p = dynamic_cast<const ProbedPluginImpl*>(&impl)) {
    if (!p->probe().failure().empty()) return p->probe().source() + ": " + p->probe().failure();
    if (!p->unusable().empty()) return p->probe().source() + ": " + p->unusable();
  }
  return std::nullopt;
}

}  // namespace kv
