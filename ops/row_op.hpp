// Helpers for ops over rows of the last dimension, shape (..., N).
#pragma once
#include "ops/op_base.hpp"

namespace kv {

inline int64_t last_dim(const Case& c) { return c.shape.empty() || c.shape.back() == 0 ? 1 : c.shape.back(); }
inline int64_t row_count(const Case& c) { return numel(c.shape) / last_dim(c); }
/// Shape of per-row statistics: the leading dimensions ({1} for a 1-D shape).
inline std::vector<int64_t> rows_shape(const Case& c) {
  std::vector<int64_t> s(c.shape.begin(), c.shape.end() - 1);
  if (s.empty()) s = {1};
  return s;
}

}  // namespace kv
