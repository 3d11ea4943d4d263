// Storage dtypes and exact round-to-nearest-even on the host, independent of the FPU
// rounding mode (every floating operation used here is exact).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kv {

enum class DType : uint8_t { f32, f16, bf16 };

/// Binary format parameters: precision p (with the hidden bit), min normal exponent, max exponent.
struct Format {
  int p;
  int emin;
  int emax;
};

Format format_of(DType d);
std::string_view dtype_name(DType d);
std::optional<DType> parse_dtype(std::string_view s);
size_t dtype_size(DType d);

/// Unit roundoff of round-to-nearest in d: 2^-p.
double unit_roundoff(DType d);
double max_finite(DType d);
/// Smallest positive normal and subnormal numbers of d.
double min_normal(DType d);
double min_subnormal(DType d);
/// Spacing of d's numbers at |x| (for |x| below the normal range: the subnormal spacing).
double ulp(DType d, double x);

/// Exact RNE of x to d (overflow to ±inf; NaN, ±inf and ±0 kept).
double round_to(DType d, double x);
/// Exact RNE of the unevaluated sum hi + lo (|lo| <= ulp(hi)/2, as double-double values are).
double round_to(DType d, double hi, double lo);

/// Bits of a value representable in d (NaN becomes d's canonical quiet NaN).
uint32_t encode(DType d, double representable);
double decode(DType d, uint32_t bits);
uint32_t canonical_nan_bits(DType d);
/// Bits written over outputs before a run: a negative NaN with a full payload, which
/// arithmetic never produces, so an element still holding it was not written.
uint32_t poison_bits(DType d);
bool is_nan_bits(DType d, uint32_t bits);

}  // namespace kv
