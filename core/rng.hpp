// Counter-based inputs: Philox4x32-10 keyed by (seed, tensor name), the counter taken
// from the element's logical coordinates, so a shrunk shape keeps its prefix's values.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace kv {

/// Bumped whenever any input bit could change for the same case string.
inline constexpr int kGeneratorVersion = 1;

struct PhiloxKey {
  uint32_t k0, k1;
};

PhiloxKey philox_key(uint64_t seed, std::string_view tensor);
/// Counter words from logical coordinates, innermost first; dims past the third are folded.
std::array<uint32_t, 4> coord_counter(std::span<const int64_t> coords);
std::array<uint32_t, 4> philox4x32_10(PhiloxKey key, std::array<uint32_t, 4> ctr);

/// Uniform in (0, 1) with 52 random bits from two words (plus half a step); never 0 or 1.
double uniform_open01(uint32_t hi, uint32_t lo);
/// Standard normal by inverse CDF using only + - * / (own log and sqrt), so the same
/// bits come out on every machine.
double normal_from_uniform(double u);

/// libm-free natural log of u > 0 and square root of a >= 0 (deterministic, ~1 ulp).
double det_log(double u);
double det_sqrt(double a);

}  // namespace kv
