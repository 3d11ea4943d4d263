// What plugin.cpp and plugin_cuda.cpp share: a plugin's impl descriptor as kverify keeps
// it, and the kv_call built for one case (its strings and arrays owned here).
#pragma once
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/contract.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "ext/accepts.hpp"
#include "kverify/plugin.h"

namespace kv {

struct PluginDesc {
  std::string lib;  // the .so, for messages
  std::string op, impl, device, version;
  std::vector<ConfigKnob> knobs;
  int (*contract)(const kv_call*) = nullptr;
  int (*launch)(const kv_call*) = nullptr;
  std::optional<Accepts> accepts;  // kv_impl_desc.accepts; unset: anything
  std::string unusable;            // why the impl cannot run (a malformed accepts), or ""
};

/// The descriptor every plugin impl keeps (plugin_desc() finds it behind an Impl).
class PluginDescHolder {
 public:
  explicit PluginDescHolder(PluginDesc d) : d_(std::move(d)) {}
  virtual ~PluginDescHolder() = default;
  const PluginDesc& desc() const { return d_; }

 protected:
  PluginDesc d_;
};

/// The descriptor of a plugin impl loaded in this process, or null for other impls.
const PluginDesc* plugin_desc(const Impl& impl);

class PluginCall {
 public:
  PluginCall(const PluginDesc& d, const Case& c, const DeviceProfile& p);
  /// Adds a tensor; data points at its first element (offset applied here).
  void add_tensor(const TensorDesc& t, void* payload, bool output);
  kv_call* get(void* stream);
  std::string message() const { return std::string(msg_.data()); }

 private:
  const PluginDesc& d_;
  std::string case_str_;
  std::vector<kv_pair> config_, attrs_;
  std::vector<kv_tensor> tensors_;
  std::deque<std::vector<int64_t>> strides_;
  std::vector<int64_t> shape_;
  std::vector<char> msg_ = std::vector<char>(1 << 16, '\0');
  DeviceProfile prof_;
  kv_call call_{};
};

/// Asks the plugin for the case's contract: the contract, or the reason it cannot run it.
struct PluginContract {
  std::optional<Contract> contract;
  std::string unsupported;
};
PluginContract plugin_contract(const PluginDesc& d, const Case& c, const DeviceProfile& p);

/// What every plugin impl answers from its descriptor, on top of its base (Impl for host
/// impls, CudaImpl for cuda ones): names, knobs, what it accepts, and the contract
/// callback, which also decides whether the case can run.
template <class Base>
class PluginImplBase : public Base, public PluginDescHolder, public DeclaresAccepts {
 public:
  using PluginDescHolder::PluginDescHolder;
  std::string op() const override { return d_.op; }
  std::string name() const override { return d_.impl; }
  std::string version() const override { return d_.version; }
  std::vector<ConfigKnob> knobs() const override { return d_.knobs; }
  const Accepts* accepts() const override { return d_.accepts ? &*d_.accepts : nullptr; }
  std::optional<std::string> declines(const Case& c, const DeviceProfile& p) const override {
    if (!d_.unusable.empty()) return std::nullopt;  // contract() says why
    if (d_.accepts)
      if (auto why = d_.accepts->outside(c)) return why;
    auto pc = plugin_contract(d_, c, p);
    if (!pc.contract) return pc.unsupported;
    return Base::declines(c, p);
  }
  Contract contract(const Case& c, const DeviceProfile& p) const override {
    if (!d_.unusable.empty()) throw HarnessError(d_.unusable);
    if (auto why = d_.accepts ? d_.accepts->outside(c) : std::nullopt) throw UsageError("declined by " + d_.impl + ": " + *why);
    auto pc = plugin_contract(d_, c, p);
    if (!pc.contract) throw UsageError("declined by " + d_.impl + ": " + pc.unsupported);
    return *pc.contract;
  }
};

/// The tensors of a case in the op's order, with their roles (inputs, then outputs).
std::vector<TensorSpec> plugin_tensor_order(const Case& c);

#ifdef KV_HAVE_CUDA
/// A "cuda" plugin impl: kverify's CUDA mirroring around the plugin's launch.
std::unique_ptr<Impl> make_plugin_cuda_impl(PluginDesc d);
#endif

}  // namespace kv
