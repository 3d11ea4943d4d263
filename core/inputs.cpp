// Input distributions (libm-free, so the same bits come out on every machine).
#include "core/inputs.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>
#include <span>
#include <cmath>
#include <limits>

#include "core/draw.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/rng.hpp"
#include "core/par.hpp"

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

}  // namespace

ValueDrawer::ValueDrawer(const std::string& dist, DType dt, uint64_t seed, const std::string& tensor, double shift,
                         double scale) {
  const PhiloxKey key = philox_key(seed, tensor), row = philox_key(seed, tensor + "/row");
  spec_ = {parse_dist(dist), dt, key.k0, key.k1, row.k0, row.k1, shift, scale};
}

double ValueDrawer::value(const std::vector<int64_t>& coords, std::vector<int64_t>& scratch) const {
  scratch = coords;
  return gen::value(spec_, scratch.data(), static_cast<int>(scratch.size()));
}

double draw(const std::string& dist, uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords) {
  const Dist d = parse_dist(dist);
  if (d == Dist::const_rows || d == Dist::subnormal || d == Dist::near_overflow || d == Dist::nan_inject ||
      d == Dist::inf_inject)
    throw UsageError("value distribution '" + dist + "' has no base sample (ValueDrawer draws it)");
  const PhiloxKey k = philox_key(seed, tensor);
  return gen::base_sample(d, k.k0, k.k1, coords.data(), static_cast<int>(coords.size()));
}

namespace {
std::atomic<GpuFiller> g_filler{nullptr};
std::atomic<bool> g_gpu_fill{false};
}  // namespace

void set_gpu_filler(GpuFiller f) { g_filler = f; }

void allow_gpu_fill(bool on) {
  const char* env = std::getenv("KV_INPUTS");
  g_gpu_fill = on && !(env && std::string_view(env) == "host");
}

void fill_tensor(TensorView& v, const std::string& dist, uint64_t seed, double shift, double scale) {
  const int64_t n = v.desc.numel(), block = 4096;
  const ValueDrawer dr(dist, v.desc.dtype, seed, v.desc.name, shift, scale);
  const std::vector<int64_t>& shape = v.desc.shape;
  const GpuFiller gpu = g_filler;
  if (gpu && g_gpu_fill && n >= kGpuFillMin && v.desc.strides.empty() && v.desc.dtype != DType::i32 &&
      gpu(dr.spec(), shape, v.base + v.desc.offset * static_cast<int64_t>(dtype_size(v.desc.dtype))))
    return;
  // Each element depends on its coordinates only, so blocks fill in parallel; within a
  // block the coordinates advance like an odometer.
  par_for(int64_t(0), (n + block - 1) / block, [&](int64_t b) {
    std::vector<int64_t> coords;
    const int64_t lo = b * block, hi = std::min(n, (b + 1) * block);
    unravel(lo, shape, coords);
    const int rank = static_cast<int>(coords.size());
    for (int64_t i = lo; i < hi; ++i) {
      v.store(i, gen::value(dr.spec(), coords.data(), rank));
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
