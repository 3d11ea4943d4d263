/* Pieces the test plugins share (tests/ext/*.c, tests/nan_plugin.c): an attribute's value,
 * the rows of a case (all dims but the last), and rms_norm.fwd over fp32 rows as these
 * plugins compute it (a serial sum of squares per row; fp32 gemma and llama agree). */
#ifndef KV_TEST_PLUGIN_UTIL_H
#define KV_TEST_PLUGIN_UTIL_H
#include <math.h>
#include <string.h>

#include "kverify/plugin.h"

static inline const char* attr(const kv_call* c, const char* k) {
  for (int i = 0; i < c->n_attrs; ++i)
    if (!strcmp(c->attrs[i].key, k)) return c->attrs[i].value;
  return "";
}

static inline long long rows_of(const kv_call* c) {
  long long rows = 1;
  for (int d = 0; d + 1 < c->ndim; ++d) rows *= c->shape[d];
  return rows;
}

static inline void fp32_rms_rows(const float* x, const float* w, float* y, float* rstd, long long n, long long rows,
                                 float eps, float off) {
  for (long long r = 0; r < rows; ++r, x += n, y += n) {
    float s = 0;
    for (long long j = 0; j < n; ++j) s += x[j] * x[j];
    rstd[r] = 1.0f / sqrtf(s / (float)n + eps);
    for (long long j = 0; j < n; ++j) y[j] = (x[j] * rstd[r]) * (off + w[j]);
  }
}

#endif
