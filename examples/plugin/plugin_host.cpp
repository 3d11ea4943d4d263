// The example plugin's host path (plugin_parts.hpp): fp16/bf16 <-> fp32 conversions and
// one serial fp32 sum per row. Compiled with -ffp-contract=off: its float arithmetic has
// no FMA, as the contract says.
#include <cfenv>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "plugin_parts.hpp"

namespace kvp {

namespace {

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

}  // namespace

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

}  // namespace kvp
