// Value distributions for generated inputs, drawn from Philox by logical coordinates.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace kv {

/// normal N(0,1); uniform U(-1,1); tiny N(0,1)*2^-10 (RMS near sqrt(eps)); large N(0,1)*2^6;
/// mean_shift N(4,1); wide N(0,1)*2^k with k uniform in [-12, 12];
/// big_mean 256 + N(0,1)/8 (a large mean over a small spread); zeros (all elements equal to
/// the op's shift, 0 for the main inputs); const_rows (N(0,1) drawn once per row: every
/// element of a row equal); subnormal (U(-1,1) times the dtype's smallest normal: mostly
/// subnormal values, ignoring shift and scale).
const std::vector<std::string>& known_dists();

/// Draws a base sample for `dist` at one element; value = shift + scale * sample.
double draw(const std::string& dist, uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords);

/// The value fill_tensor stores (before rounding to dt) at these coordinates (which
/// const_rows rewrites): shift + scale * draw(...) for most distributions.
double draw_value(const std::string& dist, DType dt, uint64_t seed, const std::string& tensor,
                  std::vector<int64_t>& coords, double shift, double scale);

/// A uniform integer in [lo, hi) at one element (lo when the range is empty).
int64_t draw_int(uint64_t seed, const std::string& tensor, const std::vector<int64_t>& coords, int64_t lo, int64_t hi);

/// Fills every logical element of `v` with RNE(shift + scale * draw(dist, ...)) (subnormal
/// and const_rows as above).
void fill_tensor(TensorView& v, const std::string& dist, uint64_t seed, double shift, double scale);

/// Logical row-major coordinates of a linear index.
void unravel(int64_t linear, const std::vector<int64_t>& shape, std::vector<int64_t>& coords);

}  // namespace kv
