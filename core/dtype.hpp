// Storage dtypes and exact round-to-nearest-even on the host, independent of the FPU
// rounding mode (every floating operation used here is exact).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "core/hd.hpp"

namespace kv {

/// i32: integer inputs only (targets, grids, positions); never an output that is judged.
enum class DType : uint8_t { f32, f16, bf16, i32 };

/// Binary format parameters: precision p (with the hidden bit), min normal exponent, max exponent.
struct Format {
  int p;
  int emin;
  int emax;
};

KV_HD inline Format format_of(DType d) {
  // i32 as a format whose quantum is 1 up to 2^31: round_to gives RNE to an integer.
  constexpr Format f[] = {{24, -126, 127}, {11, -14, 15}, {8, -126, 127}, {32, 31, 31}};
  return f[static_cast<int>(d)];
}
std::string_view dtype_name(DType d);
std::optional<DType> parse_dtype(std::string_view s);
inline size_t dtype_size(DType d) { return d == DType::f32 || d == DType::i32 ? 4 : 2; }
inline bool is_float(DType d) { return d != DType::i32; }

// Constants per dtype, in enum order (f32, f16, bf16); exact binary values.
/// Unit roundoff of round-to-nearest in d: 2^-p.
inline double unit_roundoff(DType d) {
  constexpr double v[] = {0x1p-24, 0x1p-11, 0x1p-8, 0.5};
  return v[static_cast<int>(d)];
}
KV_HD inline double max_finite(DType d) {
  constexpr double v[] = {0x1.fffffep127, 0x1.ffcp15, 0x1.fep127, 2147483647.0};
  return v[static_cast<int>(d)];
}
/// Smallest positive normal and subnormal numbers of d.
KV_HD inline double min_normal(DType d) {
  constexpr double v[] = {0x1p-126, 0x1p-14, 0x1p-126, 1.0};
  return v[static_cast<int>(d)];
}
inline double min_subnormal(DType d) {
  constexpr double v[] = {0x1p-149, 0x1p-24, 0x1p-133, 1.0};
  return v[static_cast<int>(d)];
}
/// Spacing of d's numbers at |x| (for |x| below the normal range: the subnormal spacing).
inline double ulp(DType d, double x) {
  uint64_t b;
  std::memcpy(&b, &x, 8);
  const int biased = static_cast<int>((b >> 52) & 0x7FF);
  if (biased == 0x7FF) return __builtin_inf();
  const Format f = format_of(d);
  const int e = biased == 0 ? f.emin : biased - 1023;
  const int q = (e < f.emin ? f.emin : e) - (f.p - 1);
  const uint64_t pb = static_cast<uint64_t>(q + 1023) << 52;
  double r;
  std::memcpy(&r, &pb, 8);
  return r;
}

/// Exact RNE of the unevaluated sum hi + lo (|lo| <= ulp(hi)/2, as double-double values
/// are), by integer operations on the significand: exact, so independent of the FPU
/// rounding mode. lo only matters when hi is exactly halfway between two format numbers:
/// elsewhere |lo| (at most half a double ulp of hi) is far below half a format quantum,
/// since the formats have at most 24 bits and doubles 53. Overflow gives ±inf; NaN,
/// ±inf and ±0 are kept. Inline: it is on the hot path of every enclosure element.
[[gnu::always_inline]] KV_HD inline double round_to(DType d, double hi, double lo) {
  if (hi == 0.0 && lo != 0.0) hi = lo, lo = 0.0;  // (never the case for double-doubles)
  uint64_t b;
  std::memcpy(&b, &hi, 8);
  const int biased = static_cast<int>((b >> 52) & 0x7FF);
  if (biased == 0x7FF) return hi;  // NaN, inf
  const bool neg = (b >> 63) != 0;
  if (biased == 0) {
    // ±0, or a double subnormal: below 2^-1022, far below half the smallest subnormal
    // of every format, so a signed zero.
    return neg ? -0.0 : 0.0;
  }
  const Format f = format_of(d);
  const uint64_t m = (b & ((uint64_t(1) << 52) - 1)) | (uint64_t(1) << 52);  // hi = m 2^(e-52)
  const int e = biased - 1023;
  const int q = (e < f.emin ? f.emin : e) - (f.p - 1);  // quantum exponent of the format
  const int shift = q - (e - 52);                         // significand bits dropped, >= 29
  uint64_t keep = 0;
  bool up = false;
  if (shift <= 54) {
    keep = m >> shift;
    const uint64_t rem = m & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
    if (rem > half) up = true;
    else if (rem < half) up = false;
    else if (lo != 0.0) up = (lo > 0) != neg;  // a tie in hi: lo breaks it
    else up = (keep & 1) != 0;                 // a true tie: to even
  }
  keep += up ? 1 : 0;
  const uint64_t pb = static_cast<uint64_t>(q + 1023) << 52;  // 2^q, built from its bits
  double pow2q;
  std::memcpy(&pow2q, &pb, 8);
  double r = static_cast<double>(keep) * pow2q;  // exact: keep <= 2^p
  if (r > max_finite(d)) r = std::numeric_limits<double>::infinity();
  return neg ? -r : r;
}
/// Exact RNE of x to d.
[[gnu::always_inline]] KV_HD inline double round_to(DType d, double x) { return round_to(d, x, 0.0); }
/// x rounded toward zero to d (planted faults and mutants: truncation where RNE is due).
inline double round_toward_zero(DType d, double x) {
  const double r = round_to(d, x);
  if (std::isinf(r) && std::isfinite(x)) return std::copysign(max_finite(d), x);
  return std::isfinite(r) && std::fabs(r) > std::fabs(x) ? r - std::copysign(ulp(d, x), x) : r;
}

/// Bits of a value representable in d (NaN becomes d's canonical quiet NaN).
uint32_t encode(DType d, double representable);
double decode(DType d, uint32_t bits);
/// d's canonical quiet NaN (what encode writes for NaN; the GPU input generator too).
KV_HD inline uint32_t canonical_nan_bits(DType d) {
  switch (d) {
    case DType::f32: return 0x7FC00000u;
    case DType::f16: return 0x7E00u;
    case DType::bf16: return 0x7FC0u;
    case DType::i32: return 0;
  }
  return 0;
}
/// Bits written over outputs before a run: a negative NaN with a full payload, which
/// arithmetic never produces, so an element still holding it was not written.
inline uint32_t poison_bits(DType d) { return dtype_size(d) == 4 ? 0xFFFFFFFFu : 0xFFFFu; }
bool is_nan_bits(DType d, uint32_t bits);

}  // namespace kv
