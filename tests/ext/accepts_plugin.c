/* A test plugin whose impls declare what they accept (kv_impl_desc.accepts):
 *   softmax.bwd sm_site    fp32 contiguous; each term dy*y of the row sum rounded to bf16,
 *                          the rounding site softmax.bwd_dy_y declared in its contract
 *   softmax.bwd sm_nosite  the same arithmetic, the site not declared (must fail)
 *   rms_norm.fwd rms_gemma fp32, mode gemma only, contiguous; one serial fp32 sum per row
 *   rms_norm.fwd rms_eps   eps 1e-5 only (as written; kverify compares canonical values)
 *   rms_norm.fwd rms_old   rms_gemma's code through a descriptor of the header before
 *                          `accepts` (struct_size ends at launch): its garbage accepts
 *                          pointer is never read, so it accepts everything
 *   rms_norm.fwd bad_dtype, bad_json, bad_mode: malformed accepts (unusable, with the reason)
 * Everything is computed in fp32 without FMA (built with -ffp-contract=off). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kverify/plugin.h"
#include "plugin_util.h"

static const kv_tensor* tensor(const kv_call* c, const char* name) {
  for (int i = 0; i < c->n_tensors; ++i)
    if (!strcmp(c->tensors[i].name, name)) return &c->tensors[i];
  return NULL;
}

/* What kverify does not check for us (accepts covers dtypes, attributes and layouts). */
static int fp32_only(const kv_call* c) {
  for (int i = 0; i < c->n_tensors; ++i)
    if (c->tensors[i].dtype != KV_F32)
      return snprintf(c->message, c->message_cap, "contract(): fp32 only (%s)", c->tensors[i].name), KV_UNSUPPORTED;
  return KV_OK;
}

/* p (an exact product of two floats) rounded to bf16, to nearest even. */
static double round_bf16(double p) {
  int e;
  if (p == 0 || !isfinite(p)) return p;
  double m = frexp(p, &e); /* p = m * 2^e, 0.5 <= |m| < 1 */
  if (e - 1 < -126) return ldexp(nearbyint(ldexp(p, 133)), -133);
  return ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

static int softmax_contract(const kv_call* c, int site) {
  if (fp32_only(c) != KV_OK) return KV_UNSUPPORTED;
  snprintf(c->message, c->message_cap,
           "{\"acc\": \"fp32\", \"fma\": false, \"ftz\": false, \"math_ulps\": {}, "
           "\"reductions\": {\"row\": {\"serial\": %lld, \"depth\": 0, \"partials\": 0}}, "
           "\"determinism\": {\"dx\": [\"run_to_run\"]}%s}",
           (long long)c->shape[c->ndim - 1], site ? ", \"rounding_sites\": {\"softmax.bwd_dy_y\": \"bf16\"}" : "");
  return KV_OK;
}
static int site_contract(const kv_call* c) { return softmax_contract(c, 1); }
static int nosite_contract(const kv_call* c) { return softmax_contract(c, 0); }

static int softmax_launch(const kv_call* c) { /* dx = y * (dy - sum(bf16(dy * y))) */
  const float *dy = tensor(c, "dy")->data, *y = tensor(c, "y")->data;
  float* dx = tensor(c, "dx")->data;
  const long long n = c->shape[c->ndim - 1], rows = rows_of(c);
  for (long long r = 0; r < rows; ++r, dy += n, y += n, dx += n) {
    float s = 0;
    for (long long j = 0; j < n; ++j) s += (float)round_bf16((double)dy[j] * (double)y[j]);
    for (long long j = 0; j < n; ++j) dx[j] = y[j] * (dy[j] - s);
  }
  return KV_OK;
}

static int rms_contract(const kv_call* c) {
  if (fp32_only(c) != KV_OK) return KV_UNSUPPORTED;
  snprintf(c->message, c->message_cap,
           "{\"acc\": \"fp32\", \"fma\": false, \"ftz\": false, \"math_ulps\": {\"rsqrt\": 2}, "
           "\"reductions\": {\"row\": {\"serial\": %lld, \"depth\": 0, \"partials\": 0}}, "
           "\"determinism\": {\"y\": [\"run_to_run\"], \"rstd\": [\"run_to_run\"]}}",
           (long long)c->shape[c->ndim - 1]);
  return KV_OK;
}

static int rms_launch(const kv_call* c) { /* x, w -> y, rstd; in fp32 gemma and llama agree */
  const float *x = tensor(c, "x")->data, *w = tensor(c, "w")->data;
  float *y = tensor(c, "y")->data, *rstd = tensor(c, "rstd")->data;
  const float eps = (float)strtod(attr(c, "eps"), 0), off = (float)strtod(attr(c, "offset"), 0);
  fp32_rms_rows(x, w, y, rstd, c->shape[c->ndim - 1], rows_of(c), eps, off);
  return KV_OK;
}

KV_PLUGIN_EXPORT uint32_t kverify_plugin_abi_version(void) { return KV_PLUGIN_ABI_VERSION; }

static int add(const kv_registrar* r, const char* op, const char* impl, int (*contract)(const kv_call*),
               int (*launch)(const kv_call*), const char* accepts) {
  kv_impl_desc d = {sizeof d, op, impl, "host", "1", NULL, contract, launch, accepts};
  return r->add_impl(r->ctx, &d);
}

KV_PLUGIN_EXPORT int kverify_plugin_register(const kv_registrar* r) {
  static const char* fp32 = "{\"dtypes\": [\"fp32\"], \"layouts\": [\"contiguous\"]}";
  static const char* gemma = "{\"dtypes\": [\"fp32\"], \"attrs\": {\"mode\": [\"gemma\"]}, \"layouts\": [\"contiguous\"]}";
  int rc = add(r, "softmax.bwd", "sm_site", site_contract, softmax_launch, fp32);
  rc |= add(r, "softmax.bwd", "sm_nosite", nosite_contract, softmax_launch, fp32);
  rc |= add(r, "rms_norm.fwd", "rms_gemma", rms_contract, rms_launch, gemma);
  rc |= add(r, "rms_norm.fwd", "rms_eps", rms_contract, rms_launch, "{\"attrs\": {\"eps\": [\"1e-5\"]}}");
  rc |= add(r, "rms_norm.fwd", "bad_dtype", rms_contract, rms_launch, "{\"dtypes\": [\"fp8\"]}");
  rc |= add(r, "rms_norm.fwd", "bad_json", rms_contract, rms_launch, "{\"dtypes\": [\"fp32\"]");
  rc |= add(r, "rms_norm.fwd", "bad_mode", rms_contract, rms_launch, "{\"attrs\": {\"mode\": [\"mistral\"]}}");
  kv_impl_desc old = {offsetof(kv_impl_desc, accepts), "rms_norm.fwd", "rms_old", "host", "1", NULL, rms_contract,
                      rms_launch, "{not read"};
  rc |= r->add_impl(r->ctx, &old);
  return rc;
}
