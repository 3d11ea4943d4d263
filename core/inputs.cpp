// Input distributions (libm-free, so the same bits come out on every machine).
#include "core/inputs.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <span>
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

namespace {

using Dist = ValueDist;

Dist parse_dist(const std::string& dist) {
  static const std::vector<std::pair<std::string, Dist>> names = {
      {"normal", Dist::normal},         {"uniform", Dist::uniform},       {"tiny", Dist::tiny},
      {"large", Dist::large},           {"mean_shift", Dist::mean_shift}, {"wide", Dist::wide},
      {"big_mean", Dist::big_mean},     {"zeros", Dist::zeros},           {"const_rows", Dist::const_rows},
      {"subnormal", Dist::subnormal},   {"near_overflow", Dist::near_overflow},
      {"nan_inject", Dist::nan_inject}, {"inf_inject", Dist::inf_inject}};
  for (auto& [n, d] : names)
    if (n == dist) return d;
  throw UsageError("unknown value distribution '" + dist + "'");
}

/// The base sample of the distributions that are a shift and scale of one draw.
double base_sample(Dist d, PhiloxKey key, std::span<const int64_t> coords) {
  auto w = philox4x32_10(key, coord_counter(coords));
  double u = uniform_open01(w[0], w[1]);
  if (d == Dist::uniform) return 2.0 * u - 1.0;
  double z = normal_from_uniform(u);
  switch (d) {
    case Dist::tiny: return z * 0x1p-10;
    case Dist::large: return z * 0x1p6;
    case Dist::mean_shift: return 4.0 + z;
    case Dist::big_mean: return 256.0 + z * 0.125;  // a large mean over a small spread
    case Dist::wide: return std::ldexp(z, static_cast<int>(w[2] % 25u) - 12);  // exact scaling
    case Dist::zeros: return 0.0;
    default: return z;  // normal
  }
}

}  // namespace

ValueDrawer::ValueDrawer(const std::string& dist, DType dt, uint64_t seed, const std::string& tensor, double shift,
                         double scale)
    : d_(parse_dist(dist)), dt_(dt), key_(philox_key(seed, tensor)), row_key_(philox_key(seed, tensor + "/row")),
      shift_(shift), scale_(scale) {}

double ValueDrawer::value(const std::vector<int64_t>& coords, std::vector<int64_t>& scratch) const {
  switch (d_) {
    case Dist::subnormal: return min_normal(dt_) * base_sample(Dist::uniform, key_, coords);
    case Dist::const_rows: {
      scratch = coords;
      if (!scratch.empty()) scratch.back() = 0;  // one value per row
      return shift_ + scale_ * base_sample(Dist::normal, key_, scratch);
    }
    case Dist::near_overflow: {
      // Within a factor 16 of the dtype's largest finite value, either sign (exact scaling).
      auto w = philox4x32_10(key_, coord_counter(coords));
      const double u = uniform_open01(w[0], w[1]);
      const double m = std::ldexp(max_finite(dt_) * (0.5 + 0.5 * u), -static_cast<int>(w[2] % 4u));
      return (w[3] & 1u) ? -m : m;
    }
    case Dist::nan_inject:
    case Dist::inf_inject: {
      // In about one row in three (rows: every coordinate but the last), about one element
      // in 61 is special (NaN, or +inf / -inf); the rest are normal. Clean rows stay beside.
      auto w = philox4x32_10(key_, coord_counter(coords));
      scratch = coords;
      if (!scratch.empty()) scratch.back() = 0;
      const bool spiky = philox4x32_10(row_key_, coord_counter(scratch))[3] % 3u == 0;
      if (spiky && w[3] % 61u == 0) {
        if (d_ == Dist::nan_inject) return std::numeric_limits<double>::quiet_NaN();
        return (w[2] & 1u) ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity();
      }
      return shift_ + scale_ * base_sample(Dist::normal, key_, coords);
    }
    default: return shift_ + scale_ * base_sample(d_, key_, coords);
  }
}

double draw(const std::string& dist, uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords) {
  const Dist d = parse_dist(dist);
  if (d == Dist::const_rows || d == Dist::subnormal || d == Dist::near_overflow || d == Dist::nan_inject ||
      d == Dist::inf_inject)
    throw UsageError("value distribution '" + dist + "' has no base sample (ValueDrawer draws it)");
  return base_sample(d, philox_key(seed, tensor), coords);
}

void fill_tensor(TensorView& v, const std::string& dist, uint64_t seed, double shift, double scale) {
  const int64_t n = v.desc.numel(), block = 4096;
  const ValueDrawer dr(dist, v.desc.dtype, seed, v.desc.name, shift, scale);
  const std::vector<int64_t>& shape = v.desc.shape;
  // Each element depends on its coordinates only, so blocks fill in parallel; within a
  // block the coordinates advance like an odometer.
  tbb::parallel_for(int64_t(0), (n + block - 1) / block, [&](int64_t b) {
    std::vector<int64_t> coords, scratch;
    const int64_t lo = b * block, hi = std::min(n, (b + 1) * block);
    unravel(lo, shape, coords);
    for (int64_t i = lo; i < hi; ++i) {
      v.store(i, dr.value(coords, scratch));
      for (size_t k = coords.size(); k-- > 0;) {
        if (++coords[k] < shape[k]) break;
        coords[k] = 0;
      }
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
