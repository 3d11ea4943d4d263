// Planted faults: test-only host impls (`host.bug.<fault>`) that the sensitivity tests
// must see flagged. Most are planted in an op's registered host impl
// (FaultableHost::with_fault: policy faults, truncation on store, a change to the case or
// the inputs); the others wrap it (HostWrapper). One small file per op.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ops/host/host_impl.hpp"

namespace kvtest {

/// An op's registered host impl, the one that can carry a fault (not a test-only one).
const kv::FaultableHost& faultable_host(const kv::Registry& r, const std::string& op);

/// An op's host impl under a test name: every answer the host impl's, run() included.
class HostWrapper : public kv::Impl {
 public:
  explicit HostWrapper(const kv::Impl& base) : base_(base) {}
  std::string op() const override { return base_.op(); }
  std::string device() const override { return "host"; }
  std::string version() const override { return "test"; }
  bool test_only() const override { return true; }
  std::vector<kv::ConfigKnob> knobs() const override { return base_.knobs(); }
  kv::Contract contract(const kv::Case& c, const kv::DeviceProfile& p) const override { return base_.contract(c, p); }
  std::vector<kv::WorkspaceReq> workspaces(const kv::Case& c, const kv::DeviceProfile& p) const override {
    return base_.workspaces(c, p);
  }
  void run(kv::TensorSet& ts, const kv::Case& c, const kv::DeviceProfile& p) const override { base_.run(ts, c, p); }

 protected:
  const kv::Impl& base_;
};

using InputTweak = std::function<void(kv::Case&, kv::OpInputs&)>;

/// Shared tweaks: an input read through another dtype (a wrong conversion), an input
/// reversed, and the other rope layout.
InputTweak tweak_round_input(std::string name, kv::DType d);
InputTweak tweak_reverse_input(std::string name);
InputTweak tweak_other_layout();

/// Which shared faults can change an op's results (the others would be equivalent mutants).
struct FaultScope {
  bool sums = true;      // the op sums (drop_last_term)
  bool acc = true;       // the op has accumulator operations (bf16_accumulation)
  bool lowp_out = true;  // some output is low precision by default (truncate)
};

/// Registers test-only host impls `host.bug.<fault>` of `op` (e.g. "softmax.fwd"): bf16
/// accumulation, truncation on store, a dropped last term where the op sums, and the
/// op's own input/case tweaks.
void add_host_faults(kv::Registry& r, const std::string& op, FaultScope scope,
                     std::vector<std::pair<std::string, InputTweak>> tweaks);

/// Each tests/faults/<op>.cpp registers its own faults by defining one of these at namespace
/// scope (`const FaultRegistrar registrar("softmax", register_softmax_faults);`), so adding
/// an op's faults is a new file and no edit of a list.
struct FaultRegistrar {
  FaultRegistrar(const char* name, void (*add)(kv::Registry&));
};

/// Every op's planted faults, in the order of their files' names.
void register_faults(kv::Registry& r);

}  // namespace kvtest
