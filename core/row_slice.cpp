// Cutting a case along its first dimension (core/row_slice.hpp).
#include "core/row_slice.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdlib>

#include "core/error.hpp"
#include "core/par.hpp"

namespace kv {

double row_block_bytes() {
  if (const char* s = std::getenv("KV_STREAM_BLOCK_BYTES"); s && *s) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (*end || !(v > 0)) throw UsageError(std::string("KV_STREAM_BLOCK_BYTES must be a positive byte count, not '") + s + "'");
    return v;
  }
  return 256.0 * 1024 * 1024;
}

int64_t rows_per_block(double per_index, double shared, double budget, int64_t extent) {
  const double rows = (budget - shared) / std::max(per_index, 1.0);
  return std::clamp<int64_t>(rows >= static_cast<double>(extent) ? extent : static_cast<int64_t>(rows), 1, std::max<int64_t>(extent, 1));
}

namespace {

/// The sub-case with `len` dim-0 indices and the op's tensor specs for it, each cut tensor
/// checked against the whole one: the same shape but `len` along its dim.
std::pair<Case, std::vector<TensorSpec>> sub_case(const OpBinding& op, const Case& c, const TensorSet& ts,
                                                  const std::map<std::string, int>& dims, int64_t len) {
  Case s = c;
  s.shape.at(0) = len;
  s.layout.clear();
  s.alias.clear();
  std::vector<TensorSpec> specs = op.tensors(s);
  for (auto& t : specs) {
    const TensorDesc& whole = ts.at(t.name).desc;
    std::vector<int64_t> want = whole.shape;
    auto it = dims.find(t.name);
    if (it != dims.end()) {
      const int d = it->second;
      if (d < 0 || d >= static_cast<int>(want.size()) || want[static_cast<size_t>(d)] != c.shape[0])
        throw HarnessError(op.name() + ": tensor " + t.name + " does not run along the case's first dimension at dim " +
                           std::to_string(d));
      want[static_cast<size_t>(d)] = len;
    }
    if (t.shape != want)
      throw HarnessError(op.name() + ": tensor " + t.name + " of a slice of " + std::to_string(len) + " has shape " +
                         shape_str(t.shape) + ", the cut gives " + shape_str(want));
  }
  return {std::move(s), std::move(specs)};
}

}  // namespace

CaseSlice slice_rows(const OpBinding& op, const Case& c, const TensorSet& ts, const std::map<std::string, int>& dims,
                     int64_t b, int64_t e) {
  auto [sc, specs] = sub_case(op, c, ts, dims, e - b);
  CaseSlice out{std::move(sc), {}};
  for (auto& t : specs) {
    TensorSlot s = ts.at(t.name);
    if (auto it = dims.find(t.name); it != dims.end()) {
      const int d = it->second;
      const std::vector<int64_t> st = s.desc.effective_strides();
      s.desc.offset += b * st[static_cast<size_t>(d)];
      // A contiguous tensor cut along dim 0 stays contiguous (the same code paths as the whole).
      if (!(s.desc.strides.empty() && d == 0)) s.desc.strides = st;
      s.desc.shape = t.shape;
    }
    out.ts.slots.push_back(std::move(s));
  }
  return out;
}

CaseSlice gather_rows(const OpBinding& op, const Case& c, const TensorSet& ts, const std::map<std::string, int>& dims,
                      const std::vector<int64_t>& idx) {
  const int64_t g = static_cast<int64_t>(idx.size());
  auto [gc, specs] = sub_case(op, c, ts, dims, g);
  CaseSlice out{std::move(gc), {}};
  for (auto& t : specs) {
    const TensorSlot& whole = ts.at(t.name);
    auto it = dims.find(t.name);
    if (it == dims.end()) {
      out.ts.slots.push_back(whole);
      continue;
    }
    // Elements as (outer, index along d, inner): the gathered tensor's index k along d is
    // the whole's idx[k].
    const size_t d = static_cast<size_t>(it->second);
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < d; ++i) outer *= t.shape[i];
    for (size_t i = d + 1; i < t.shape.size(); ++i) inner *= t.shape[i];
    TensorSlot s;
    s.desc = TensorDesc{t.name, whole.desc.dtype, t.shape, {}, 0};
    s.role = whole.role;
    s.buffer = std::make_shared<Buffer>(static_cast<size_t>(numel(t.shape)) * dtype_size(s.desc.dtype));
    s.buffer->set_label(t.name + " (rows gathered)");
    out.ts.slots.push_back(s);
    if (s.role == Role::output) continue;  // evaluated, never read
    const TensorView src = whole.view();
    TensorView dst = s.view();
    const int64_t extent = c.shape[0];
    par_for(int64_t(0), outer * g, [&](int64_t ok) {
      const int64_t o = ok / g, k = ok % g;
      const int64_t from = (o * extent + idx[static_cast<size_t>(k)]) * inner, to = (o * g + k) * inner;
      for (int64_t j = 0; j < inner; ++j) dst.set_bits(to + j, src.bits(from + j));
    });
  }
  return out;
}

}  // namespace kv
