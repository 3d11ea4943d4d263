// The host implementation of an op: its definition run over HostPolicy (fp32 accumulation,
// a block-shaped sum of `32 * num_warps` lanes), outputs rounded once to their dtypes.
// An op whose host impl has knobs of its own (rms_norm: the sum order, dW's programs)
// overrides the policy, the computation and the Impl answers. A host impl can host a
// planted fault (HostFault: policy faults, truncation on store, a change to the case or
// inputs before computing); the faults themselves are the tests' (tests/faults/).
#pragma once
#include <algorithm>
#include <functional>
#include <initializer_list>
#include <memory>

#include "core/impl_version.hpp"
#include "core/row_slice.hpp"
#include "ops/host/host_policy.hpp"
#include "kernels/rms_norm/contract.hpp"
#include "ops/op_base.hpp"

namespace kv {

/// Reduced axes of an op for contracts: name, length, and whether it runs over rows in
/// column_sums' chunks (then chunk sums are merged serially).
struct AxisLen {
  std::string name;
  int64_t len;
  bool over_rows = false;
  /// The shape dims the axis runs over, [begin, end); unset (-1): the last dim, or over
  /// rows every dim but the last.
  int begin = -1, end = -1;
};

/// Where the host blocking changes its shape (Impl::thresholds): a sum over an axis of n
/// terms takes ceil(n / lanes) serial terms per lane, so n = lanes and 2 * lanes are where
/// lanes start holding a second and a third term; column sums over rows merge chunks of
/// kColChunk rows (one chunk, two).
inline std::vector<Threshold> host_thresholds(const std::vector<AxisLen>& axes, int rank, int64_t lanes) {
  std::vector<Threshold> t;
  for (auto& a : axes) {
    const int b = a.begin >= 0 ? a.begin : a.over_rows ? 0 : std::max(rank - 1, 0);
    const int e = a.end >= 0 ? a.end : a.over_rows ? std::max(rank - 1, 0) : rank;
    if (a.over_rows)
      t.push_back({b, e, {kColChunk, 2 * kColChunk}, "axis " + a.name + ": sums over rows in chunks of " +
                                                          std::to_string(kColChunk) + " rows (one chunk, two)", true});
    else
      t.push_back({b, e, {lanes, 2 * lanes}, "axis " + a.name + ": " + std::to_string(lanes) +
                                                 " lanes holding one term each, then two, then three"});
  }
  return t;
}

/// A planted fault a host impl can carry (test-only impls: FaultableHost::with_fault).
struct HostFault {
  HostFaults policy;
  bool truncate = false;  // outputs stored by truncation instead of RNE
  /// Op-specific: changes the case or the inputs before the computation.
  std::function<void(Case&, OpInputs&)> tweak;
};

/// What a host computation may need beside its inputs: the case's tensors (workspaces),
/// the device profile, and the first dim-0 index of the block of the case it computes
/// (HostImpl::run cuts large row-local cases into blocks).
struct HostRun {
  TensorSet& ts;
  const DeviceProfile& profile;
  int64_t dim0_begin = 0;
};

/// Where a host computation's values go: sink(out, i, v) stores v in output `out` (in the
/// op's tensors() order) at element i, rounded to its dtype (truncated under a fault).
struct HostSink {
  std::vector<TensorView>* outs;
  bool truncate = false;
  void operator()(int o, int64_t i, double v) const {
    TensorView& t = (*outs)[static_cast<size_t>(o)];
    t.store(i, truncate ? round_toward_zero(t.desc.dtype, v) : v);
  }
};

/// A host impl that can carry a planted fault.
class FaultableHost : public Impl {
 public:
  /// The same impl under `name`, test-only, with `fault` planted.
  virtual std::unique_ptr<Impl> with_fault(std::string name, HostFault fault) const = 0;
};

/// The host contract for an op's axes under `lanes` lanes.
inline Contract host_contract(const std::vector<AxisLen>& axes, int64_t lanes) {
  Contract k;
  k.acc = DType::f32;
  for (const char* f : {"rsqrt", "exp", "log", "tanh", "sin", "cos"}) k.math_ulps[f] = 1.0;
  for (auto& a : axes) {
    const int64_t n = std::max<int64_t>(a.len, 1);
    if (a.over_rows) {
      const int64_t ch = std::min(n, kColChunk);
      k.reductions[a.name] = {ceil_div(ch, lanes), log2_ceil(std::min(lanes, ch)), ceil_div(n, kColChunk), std::nullopt};
    } else {
      k.reductions[a.name] = {ceil_div(n, lanes), log2_ceil(std::min(lanes, n)), 0, std::nullopt};
    }
  }
  return k;
}

template <class D>
class HostImpl : public FaultableHost {
 public:
  HostImpl(bool bwd, std::string name = "host", HostFault fault = {}, bool test_only = false)
      : bwd_(bwd), op_(bwd), name_(std::move(name)), fault_(std::move(fault)), test_only_(test_only) {}
  std::string op() const override { return op_.name(); }
  std::string name() const override { return name_; }
  std::string device() const override { return "host"; }
  std::string version() const override { return impl_version("host"); }
  bool test_only() const override { return test_only_; }
  std::vector<ConfigKnob> knobs() const override { return {{"num_warps", {"4", "1", "2", "8", "16", "32"}}}; }

  Contract contract(const Case& c, const DeviceProfile& p) const override {
    const std::vector<AxisLen> axes = op_.axes(c);
    Contract k = host_contract(axes, 32 * c.config_int("num_warps", 4));
    // Serial code whose sums are shaped by num_warps alone (never by the device profile):
    // the same bits on every run and device; on every config only where nothing is summed;
    // at every batch size where the op's rows are independent (OpBinding::row_local).
    DeterminismClaims base = {"run_to_run", "gpu_invariant"};
    if (axes.empty()) base.push_back("config_invariant");
    for (auto& t : op_.tensors(c))
      if (t.role == Role::output) k.determinism[t.name] = with_batch_claim(c, t.name, base);
    return k;
  }

  std::vector<Threshold> thresholds(const Case& c, const DeviceProfile&) const override {
    return host_thresholds(op_.axes(c), static_cast<int>(c.shape.size()), 32 * c.config_int("num_warps", 4));
  }

  /// Where every output is row-local (OpBinding::slice_dims), a block of rows at a time
  /// (core/row_slice.hpp): the inputs' exact copies then take a block's memory, not the
  /// case's. Row-local outputs come out the same either way.
  void run(TensorSet& ts, const Case& c, const DeviceProfile& p) const override {
    const auto dims = op_.slice_dims(c);
    const int64_t extent = c.shape.empty() ? 0 : c.shape[0];
    double per_index = 0, shared = 0;
    bool all_sliced = !dims.empty() && extent > 1;
    for (auto& t : op_.tensors(c)) {
      const double bytes = t.role == Role::input ? 8.0 * static_cast<double>(numel(t.shape)) : 0.0;
      if (!dims.count(t.name)) all_sliced &= t.role == Role::input, shared += bytes;
      else per_index += bytes / static_cast<double>(std::max<int64_t>(extent, 1));
    }
    const int64_t block = all_sliced ? rows_per_block(per_index, shared, row_block_bytes(), extent) : extent;
    if (block >= extent) return run_rows(ts, c, p, 0);
    for (int64_t b = 0; b < extent; b += block) {
      CaseSlice s = slice_rows(op_, c, ts, dims, b, std::min(extent, b + block));
      run_rows(s.ts, s.c, p, b);
    }
  }

  std::unique_ptr<Impl> with_fault(std::string name, HostFault fault) const override {
    return std::make_unique<HostImpl<D>>(bwd_, std::move(name), std::move(fault), true);
  }

 protected:
  /// The arithmetic: fp32 accumulation over 32 * num_warps lanes.
  virtual HostPolicy policy(const Case& c) const {
    HostPolicy hp;
    hp.lanes = 32 * c.config_int("num_warps", 4);
    return hp;
  }
  /// The op's definition over that arithmetic, every output element handed to sink.
  virtual void compute(const Case& c, const OpInputs& in, const HostPolicy& p, const HostSink& sink,
                       const HostRun&) const {
    op_.compute(c, in, p, sink, RowSet{}, true);
  }

  bool bwd_;

 private:
  void run_rows(TensorSet& ts, const Case& c0, const DeviceProfile& p, int64_t dim0_begin) const {
    Case c = c0;
    OpInputs in = OpInputs::read(op_.tensors(c), ts);
    if (fault_.tweak) fault_.tweak(c, in);
    std::vector<TensorView> outs;
    for (auto& t : op_.tensors(c))
      if (t.role == Role::output) outs.push_back(ts.view(t.name));
    HostPolicy hp = policy(c);
    hp.faults = fault_.policy;
    compute(c, in, hp, HostSink{&outs, fault_.truncate}, HostRun{ts, p, dim0_begin});
  }

  D op_;
  std::string name_;
  HostFault fault_;
  bool test_only_;
};

/// Registers the binding D and its host impl, forward and backward (or the given
/// directions only).
template <class D>
void add_op_with_host_impl(Registry& r, std::initializer_list<bool> dirs = {false, true}) {
  for (bool bwd : dirs) {
    r.add(std::make_unique<D>(bwd));
    r.add(std::make_unique<HostImpl<D>>(bwd));
  }
}

}  // namespace kv
