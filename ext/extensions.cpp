// Loading plugins and starting the worker for a run; stand-ins for those that failed.
#include "ext/extensions.hpp"

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.hpp"
#include "ext/external_impl.hpp"
#include "ext/plugin.hpp"
#include "ext/plugin_probe.hpp"
#include "ext/worker_client.hpp"

namespace kv {

namespace {

class UnavailableImpl : public Impl {
 public:
  UnavailableImpl(std::string op, std::string name, std::string device, std::string why)
      : op_(std::move(op)), name_(std::move(name)), device_(std::move(device)), why_(std::move(why)) {}
  std::string op() const override { return op_; }
  std::string name() const override { return name_; }
  std::string device() const override { return device_; }
  std::string version() const override { return "unavailable"; }
  std::vector<ConfigKnob> knobs() const override { return {}; }
  Contract contract(const Case&, const DeviceProfile&) const override { throw HarnessError(why_); }
  void run(TensorSet&, const Case&, const DeviceProfile&) const override { throw HarnessError(why_); }
  const std::string& why() const { return why_; }

 private:
  std::string op_, name_, device_, why_;
};

}  // namespace

std::optional<std::string> unavailable_reason(const Impl& impl) {
  if (auto* u = dynamic_cast<const UnavailableImpl*>(&impl)) return u->why();
  return probe_failure(impl);
}

Extensions::Extensions(const ExtensionOptions& o, const std::string& out_dir, const DeviceInfo& dev) {
  for (auto& p : o.plugins) {
    auto probe = std::make_shared<PluginProbe>(p, o.plugin_timeout_s);
    try {
      probe->start(registry());
      loaded_plugins_.push_back(std::filesystem::absolute(p).string());
      probes_.push_back(probe);
    } catch (const std::exception& e) {
      failures_.push_back({probe->source(), e.what()});
    }
  }
  if (o.worker.empty()) return;
  const char* tmp = getenv("TMPDIR");
  std::string base = std::string(tmp && *tmp ? tmp : "/tmp") + "/kverify-io-XXXXXX";
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  const char* d = mkdtemp(buf.data());
  if (!d) {
    failures_.push_back({"worker", "cannot create the worker's tensor directory under " + base});
    return;
  }
  io_dir_ = d;
  std::filesystem::create_directories(out_dir);
  const std::string log = (std::filesystem::path(out_dir) / "worker.log").string();
  worker_ = std::make_unique<WorkerClient>(o.worker, io_dir_, log, o.worker_timeout_s,
                                           nlohmann::json{{"kind", dev.kind}, {"name", dev.name}});
  try {
    const nlohmann::json& impls = worker_->hello();
    auto t = std::make_shared<DirectTransport>(*worker_);
    register_external(registry(), impls, t, io_dir_);
    transport_ = t;
    std::ofstream(std::filesystem::path(io_dir_) / "impls.json") << impls.dump() << "\n";
  } catch (const std::exception& e) {
    failures_.push_back({"worker", e.what()});
  }
}

std::vector<Extensions::Failure> Extensions::failures() const {
  std::vector<Failure> all = failures_;
  for (auto& p : probes_)
    if (!p->failure().empty()) all.push_back({p->source(), p->failure()});
  return all;
}

Extensions::~Extensions() {
  worker_.reset();  // closes its stdin and waits for it
  if (!io_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(io_dir_, ec);
  }
}

std::vector<std::string> Extensions::worker_args() const {
  std::vector<std::string> a;
  for (auto& p : loaded_plugins_) a.insert(a.end(), {"--plugin", p});
  if (transport_) a.insert(a.end(), {"--external", io_dir_});
  return a;
}

nlohmann::json Extensions::relay(const nlohmann::json& req) {
  if (!transport_) return {{"external_error", "this run has no worker"}};
  return relay_answer(*transport_, req);
}

void Extensions::register_stand_ins(const std::vector<std::string>& ops, const std::vector<std::string>& impls,
                                    const std::string& device) {
  for (auto& f : failures_)
    for (auto& op : ops) {
      registry().op(op);  // an unknown op is the user's error, reported as such
      std::vector<std::string> names = impls;
      if (names.empty()) names = {f.source};
      for (auto& n : names) {
        bool known = false;
        for (auto* im : registry().impls(op)) known |= im->name() == n;
        if (!known) registry().add(std::make_unique<UnavailableImpl>(op, n, device, f.source + ": " + f.reason));
      }
    }
}

void load_extensions_in_worker(const std::vector<std::string>& plugins, const std::string& external_dir,
                               FILE* to_parent) {
  for (auto& p : plugins) load_plugin(registry(), p);  // loaded in the parent already
  if (external_dir.empty()) return;
  std::ifstream f(std::filesystem::path(external_dir) / "impls.json");
  nlohmann::json impls = nlohmann::json::parse(f);
  register_external(registry(), impls, std::make_shared<RelayTransport>(to_parent), external_dir);
}

}  // namespace kv
