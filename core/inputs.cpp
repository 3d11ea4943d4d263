// Input distributions (libm-free, so the same bits come out on every machine).
#include "core/inputs.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"

namespace kv {

const std::vector<std::string>& known_dists() {
  static const std::vector<std::string> d = {"normal",   "uniform",    "tiny",       "large",    "mean_shift",
                                             "wide",     "big_mean",   "zeros",      "const_rows", "subnormal",
                                             "near_overflow", "nan_inject", "inf_inject"};
  return d;
}

void unravel(int64_t linear, const std::vector<int64_t>& shape, std::vector<int64_t>& coords) {
  coords.resize(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    coords[i] = linear % shape[i];
    linear /= shape[i];
  }
}

double draw(const std::string& dist, uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords) {
  auto w = philox4x32_10(philox_key(seed, tensor), coord_counter(coords));
  double u = uniform_open01(w[0], w[1]);
  if (dist == "uniform") return 2.0 * u - 1.0;
  double z = normal_from_uniform(u);
  if (dist == "normal") return z;
  if (dist == "tiny") return z * 0x1p-10;
  if (dist == "large") return z * 0x1p6;
  if (dist == "mean_shift") return 4.0 + z;
  if (dist == "big_mean") return 256.0 + z * 0.125;  // a large mean over a small spread
  if (dist == "wide") return std::ldexp(z, static_cast<int>(w[2] % 25u) - 12);  // exact scaling
  if (dist == "zeros") return 0.0;
  throw UsageError("unknown value distribution '" + dist + "'");
}

double draw_value(const std::string& dist, DType dt, uint64_t seed, const std::string& tensor,
                  std::vector<int64_t>& coords, double shift, double scale) {
  if (dist == "subnormal") return min_normal(dt) * draw("uniform", seed, tensor, coords);
  if (dist == "near_overflow" || dist == "nan_inject" || dist == "inf_inject") {
    auto w = philox4x32_10(philox_key(seed, tensor), coord_counter(coords));
    if (dist == "near_overflow") {
      // Within a factor 16 of the dtype's largest finite value, either sign (exact scaling).
      const double u = uniform_open01(w[0], w[1]);
      const double m = std::ldexp(max_finite(dt) * (0.5 + 0.5 * u), -static_cast<int>(w[2] % 4u));
      return (w[3] & 1u) ? -m : m;
    }
    // In about one row in three (rows: every coordinate but the last), about one element
    // in 61 is special (NaN, or +inf / -inf); the rest are normal. Clean rows stay beside.
    std::vector<int64_t> row = coords;
    if (!row.empty()) row.back() = 0;
    const bool spiky = philox4x32_10(philox_key(seed, tensor + "/row"), coord_counter(row))[3] % 3u == 0;
    if (spiky && w[3] % 61u == 0) {
      if (dist == "nan_inject") return std::numeric_limits<double>::quiet_NaN();
      return (w[2] & 1u) ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
    }
    return shift + scale * draw("normal", seed, tensor, coords);
  }
  if (dist == "const_rows") {
    if (!coords.empty()) coords.back() = 0;  // one value per row
    return shift + scale * draw("normal", seed, tensor, coords);
  }
  return shift + scale * draw(dist, seed, tensor, coords);
}

void fill_tensor(TensorView& v, const std::string& dist, uint64_t seed, double shift, double scale) {
  const int64_t n = v.desc.numel(), block = 4096;
  if (std::find(known_dists().begin(), known_dists().end(), dist) == known_dists().end())
    throw UsageError("unknown value distribution '" + dist + "'");
  // Each element depends on its coordinates only, so blocks fill in parallel.
  tbb::parallel_for(int64_t(0), (n + block - 1) / block, [&](int64_t b) {
    std::vector<int64_t> coords;
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
      unravel(i, v.desc.shape, coords);
      v.store(i, draw_value(dist, v.desc.dtype, seed, v.desc.name, coords, shift, scale));
    }
  });
}

int64_t draw_int(uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords, int64_t lo, int64_t hi) {
  auto w = philox4x32_10(philox_key(seed, tensor), coord_counter(coords));
  const uint64_t span = static_cast<uint64_t>(hi - lo);
  const uint64_t r = (static_cast<uint64_t>(w[0]) << 32) | w[1];
  return lo + static_cast<int64_t>(span == 0 ? 0 : r % span);
}

}  // namespace kv
