// Exact rounding between double and the storage formats. All arithmetic here is exact
// (power-of-two scaling, integer parts of small doubles), so the result does not depend
// on the FPU rounding mode: the harness may run impls under fesetround(FE_UPWARD).
#include "core/dtype.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace kv {


std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "fp32";
    case DType::f16: return "fp16";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "fp32" || s == "f32" || s == "float32") return DType::f32;
  if (s == "fp16" || s == "f16" || s == "float16") return DType::f16;
  if (s == "bf16" || s == "bfloat16") return DType::bf16;
  if (s == "i32" || s == "int32") return DType::i32;
  return std::nullopt;
}








bool is_nan_bits(DType d, uint32_t b) {
  switch (d) {
    case DType::f32: return (b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu) != 0;
    case DType::f16: return (b & 0x7C00u) == 0x7C00u && (b & 0x03FFu) != 0;
    case DType::bf16: return (b & 0x7F80u) == 0x7F80u && (b & 0x007Fu) != 0;
    case DType::i32: return false;
  }
  return false;
}

namespace {
uint32_t float_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}
float bits_float(uint32_t b) {
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}
}  // namespace

uint32_t encode(DType d, double v) {
  if (std::isnan(v)) return canonical_nan_bits(d);
  switch (d) {
    case DType::f32: return float_bits(static_cast<float>(v));  // exact: v representable
    case DType::bf16: return float_bits(static_cast<float>(v)) >> 16;
    case DType::i32: return static_cast<uint32_t>(static_cast<int32_t>(v));  // v an integer in range
    case DType::f16: {
      uint32_t sign = std::signbit(v) ? 0x8000u : 0u;
      double a = std::fabs(v);
      if (std::isinf(a)) return sign | 0x7C00u;
      if (a == 0.0) return sign;
      int e = 0;
      std::frexp(a, &e);
      int E = e - 1;
      if (E < -14) return sign | static_cast<uint32_t>(std::ldexp(a, 24));  // subnormal
      uint32_t mant = static_cast<uint32_t>(std::ldexp(a, 10 - E)) - 1024u;
      return sign | (static_cast<uint32_t>(E + 15) << 10) | mant;
    }
  }
  return 0;
}

double decode(DType d, uint32_t b) {
  switch (d) {
    case DType::f32: return bits_float(b);
    case DType::bf16: return bits_float((b & 0xFFFFu) << 16);
    case DType::i32: return static_cast<double>(static_cast<int32_t>(b));
    case DType::f16: {
      double sign = (b & 0x8000u) ? -1.0 : 1.0;
      uint32_t e = (b >> 10) & 0x1Fu, m = b & 0x3FFu;
      if (e == 0x1F) return m ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
      if (e == 0) return sign * std::ldexp(static_cast<double>(m), -24);
      return sign * std::ldexp(static_cast<double>(m + 1024u), static_cast<int>(e) - 25);
    }
  }
  return 0;
}

}  // namespace kv
