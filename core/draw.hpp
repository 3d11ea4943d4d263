// The input generator's arithmetic, from one source for the host and the GPU (KV_HD): the
// counter from logical coordinates, Philox4x32-10 (Random123), the uniform and normal
// draws in IEEE + - * / and exact scalings only (own log and sqrt), and each distribution's
// value before its rounding to the tensor's dtype. core/rng.cpp and core/inputs.cpp call
// these on the host; device/gpu_fill.cu calls them in a kernel built with --fmad=false, so
// that no multiply-add is fused and both give the same bits (tested bit for bit:
// tests/cuda/test_gpu_fill.cpp).
#pragma once
#include <Random123/philox.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "core/dtype.hpp"
#include "core/hd.hpp"

namespace kv::gen {

#if defined(__CUDA_ARCH__)
KV_HD inline double frexp_exact(double a, int* e) { return ::frexp(a, e); }
KV_HD inline double ldexp_exact(double a, int e) { return ::ldexp(a, e); }
#else
inline double frexp_exact(double a, int* e) { return std::frexp(a, e); }
inline double ldexp_exact(double a, int e) { return std::ldexp(a, e); }
#endif

/// Counter words from logical coordinates (n of them, outermost first), innermost first;
/// dims past the third are folded into the fourth word, which stays stable when inner
/// dims shrink.
KV_HD inline void coord_counter(const int64_t* coords, int n, uint32_t c[4]) {
  c[0] = c[1] = c[2] = c[3] = 0;
  for (int i = 0; i < 3 && i < n; ++i) c[i] = static_cast<uint32_t>(coords[n - 1 - i]);
  uint64_t fold = 0;
  for (int i = 3; i < n; ++i) fold = fold * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(coords[n - 1 - i]) + 1;
  c[3] = static_cast<uint32_t>(fold ^ (fold >> 32));
}

KV_HD inline void philox(uint32_t k0, uint32_t k1, const uint32_t ctr[4], uint32_t out[4]) {
  r123::Philox4x32 g;
  r123::Philox4x32::ctr_type c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
  r123::Philox4x32::key_type k = {{k0, k1}};
  const auto r = g(c, k);
  for (int i = 0; i < 4; ++i) out[i] = r[i];
}

KV_HD inline double uniform_open01(uint32_t hi, uint32_t lo) {
  // 32 + 20 bits, plus half a step: values k/2^52 + 2^-53 lie strictly inside (0, 1).
  const double k = static_cast<double>(hi) * 1048576.0 + static_cast<double>(lo >> 12);
  return (k + 0.5) * 0x1p-52;
}

KV_HD inline double det_sqrt(double a) {
  if (!(a > 0.0)) return a == 0.0 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  int e = 0;
  double m = frexp_exact(a, &e);  // exact
  if (e % 2 != 0) {  // make the exponent even: m in [0.5, 2)
    m *= 2.0;
    e -= 1;
  }
  double y = ldexp_exact(1.0, e / 2);  // within a factor 1.42 of sqrt(a)
  for (int i = 0; i < 10; ++i) y = 0.5 * (y + a / y);
  return y;
}

KV_HD inline double det_log(double u) {
  int e = 0;
  double m = frexp_exact(u, &e);  // u = m 2^e, m in [0.5, 1)
  if (m < 0.7071067811865476) {
    m *= 2.0;
    e -= 1;
  }
  // ln m = 2 atanh(z), z = (m-1)/(m+1), |z| <= 0.1716: 14 odd terms reach 1e-17.
  double z = (m - 1.0) / (m + 1.0), z2 = z * z, term = z, sum = 0.0;
  for (int k = 1; k <= 29; k += 2) {
    sum += term / k;
    term *= z2;
  }
  return 2.0 * sum + e * 0.6931471805599453;
}

KV_HD inline double normal_from_uniform(double p) {
  // Rational approximation of the normal quantile (P. J. Acklam), relative error 1.15e-9;
  // the values are then rounded to a low-precision dtype, so that is ample.
  constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                          1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                          6.680131188771972e+01,  -1.328068155288572e+01};
  constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                          -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                          3.754408661907416e+00};
  const double plow = 0.02425;
  if (p < plow || p > 1.0 - plow) {
    double t = p < plow ? p : 1.0 - p;
    double q = det_sqrt(-2.0 * det_log(t));
    double x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
               ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    return p < plow ? x : -x;
  }
  double q = p - 0.5, r = q * q;
  return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
         (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
}

/// The distributions (core/inputs.hpp's ValueDist).
enum class Dist : int { normal, uniform, tiny, large, mean_shift, wide, big_mean, zeros, const_rows, subnormal,
                        near_overflow, nan_inject, inf_inject };

/// One tensor's draw: the distribution, its keys (Philox keys of the tensor's name and of
/// name + "/row"), the affine map, the dtype (for subnormal and near_overflow).
struct Spec {
  Dist d;
  DType dt;
  uint32_t k0, k1, r0, r1;
  double shift, scale;
};

/// The base sample of the distributions that are a shift and scale of one draw.
KV_HD inline double base_sample(Dist d, uint32_t k0, uint32_t k1, const int64_t* coords, int n) {
  uint32_t ctr[4], w[4];
  coord_counter(coords, n, ctr);
  philox(k0, k1, ctr, w);
  const double u = uniform_open01(w[0], w[1]);
  if (d == Dist::uniform) return 2.0 * u - 1.0;
  const double z = normal_from_uniform(u);
  switch (d) {
    case Dist::tiny: return z * 0x1p-10;
    case Dist::large: return z * 0x1p6;
    case Dist::mean_shift: return 4.0 + z;
    case Dist::big_mean: return 256.0 + z * 0.125;  // a large mean over a small spread
    case Dist::wide: return ldexp_exact(z, static_cast<int>(w[2] % 25u) - 12);  // exact scaling
    case Dist::zeros: return 0.0;
    default: return z;  // normal
  }
}

/// The value at logical coordinates `coords` (n of them), before rounding to s.dt. Where
/// the row's first element is drawn (const_rows, the injections' row flag), coords' last
/// entry is set to 0 and put back.
KV_HD inline double value(const Spec& s, int64_t* coords, int n) {
  switch (s.d) {
    case Dist::subnormal: return min_normal(s.dt) * base_sample(Dist::uniform, s.k0, s.k1, coords, n);
    case Dist::const_rows: {
      int64_t last = 0;
      if (n > 0) last = coords[n - 1], coords[n - 1] = 0;  // one value per row
      const double r = s.shift + s.scale * base_sample(Dist::normal, s.k0, s.k1, coords, n);
      if (n > 0) coords[n - 1] = last;
      return r;
    }
    case Dist::near_overflow: {
      // Within a factor 16 of the dtype's largest finite value, either sign (exact scaling).
      uint32_t ctr[4], w[4];
      coord_counter(coords, n, ctr);
      philox(s.k0, s.k1, ctr, w);
      const double u = uniform_open01(w[0], w[1]);
      const double m = ldexp_exact(max_finite(s.dt) * (0.5 + 0.5 * u), -static_cast<int>(w[2] % 4u));
      return (w[3] & 1u) ? -m : m;
    }
    case Dist::nan_inject:
    case Dist::inf_inject: {
      // In about one row in three (rows: every coordinate but the last), about one element
      // in 61 is special (NaN, or +inf / -inf); the rest are normal. Clean rows stay beside.
      uint32_t ctr[4], w[4], rc[4], rw[4];
      coord_counter(coords, n, ctr);
      philox(s.k0, s.k1, ctr, w);
      int64_t last = 0;
      if (n > 0) last = coords[n - 1], coords[n - 1] = 0;
      coord_counter(coords, n, rc);
      if (n > 0) coords[n - 1] = last;
      philox(s.r0, s.r1, rc, rw);
      const bool spiky = rw[3] % 3u == 0;
      if (spiky && w[3] % 61u == 0) {
        if (s.d == Dist::nan_inject) return std::numeric_limits<double>::quiet_NaN();
        return (w[2] & 1u) ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      }
      return s.shift + s.scale * base_sample(Dist::normal, s.k0, s.k1, coords, n);
    }
    default: return s.shift + s.scale * base_sample(s.d, s.k0, s.k1, coords, n);
  }
}

}  // namespace kv::gen
