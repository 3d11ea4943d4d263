// The .safetensors format (an 8-byte little-endian header length, a JSON header naming
// each tensor's dtype, shape and byte range, then the raw bytes): how tensors travel to
// and from out-of-process workers, and how reproducer bundles store them.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace kv {

/// One tensor as stored: contiguous row-major little-endian bytes.
struct StoredTensor {
  DType dtype = DType::f32;
  bool f64 = false;  // float64 elements (reference values in reproducer bundles); dtype unused
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

/// The view's elements in logical order (strided views are gathered).
StoredTensor gather(const TensorView& v);
/// Writes t's elements into the view in logical order; t must match its dtype and shape.
void scatter(const StoredTensor& t, const TensorView& v);

/// Writes the tensors (in map order) with optional string metadata; throws std::runtime_error.
void write_safetensors(const std::string& path, const std::map<std::string, StoredTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});
/// Reads every tensor; a malformed file throws std::runtime_error naming the path and the defect.
std::map<std::string, StoredTensor> read_safetensors(const std::string& path);

/// Reference-precision values as an F64 tensor.
StoredTensor f64_tensor(const std::vector<int64_t>& shape, const double* v, size_t n);

/// The format's dtype names (F32, F16, BF16, I32).
const char* safetensors_dtype(DType d);

}  // namespace kv
