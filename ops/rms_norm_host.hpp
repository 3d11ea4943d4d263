// The host RMSNorm: the definition's rows (reference/rms_norm.hpp) over the host policy,
// with a blocking that mimics a CUDA block (32*num_warps lanes each summing a serial run
// from 0, then a __shfl_down tree) in the element order the `order` knob picks, and dW as
// per-program fp32 partials (the `dw` knob) summed serially. It accumulates in fp32 (x's
// dtype in mode none); dW accumulates in fp32 in every mode. HostImpl (ops/host/) runs it.
#pragma once
#include <vector>

#include "ops/host/host_impl.hpp"
#include "ops/rms_norm.hpp"

namespace kv {

/// The host impl's knobs, contract, workspaces and dispatch thresholds (Impl's).
std::vector<ConfigKnob> rms_host_knobs(bool bwd);
Contract rms_host_contract(const Case& c, const DeviceProfile& p, bool bwd);
std::vector<WorkspaceReq> rms_host_workspaces(const Case& c, const DeviceProfile& p, bool bwd);
std::vector<Threshold> rms_host_thresholds(const Case& c, const DeviceProfile& p, bool bwd);

/// Its arithmetic: the __shfl_down tree, rsqrt as 1.0f / sqrtf(x), the compute dtype.
HostPolicy rms_host_policy(const Case& c);
/// The case's parameters as the host takes them: offset as an fp32 argument, as kernels do.
RmsParams rms_host_params(const Case& c);

/// The forward and backward passes (HostImpl::compute).
void rms_host_fwd(const Case& c, const OpInputs& in, const HostPolicy& p, const HostSink& sink, const HostRun& run);
void rms_host_bwd(const Case& c, const OpInputs& in, const HostPolicy& p, const HostSink& sink, const HostRun& run);

}  // namespace kv
