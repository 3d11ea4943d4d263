// The example plugin's rms_norm.fwd arguments, shared by the host path (kv_example_plugin.cpp)
// and the CUDA launcher (rms_norm_kernel.cu, declared here only with -DKV_PLUGIN_CUDA).
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "kverify/plugin.h"

#ifdef __CUDACC__
#define KVP_HD __host__ __device__
#else
#define KVP_HD
#endif

namespace kvp {

/// Leading (row) dimensions addressed by the general stride walk; more is rejected.
constexpr int kMaxLead = 8;

enum Mode : int { kLlama = 0, kGemma = 1 };

/// One forward call: x, y of shape (lead..., n), w of shape (n), rstd of shape (lead...)
/// ((1) when there are no leading dims). Strides are in elements and may be anything
/// kverify hands over (including y sharing x's storage with x's layout).
struct RmsFwdArgs {
  const void* x;
  const void* w;
  void* y;
  float* rstd;
  int x_dt, w_dt, y_dt;  // kv_dtype values: KV_F32, KV_F16, KV_BF16
  int mode;              // Mode
  int64_t rows, n;
  int lead;
  int64_t lead_shape[kMaxLead];
  int64_t x_lead[kMaxLead], y_lead[kMaxLead], r_lead[kMaxLead];  // per leading dim
  int64_t x_col, y_col, w_col;                                   // along n
  /// eps rounded to fp32 (a mandated rounding); offset, checked to be an fp32 value.
  float eps, offset;
};

/// Element offset of row r (row-major over the leading dims) for one tensor's strides.
KVP_HD inline int64_t row_offset(const RmsFwdArgs& a, const int64_t* strides, int64_t r) {
  int64_t off = 0;
  for (int d = a.lead - 1; d >= 0; --d) {
    const int64_t e = a.lead_shape[d];
    off += (r % e) * strides[d];
    r /= e;
  }
  return off;
}

#ifdef KV_PLUGIN_CUDA
/// Enqueues the kernel on `stream` with `threads` = 32 * num_warps threads per block;
/// returns KV_OK, or KV_ERROR with the CUDA error in msg. Does not synchronize.
int rms_norm_fwd_cuda(const RmsFwdArgs& a, int threads, void* stream, char* msg, size_t cap);
#endif

}  // namespace kvp
