// Philox comes from Random123 (Debian's librandom123-dev); the uniform-to-normal step
// is our own so that it uses IEEE + - * / only. The arithmetic is core/draw.hpp's, shared
// with the GPU generator.
#include "core/rng.hpp"

#include <xxhash.h>

#include "core/draw.hpp"

namespace kv {

PhiloxKey philox_key(uint64_t seed, std::string_view tensor) {
  uint64_t h = XXH64(tensor.data(), tensor.size(), seed);
  return {static_cast<uint32_t>(h), static_cast<uint32_t>(h >> 32)};
}

std::array<uint32_t, 4> coord_counter(std::span<const int64_t> coords) {
  std::array<uint32_t, 4> c{};
  gen::coord_counter(coords.data(), static_cast<int>(coords.size()), c.data());
  return c;
}

std::array<uint32_t, 4> philox4x32_10(PhiloxKey key, std::array<uint32_t, 4> ctr) {
  std::array<uint32_t, 4> r{};
  gen::philox(key.k0, key.k1, ctr.data(), r.data());
  return r;
}

double uniform_open01(uint32_t hi, uint32_t lo) { return gen::uniform_open01(hi, lo); }
double det_sqrt(double a) { return gen::det_sqrt(a); }
double det_log(double u) { return gen::det_log(u); }
double normal_from_uniform(double p) { return gen::normal_from_uniform(p); }

}  // namespace kv
