/* A test plugin with a planted bug: rms_norm.fwd `plugin_nan` computes rstd and y as one
 * serial fp32 sum per row would, then writes NaN over the first element of every row of y.
 * Its failing cases show whether a replay line carries --plugin (without it the impl is
 * unknown) and reproduces the failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kverify/plugin.h"
#include "ext/plugin_util.h"

/* fp32 contiguous tensors only; one serial sum per row. */
static int contract(const kv_call* c) {
  for (int i = 0; i < c->n_tensors; ++i)
    for (long long d = c->tensors[i].ndim - 1, want = 1; d >= 0; want *= c->tensors[i].shape[d--])
      if (c->tensors[i].dtype != KV_F32 || c->tensors[i].strides[d] != want)
        return snprintf(c->message, c->message_cap, "fp32, contiguous only"), KV_UNSUPPORTED;
  if (strcmp(attr(c, "mode"), "llama"))
    return snprintf(c->message, c->message_cap, "mode llama only"), KV_UNSUPPORTED;
  snprintf(c->message, c->message_cap,
           "{\"acc\": \"fp32\", \"math_ulps\": {\"rsqrt\": 2}, \"reductions\": {\"row\": {\"serial\": %lld}}, "
           "\"determinism\": {\"y\": [\"run_to_run\"], \"rstd\": [\"run_to_run\"]}}",
           (long long)c->shape[c->ndim - 1]);
  return KV_OK;
}

static int launch(const kv_call* c) { /* x, w -> y, rstd */
  const float *x = c->tensors[0].data, *w = c->tensors[1].data;
  float *y = c->tensors[2].data, *rstd = c->tensors[3].data;
  const float eps = (float)strtod(attr(c, "eps"), 0), off = (float)strtod(attr(c, "offset"), 0);
  const long long n = c->shape[c->ndim - 1], rows = rows_of(c);
  fp32_rms_rows(x, w, y, rstd, n, rows, eps, off);
  for (long long r = 0; r < rows; ++r) y[r * n] = NAN; /* the planted bug: each row's first element */
  return KV_OK;
}

KV_PLUGIN_EXPORT uint32_t kverify_plugin_abi_version(void) { return KV_PLUGIN_ABI_VERSION; }

KV_PLUGIN_EXPORT int kverify_plugin_register(const kv_registrar* r) {
  kv_impl_desc d = {sizeof d, "rms_norm.fwd", "plugin_nan", "host", "1", "", contract, launch};
  return r->add_impl(r->ctx, &d);
}
