// Philox comes from Random123 (Debian's librandom123-dev); the uniform-to-normal step
// is our own so that it uses IEEE + - * / only.
#include "core/rng.hpp"

#include <Random123/philox.h>
#include <xxhash.h>

#include <cmath>

namespace kv {

PhiloxKey philox_key(uint64_t seed, std::string_view tensor) {
  uint64_t h = XXH64(tensor.data(), tensor.size(), seed);
  return {static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
}

std::array<uint32_t, 4> coord_counter(std::span<const int64_t> coords) {
  std::array<uint32_t, 4> c{0, 0, 0, 0};
  size_t n = coords.size();
  for (size_t i = 0; i < 3 && i < n; ++i) c[i] = static_cast<uint32_t>(coords[n - 1 - i]);
  // Leading dims beyond the third: folded into the fourth word, which stays stable
  // when inner dims shrink.
  uint64_t fold = 0;
  for (size_t i = 3; i < n; ++i) fold = fold * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(coords[n - 1 - i]) + 1;
  c[3] = static_cast<uint32_t>(fold ^ (fold >> 32));
  return c;
}

std::array<uint32_t, 4> philox4x32_10(PhiloxKey key, std::array<uint32_t, 4> ctr) {
  r123::Philox4x32 g;
  r123::Philox4x32::ctr_type c = {{ctr[0], ctr[1], ctr[2], ctr[3]}};
  r123::Philox4x32::key_type k = {{key.k0, key.k1}};
  auto r = g(c, k);
  return {r[0], r[1], r[2], r[3]};
}

double uniform_open01(uint32_t hi, uint32_t lo) {
  // 32 + 20 bits, plus half a step: values k/2^52 + 2^-53 lie strictly inside (0, 1).
  double k = static_cast<double>(hi) * 1048576.0 + static_cast<double>(lo >> 12);
  return (k + 0.5) * 0x1p-52;
}

double det_sqrt(double a) {
  if (!(a > 0.0)) return a == 0.0 ? 0.0 : NAN;
  int e = 0;
  double m = std::frexp(a, &e);  // exact
  if (e % 2 != 0) {  // make the exponent even: m in [0.5, 2)
    m *= 2.0;
    e -= 1;
  }
  double y = std::ldexp(1.0, e / 2);  // within a factor 1.42 of sqrt(a)
  for (int i = 0; i < 10; ++i) y = 0.5 * (y + a / y);
  return y;
}

double det_log(double u) {
  int e = 0;
  double m = std::frexp(u, &e);  // u = m 2^e, m in [0.5, 1)
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

double normal_from_uniform(double p) {
  // Rational approximation of the normal quantile (P. J. Acklam), relative error 1.15e-9;
  // the values are then rounded to a low-precision dtype, so that is ample.
  static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
                             1.383577518672690e+02,  -3.066479806614716e+01, 2.506628277459239e+00};
  static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
                             6.680131188771972e+01,  -1.328068155288572e+01};
  static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
                             -2.549732539343734e+00, 4.374664141464968e+00,  2.938163982698783e+00};
  static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
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

}  // namespace kv
