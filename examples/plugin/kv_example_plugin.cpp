// An example kverify plugin: rms_norm.fwd (modes llama and gemma) as `plugin_host` (plain
// C++, one serial sum per row) and, built with -DKV_PLUGIN_CUDA, `plugin_cuda` (one block
// per row, rms_norm_kernel.cu). This file: registration, knobs, contracts and the launch;
// the case's checks, the launch arguments and the host path are in plugin_*.cpp.
#include <cstdio>
#include <exception>
#include <string>

#include "kverify/plugin.h"
#include "plugin_parts.hpp"
#include "rms_norm_kernel.h"

namespace kvp {

namespace {

// What both impls take: kverify declines other cases itself (mode none, say: "declined by
// plugin_host: it accepts mode gemma, llama, not none") without calling contract(), and
// fuzz draws only these. contract() still refuses what this cannot say (rstd in another
// dtype than fp32 or written over an input, N > 2^24, an offset that is not an fp32 value).
constexpr const char* kAccepts =
    "{\"dtypes\": [\"fp32\", \"fp16\", \"bf16\"], \"attrs\": {\"mode\": [\"llama\", \"gemma\"]},"
    " \"layouts\": [\"contiguous\", \"strided\", \"in_place\"]}";

// ---- contracts ----

int contract(const kv_call* c, bool cuda) {
  Params p;
  int rc = check_case(c, cuda, p, KV_UNSUPPORTED);
  if (rc != KV_OK) return rc;
  // contract() gets no tensors: dtypes and aliases come from the replay string, with
  // kverify's defaults (x fp32, w and y follow x, rstd fp32) for any it leaves out.
  const std::string dts = case_token(c, "dtypes");
  auto dt = [&](const char* name, int def) {
    const std::string v = list_value(dts, name);
    return v.empty() ? def : dtype_of(v);
  };
  p.x_dt = dt("x", KV_F32);
  p.w_dt = dt("w", p.x_dt);
  p.y_dt = dt("y", p.x_dt);
  p.rstd_dt = dt("rstd", KV_F32);
  if ((rc = check_dtypes(c, p, KV_UNSUPPORTED)) != KV_OK) return rc;
  if (!list_value(case_token(c, "alias"), "rstd").empty())
    return say(c, KV_UNSUPPORTED, "rstd may not share an input's storage: other rows still read it");

  long long serial, depth;
  const char* claims;
  if (cuda) {
    // T lanes: serial runs of ceil(N/T), then shuffle (5) + shared-memory (log2 warps) trees.
    const long long T = 32LL * p.num_warps;
    serial = (p.n + T - 1) / T;
    depth = 0;
    while ((1LL << depth) < T) ++depth;
    // Bits change with num_warps (the reduction shape), not with the GPU or the batch.
    claims = "[\"run_to_run\", \"gpu_invariant\", \"batch_invariant\"]";
  } else {
    serial = p.n;
    depth = 0;
    claims = "[\"run_to_run\", \"config_invariant\", \"gpu_invariant\", \"batch_invariant\"]";
  }
  // rsqrt: CUDA documents rsqrtf at 2 ulp. The host computes 1.0f / sqrtf(v): sqrtf is
  // correctly rounded (relative error <= u = 2^-24), the division too, so the result is
  // within 0.5 ulp of 1/s with s = sqrt(v)(1+d), |d| <= u, i.e. of 1/sqrt(v) times
  // (1 - d + O(u^2)), which is less than 1 ulp away: 1.5 ulp + O(u) in all, declared as 2.
  // fma: the kernel sums with fmaf; the host file is compiled with -ffp-contract=off.
  const int need = std::snprintf(c->message, c->message_cap,
                                 "{\"acc\": \"fp32\", \"fma\": %s, \"ftz\": false, \"math_ulps\": {\"rsqrt\": 2}, "
                                 "\"reductions\": {\"row\": {\"serial\": %lld, \"depth\": %lld, \"partials\": 0}}, "
                                 "\"determinism\": {\"y\": %s, \"rstd\": %s}}",
                                 cuda ? "true" : "false", serial, depth, claims, claims);
  if (need < 0 || static_cast<size_t>(need) >= c->message_cap)
    return say(c, KV_ERROR, "the contract needs %d bytes of message, message_cap is %zu", need + 1, c->message_cap);
  return KV_OK;
}

int launch(const kv_call* c, bool cuda) {
  Params p;
  if (check_case(c, cuda, p, KV_ERROR) != KV_OK) return KV_ERROR;
  RmsFwdArgs a{};
  if (build_args(c, p, a) != KV_OK) return KV_ERROR;
  if (cuda) {
#ifdef KV_PLUGIN_CUDA
    return rms_norm_fwd_cuda(a, 32 * p.num_warps, c->stream, c->message, c->message_cap);
#else
    return say(c, KV_ERROR, "built without CUDA");
#endif
  }
  if (check_fp_env(c) != KV_OK) return KV_ERROR;
  host_rms_fwd(a);
  return KV_OK;
}

// No exception may cross the C ABI.
template <class F>
int guarded(const kv_call* c, F&& f) {
  if (!c) return KV_ERROR;
  try {
    return f();
  } catch (const std::exception& e) {
    return say(c, KV_ERROR, "example plugin: %s", e.what());
  } catch (...) {
    return say(c, KV_ERROR, "example plugin: unknown exception");
  }
}

int host_contract(const kv_call* c) {
  return guarded(c, [&] { return contract(c, false); });
}
int host_launch(const kv_call* c) {
  return guarded(c, [&] { return launch(c, false); });
}
#ifdef KV_PLUGIN_CUDA
int cuda_contract(const kv_call* c) {
  return guarded(c, [&] { return contract(c, true); });
}
int cuda_launch(const kv_call* c) {
  return guarded(c, [&] { return launch(c, true); });
}
#endif

}  // namespace

}  // namespace kvp

/// The ABI this plugin was built against.
KV_PLUGIN_EXPORT uint32_t kverify_plugin_abi_version(void) { return KV_PLUGIN_ABI_VERSION; }

/// Registers plugin_host, and plugin_cuda when built with CUDA.
KV_PLUGIN_EXPORT int kverify_plugin_register(const kv_registrar* r) {
  if (!r || !r->add_impl || r->abi_version != KV_PLUGIN_ABI_VERSION) return KV_ERROR;
  kv_impl_desc host{};
  host.struct_size = sizeof(kv_impl_desc);
  host.op = kvp::kOp;
  host.impl = "plugin_host";
  host.device = "host";
  host.version = "1";
  host.knobs = nullptr;
  host.contract = kvp::host_contract;
  host.launch = kvp::host_launch;
  host.accepts = kvp::kAccepts;  // optional (NULL: everything); plugin_cuda takes the same
  int rc = r->add_impl(r->ctx, &host);
#ifdef KV_PLUGIN_CUDA
  kv_impl_desc cuda = host;
  cuda.impl = "plugin_cuda";
  cuda.device = "cuda";
  cuda.knobs = kvp::kCudaKnobs;
  cuda.contract = kvp::cuda_contract;
  cuda.launch = kvp::cuda_launch;
  const int rc_cuda = r->add_impl(r->ctx, &cuda);
  if (rc == KV_OK) rc = rc_cuda;
#endif
  return rc;
}
