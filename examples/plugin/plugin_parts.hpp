// The example plugin's parts (kv_example_plugin.cpp registers its impls): the case's
// checks (plugin_case.cpp), the tensors to launch arguments (plugin_args.cpp) and the host
// path (plugin_host.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "kverify/plugin.h"
#include "rms_norm_kernel.h"

namespace kvp {

inline const char* const kOp = "rms_norm.fwd";
inline const char* const kCudaKnobs = "num_warps=8|1|2|4|16|32";
// mean = sum / N is one fp32 division only while N is exact in fp32.
constexpr int64_t kMaxN = int64_t(1) << 24;

/// Writes a message (reason, error or contract) into call->message; returns rc.
int say(const kv_call* c, int rc, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

struct Params {
  int mode = kLlama;
  float eps = 0, offset = 0;
  int num_warps = 0;  // 0 for plugin_host
  int64_t n = 0, rows = 0;
  int lead = 0;
  int x_dt = KV_F32, w_dt = KV_F32, y_dt = KV_F32, rstd_dt = KV_F32;
};

// ---- the case (plugin_case.cpp) ----

/// The value of token `key=` in the replay string ("" when absent): contract() sees the
/// dtypes and aliases only there.
std::string case_token(const kv_call* c, const char* key);
/// `name:value` in a comma-separated list, or "".
std::string list_value(const std::string& list, const std::string& name);
/// A kv_dtype from its name (fp32, fp16, bf16, i32), -1 for another.
int dtype_of(const std::string& s);
/// Checks what contract() and launch() both see (op, shape, config, attributes) and fills
/// p; returns KV_OK, or `fail` (KV_UNSUPPORTED or KV_ERROR) with the reason.
int check_case(const kv_call* c, bool cuda, Params& p, int fail);
/// x, w and y floating-point, rstd fp32; KV_OK, or `fail` with the reason.
int check_dtypes(const kv_call* c, const Params& p, int fail);

// ---- launch arguments (plugin_args.cpp) ----

/// Checks the tensors against the case and fills a; KV_ERROR with the reason otherwise.
int build_args(const kv_call* c, Params& p, RmsFwdArgs& a);

// ---- the host path (plugin_host.cpp) ----

/// The contract's fp32 arithmetic needs round-to-nearest and no flush to zero on this thread.
int check_fp_env(const kv_call* c);
/// The host path: one serial fp32 sum of squares per row, then the row's outputs.
void host_rms_fwd(const RmsFwdArgs& a);

}  // namespace kvp
