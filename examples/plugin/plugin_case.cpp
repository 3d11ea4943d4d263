// The example plugin's case: op, shape, config, attributes and dtypes checked as
// contract() and launch() both see them (plugin_parts.hpp).
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "plugin_parts.hpp"

namespace kvp {

int say(const kv_call* c, int rc, const char* fmt, ...) {
  if (c->message && c->message_cap) {
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(c->message, c->message_cap, fmt, ap);
    va_end(ap);
  }
  return rc;
}

namespace {

const char* find_pair(const kv_pair* p, int32_t n, const char* key) {
  for (int32_t i = 0; i < n; ++i)
    if (p[i].key && std::strcmp(p[i].key, key) == 0) return p[i].value;
  return nullptr;
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

}  // namespace

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

}  // namespace kvp
