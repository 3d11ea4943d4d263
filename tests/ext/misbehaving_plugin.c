/* A plugin that misbehaves in one way, chosen when it is built (KV_MISBEHAVE): it crashes
 * or hangs in kverify_plugin_register, or in contract(), or crashes in contract() only in
 * kverify's case-running worker. kverify must contain each one: that plugin's cases are
 * `error` with the reason, `list` says the plugin is unusable, kverify itself never dies.
 * Otherwise it is the README's mini plugin: rms_norm.fwd, impl "misbehaving", fp32. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kverify/plugin.h"
#include "plugin_util.h"

#define CRASH_REGISTER 1
#define HANG_REGISTER 2
#define CRASH_CONTRACT 3
#define HANG_CONTRACT 4
#define CRASH_CONTRACT_IN_WORKER 5

static void crash(void) {
  int* volatile p = NULL; /* the pointer volatile: the compiler cannot prove the store is UB and drop it */
  *p = 1;
  raise(SIGSEGV);
}

static void hang(void) {
  for (;;) sleep(1);
}

/* Whether this process is kverify's case-running worker (`kverify __worker ...`). */
static int in_worker(void) {
  char buf[4096];
  FILE* f = fopen("/proc/self/cmdline", "rb");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  for (size_t i = 0; i < n; ++i)
    if (!buf[i]) buf[i] = ' ';
  buf[n] = 0;
  return strstr(buf, "__worker") != NULL;
}

static int contract(const kv_call* c) {
  if (KV_MISBEHAVE == CRASH_CONTRACT || (KV_MISBEHAVE == CRASH_CONTRACT_IN_WORKER && in_worker())) crash();
  if (KV_MISBEHAVE == HANG_CONTRACT) hang();
  for (int i = 0; i < c->n_tensors; ++i)
    if (c->tensors[i].dtype != KV_F32) return snprintf(c->message, c->message_cap, "fp32 only"), KV_UNSUPPORTED;
  snprintf(c->message, c->message_cap,
           "{\"acc\": \"fp32\", \"math_ulps\": {\"rsqrt\": 2}, \"reductions\": {\"row\": {\"serial\": %lld}}}",
           (long long)c->shape[c->ndim - 1]);
  return KV_OK;
}

static int launch(const kv_call* c) {
  const float *x = c->tensors[0].data, *w = c->tensors[1].data;
  float *y = c->tensors[2].data, *rstd = c->tensors[3].data;
  float eps = strtod(attr(c, "eps"), 0), off = strtod(attr(c, "offset"), 0);
  fp32_rms_rows(x, w, y, rstd, c->shape[c->ndim - 1], rows_of(c), eps, off);
  return KV_OK;
}

KV_PLUGIN_EXPORT uint32_t kverify_plugin_abi_version(void) { return KV_PLUGIN_ABI_VERSION; }

KV_PLUGIN_EXPORT int kverify_plugin_register(const kv_registrar* r) {
  if (KV_MISBEHAVE == CRASH_REGISTER) crash();
  if (KV_MISBEHAVE == HANG_REGISTER) hang();
  kv_impl_desc d = {sizeof d, "rms_norm.fwd", "misbehaving", "host", "1", "", contract, launch};
  return r->add_impl(r->ctx, &d);
}
