// An example kverify plugin: rms_norm.fwd (modes llama and gemma) as `plugin_host` (plain
// C++, one serial sum per row) and, built with -DKV_PLUGIN_CUDA, `plugin_cuda` (one block
// per row, rms_norm_kernel.cu). Registration, knobs, contracts, argument checks, host path.
// Compiled with -ffp-contract=off: the host path's float arithmetic has no FMA.
#include <cerrno>
#include <cfenv>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "kverify/plugin.h"
#include "rms_norm_kernel.h"


namespace kvp {

namespace {

const char* const kOp = "rms_norm.fwd";
const char* const kCudaKnobs = "num_warps=8|1|2|4|16|32";
// mean = sum / N is one fp32 division only while N is exact in fp32.
constexpr int64_t kMaxN = int64_t(1) << 24;

/// Writes a message (reason, error or contract) into call->message; returns rc.
int say(const kv_call* c, int rc, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
int say(const kv_call* c, int rc, const char* fmt, ...) {
  if (c->message && c->message_cap) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(c->message, c->message_cap, fmt, ap);
    va_end(ap);
  }
  return rc;
}

// ---- fp16/bf16 <-> fp32 on the host (round to nearest even, NaN kept quiet) ----

float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);  // a carry into the exponent is the correct rounding (to inf too)
  return uint16_t(u >> 16);
}

float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    float v = static_cast<float>(m) * 0x1p-24f;  // subnormal: exact
    return sign ? -v : v;
  }
  if (e == 31) return bits_to_float(sign | 0x7f800000u | (m << 13));
  return bits_to_float(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t float_to_f16(float f) {
  const uint32_t u = float_to_bits(f), a = u & 0x7fffffffu;
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (a <= 0x33000000u) return sign;                      // <= 2^-25 rounds to 0
  uint32_t e = a >> 23, m = a & 0x7fffffu, h, rem, half;
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half, m * 2^(e-150) / 2^-24
    m |= 0x800000u;
    const uint32_t shift = 126u - e;  // 14..23
    h = m >> shift;
    rem = m & ((1u << shift) - 1u);
    half = 1u << (shift - 1u);
  } else {
    h = ((e - 112u) << 10) | (m >> 13);
    rem = m & 0x1fffu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (h & 1u))) ++h;  // a carry into the exponent is correct
  return uint16_t(sign | h);
}

float load(const void* p, int dt, int64_t i) {
  if (dt == KV_F16) return f16_to_float(static_cast<const uint16_t*>(p)[i]);
  if (dt == KV_BF16) return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  return static_cast<const float*>(p)[i];
}

void store(void* p, int dt, int64_t i, float v) {
  if (dt == KV_F16)
    static_cast<uint16_t*>(p)[i] = float_to_f16(v);
  else if (dt == KV_BF16)
    static_cast<uint16_t*>(p)[i] = float_to_bf16(v);
  else
    static_cast<float*>(p)[i] = v;
}

float round_to(int dt, float v) {
  if (dt == KV_F16) return f16_to_float(float_to_f16(v));
  if (dt == KV_BF16) return bf16_to_float(float_to_bf16(v));
  return v;
}

// ---- the case: config, attributes, dtypes ----

const char* find_pair(const kv_pair* p, int32_t n, const char* key) {
  for (int32_t i = 0; i < n; ++i)
    if (p[i].key && std::strcmp(p[i].key, key) == 0) return p[i].value;
  return nullptr;
}

/// The value of token `key=` in the replay string ("" when absent): contract() sees the
/// dtypes and aliases only there.
std::string case_token(const kv_call* c, const char* key) {
  if (!c->case_str) return "";
  const std::string s = c->case_str, k = std::string(" ") + key + "=";
  const size_t p = s.find(k);
  if (p == std::string::npos) return "";
  const size_t b = p + k.size();
  return s.substr(b, s.find(' ', b) == std::string::npos ? std::string::npos : s.find(' ', b) - b);
}

/// `name:value` in a comma-separated list, or "".
std::string list_value(const std::string& list, const std::string& name) {
  size_t b = 0;
  while (b <= list.size()) {
    size_t e = list.find(',', b);
    if (e == std::string::npos) e = list.size();
    const std::string item = list.substr(b, e - b);
    if (item.compare(0, name.size() + 1, name + ":") == 0) return item.substr(name.size() + 1);
    b = e + 1;
  }
  return "";
}

int dtype_of(const std::string& s) {
  if (s == "fp32") return KV_F32;
  if (s == "fp16") return KV_F16;
  if (s == "bf16") return KV_BF16;
  if (s == "i32") return KV_I32;
  return -1;
}

const char* dtype_name(int d) {
  switch (d) {
    case KV_F32:
      return "fp32";
    case KV_F16:
      return "fp16";
    case KV_BF16:
      return "bf16";
    case KV_I32:
      return "i32";
    default:
      return "?";
  }
}

bool is_float_dtype(int d) { return d == KV_F32 || d == KV_F16 || d == KV_BF16; }

/// A whole-string real (kverify sends C99 hex floats; decimal is read too).
bool parse_real(const char* s, double& out) {
  if (!s || !*s) return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(s, &end);
  return *end == '\0' && errno != ERANGE && std::isfinite(out);
}

struct Params {
  int mode = kLlama;
  float eps = 0, offset = 0;
  int num_warps = 0;  // 0 for plugin_host
  int64_t n = 0, rows = 0;
  int lead = 0;
  int x_dt = KV_F32, w_dt = KV_F32, y_dt = KV_F32, rstd_dt = KV_F32;
};

/// Checks what contract() and launch() both see (op, shape, config, attributes) and fills
/// p; returns KV_OK, or `fail` (KV_UNSUPPORTED or KV_ERROR) with the reason.
int check_case(const kv_call* c, bool cuda, Params& p, int fail) {
  if (!c->op || std::strcmp(c->op, kOp) != 0) return say(c, fail, "this impl computes %s, not %s", kOp, c->op);
  if (c->ndim < 1 || !c->shape) return say(c, fail, "rms_norm.fwd needs a shape (rows..., N)");
  p.lead = c->ndim - 1;
  if (p.lead > kMaxLead) return say(c, fail, "%d leading dims; this plugin addresses at most %d", p.lead, kMaxLead);
  p.n = c->shape[p.lead];
  if (p.n < 1) return say(c, fail, "N (the last dim) must be positive");
  if (p.n > kMaxN) return say(c, fail, "N = %lld > 2^24: mean = sum/N would not be one fp32 division", (long long)p.n);
  p.rows = 1;
  for (int d = 0; d < p.lead; ++d) {
    if (c->shape[d] < 0) return say(c, fail, "negative dimension in the shape");
    p.rows *= c->shape[d];
  }

  for (int32_t i = 0; i < c->n_config; ++i) {
    const char* k = c->config[i].key;
    if (!cuda || !k || std::strcmp(k, "num_warps") != 0)
      return say(c, fail, "unknown config knob '%s' (%s)", k ? k : "",
                 cuda ? "plugin_cuda has num_warps" : "plugin_host has none");
  }
  if (cuda) {
    const char* nw = find_pair(c->config, c->n_config, "num_warps");
    p.num_warps = 8;  // the default, first in kCudaKnobs
    if (nw) {
      const std::string s = nw;
      if (s != "1" && s != "2" && s != "4" && s != "8" && s != "16" && s != "32")
        return say(c, fail, "num_warps=%s: this kernel takes 1, 2, 4, 8, 16 or 32", nw);
      p.num_warps = std::atoi(nw);
    }
  }

  // Absent attributes take kverify's defaults (kverify list: llama, eps 1e-6, offset 0).
  const char* mode = find_pair(c->attrs, c->n_attrs, "mode");
  if (!mode || std::strcmp(mode, "llama") == 0)
    p.mode = kLlama;
  else if (std::strcmp(mode, "gemma") == 0)
    p.mode = kGemma;
  else if (std::strcmp(mode, "none") == 0)
    return say(c, fail, "mode none (arithmetic in x's dtype) is not implemented: this plugin does llama and gemma");
  else
    return say(c, fail, "unknown mode '%s'", mode);
  const char* eps_s = find_pair(c->attrs, c->n_attrs, "eps");
  const char* off_s = find_pair(c->attrs, c->n_attrs, "offset");
  double eps = 0x1.0c6f7a0b5ed8dp-20, offset = 0.0;
  if (eps_s && !parse_real(eps_s, eps)) return say(c, fail, "eps '%s' is not a finite real", eps_s);
  if (off_s && !parse_real(off_s, offset)) return say(c, fail, "offset '%s' is not a finite real", off_s);
  p.eps = static_cast<float>(eps);  // the definition rounds eps to fp32
  p.offset = static_cast<float>(offset);
  // W' = RN_fp32(offset + w) is one fp32 addition only if offset is an fp32 value.
  if (static_cast<double>(p.offset) != offset)
    return say(c, fail, "offset %s is not exact in fp32 (W' = offset + w is an fp32 addition here)", off_s);
  for (int32_t i = 0; i < c->n_attrs; ++i) {
    const char* k = c->attrs[i].key;
    if (!k || (std::strcmp(k, "mode") && std::strcmp(k, "eps") && std::strcmp(k, "offset")))
      return say(c, fail, "unknown attribute '%s'", k ? k : "");
  }
  return KV_OK;
}

int check_dtypes(const kv_call* c, const Params& p, int fail) {
  const int* dts[] = {&p.x_dt, &p.w_dt, &p.y_dt};
  const char* names[] = {"x", "w", "y"};
  for (int i = 0; i < 3; ++i)
    if (!is_float_dtype(*dts[i]))
      return say(c, fail, "%s is %s; this plugin takes fp32, fp16 or bf16", names[i], dtype_name(*dts[i]));
  if (p.rstd_dt != KV_F32) return say(c, fail, "rstd is %s; llama and gemma keep it fp32", dtype_name(p.rstd_dt));
  return KV_OK;
}

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

// ---- launch: tensors to arguments ----

const kv_tensor* tensor(const kv_call* c, const char* name) {
  for (int32_t i = 0; i < c->n_tensors; ++i)
    if (c->tensors[i].name && std::strcmp(c->tensors[i].name, name) == 0) return &c->tensors[i];
  return nullptr;
}

/// Stride of dim d (a NULL strides array is read as contiguous).
int64_t stride_of(const kv_tensor& t, int d) {
  if (t.strides) return t.strides[d];
  int64_t s = 1;
  for (int i = t.ndim - 1; i > d; --i) s *= t.shape[i];
  return s;
}

/// Byte range [lo, hi) the tensor's elements span (shape has no zero extent).
void byte_span(const kv_tensor& t, int elem, uintptr_t& lo, uintptr_t& hi) {
  int64_t mn = 0, mx = 0;
  for (int d = 0; d < t.ndim; ++d) {
    const int64_t reach = (t.shape[d] - 1) * stride_of(t, d);
    (reach < 0 ? mn : mx) += reach;
  }
  lo = reinterpret_cast<uintptr_t>(t.data) + mn * elem;
  hi = reinterpret_cast<uintptr_t>(t.data) + (mx + 1) * elem;
}

int elem_size(int dt) { return dt == KV_F16 || dt == KV_BF16 ? 2 : 4; }

bool overlap(const kv_tensor& a, const kv_tensor& b) {
  uintptr_t alo, ahi, blo, bhi;
  byte_span(a, elem_size(a.dtype), alo, ahi);
  byte_span(b, elem_size(b.dtype), blo, bhi);
  return alo < bhi && blo < ahi;
}

/// Same dtype, data, shape and strides: each y element is the input element of its index.
bool same_elements(const kv_tensor& y, const kv_tensor& in) {
  if (y.data != in.data || y.dtype != in.dtype || y.ndim != in.ndim) return false;
  for (int d = 0; d < y.ndim; ++d)
    if (y.shape[d] != in.shape[d] || (y.shape[d] > 1 && stride_of(y, d) != stride_of(in, d))) return false;
  return true;
}

/// Checks the tensors against the case and fills a; KV_ERROR with the reason otherwise.
int build_args(const kv_call* c, Params& p, RmsFwdArgs& a) {
  const kv_tensor *x = tensor(c, "x"), *w = tensor(c, "w"), *y = tensor(c, "y"), *rs = tensor(c, "rstd");
  if (!x || !w || !y || !rs) return say(c, KV_ERROR, "rms_norm.fwd needs tensors x, w, y and rstd");
  p.x_dt = x->dtype;
  p.w_dt = w->dtype;
  p.y_dt = y->dtype;
  p.rstd_dt = rs->dtype;
  if (check_dtypes(c, p, KV_ERROR) != KV_OK) return KV_ERROR;
  if (x->is_output || w->is_output || !y->is_output || !rs->is_output)
    return say(c, KV_ERROR, "x and w must be inputs, y and rstd outputs");
  auto same_shape = [&](const kv_tensor& t, int nd, const int64_t* s) {
    if (t.ndim != nd || (nd && !t.shape)) return false;
    for (int d = 0; d < nd; ++d)
      if (t.shape[d] != s[d]) return false;
    return true;
  };
  const int64_t one = 1;
  if (!same_shape(*x, c->ndim, c->shape) || !same_shape(*y, c->ndim, c->shape))
    return say(c, KV_ERROR, "x and y must have the case's shape");
  if (!same_shape(*w, 1, &p.n)) return say(c, KV_ERROR, "w must have shape (N)");
  if (!(p.lead ? same_shape(*rs, p.lead, c->shape) : same_shape(*rs, 1, &one)))
    return say(c, KV_ERROR, "rstd must have the case's shape without N");
  if (p.rows == 0) {
    a.rows = 0;
    return KV_OK;
  }
  if (!x->data || !w->data || !y->data || !rs->data) return say(c, KV_ERROR, "a tensor has no data");
  // y may reuse x's (or, 1-D, w's) storage element for element: each y[..., j] is written
  // after the one read of the same x[..., j] / w[j], by the same thread. Any other overlap
  // with an input, and rstd over an input (rows read w and x after another row's rstd is
  // written), is refused.
  for (const kv_tensor* in : {x, w}) {
    if (overlap(*y, *in) && !same_elements(*y, *in))
      return say(c, KV_ERROR, "y overlaps %s other than element for element", in->name);
    if (overlap(*rs, *in)) return say(c, KV_ERROR, "rstd overlaps %s", in->name);
  }

  a.x = x->data;
  a.w = w->data;
  a.y = y->data;
  a.rstd = static_cast<float*>(rs->data);
  a.x_dt = p.x_dt;
  a.w_dt = p.w_dt;
  a.y_dt = p.y_dt;
  a.mode = p.mode;
  a.rows = p.rows;
  a.n = p.n;
  a.lead = p.lead;
  for (int d = 0; d < p.lead; ++d) {
    a.lead_shape[d] = c->shape[d];
    a.x_lead[d] = stride_of(*x, d);
    a.y_lead[d] = stride_of(*y, d);
    a.r_lead[d] = stride_of(*rs, d);
  }
  a.x_col = stride_of(*x, p.lead);
  a.y_col = stride_of(*y, p.lead);
  a.w_col = stride_of(*w, 0);
  a.eps = p.eps;
  a.offset = p.offset;
  return KV_OK;
}

/// The contract's fp32 arithmetic needs round-to-nearest and no flush to zero on this thread.
int check_fp_env(const kv_call* c) {
  if (std::fegetround() != FE_TONEAREST)
    return say(c, KV_ERROR, "the calling thread's rounding mode is not to nearest");
#if defined(__SSE__)
  if (_mm_getcsr() & 0x8040u) return say(c, KV_ERROR, "the calling thread flushes subnormals (MXCSR FTZ/DAZ set)");
#endif
  return KV_OK;
}

/// The host path: one serial fp32 sum of squares per row, then the row's outputs.
void host_rms_fwd(const RmsFwdArgs& a) {
  // W' = RN_fp32(offset + w), once per column.
  std::vector<float> wp(static_cast<size_t>(a.n));
  for (int64_t j = 0; j < a.n; ++j) wp[j] = a.offset + load(a.w, a.w_dt, j * a.w_col);
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t xo = row_offset(a, a.x_lead, r), yo = row_offset(a, a.y_lead, r);
    float s = 0.0f;
    for (int64_t j = 0; j < a.n; ++j) {
      const float v = load(a.x, a.x_dt, xo + j * a.x_col);
      const float sq = v * v;
      s = s + sq;
    }
    const float ms = s / static_cast<float>(a.n);  // n <= 2^24: exact in fp32
    const float rstd = 1.0f / std::sqrt(ms + a.eps);
    for (int64_t j = 0; j < a.n; ++j) {
      float t = load(a.x, a.x_dt, xo + j * a.x_col) * rstd;
      if (a.mode == kLlama) t = round_to(a.x_dt, t);    // llama: RN_x(RN_fp32(x * rstd))
      store(a.y, a.y_dt, yo + j * a.y_col, t * wp[j]);  // RN_y(RN_fp32(t * W'))
    }
    a.rstd[row_offset(a, a.r_lead, r)] = rstd;
  }
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
