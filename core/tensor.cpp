// Tensor views, guarded and canaried buffers, poisoning.
#include "core/tensor.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>

#include <tbb/parallel_for.h>

#include "core/error.hpp"
#include "core/par.hpp"

namespace kv {

namespace {
/// a * b + c, or UsageError when it leaves [0, kMaxElements]: a count that wraps would
/// describe a smaller tensor than the shape names (2^64 elements becomes 0, a vacuous pass).
int64_t checked_mad(int64_t a, int64_t b, int64_t c) {
  int64_t r;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || __builtin_add_overflow(r, c, &r) || r > kMaxElements)
    throw UsageError("tensor size overflows: more than 2^" + std::to_string(std::countr_zero(uint64_t(kMaxElements))) +
                     " elements");
  return r;
}
}  // namespace

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n = checked_mad(n, d, 0);
  return n;
}

void check_shape_size(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n = d == 0 ? n : checked_mad(n, d, 0);
}

int64_t TensorDesc::numel() const { return kv::numel(shape); }

std::vector<int64_t> TensorDesc::effective_strides() const {
  if (!strides.empty()) return strides;
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

bool TensorDesc::contiguous() const {
  if (strides.empty()) return true;
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s == strides;
}

int64_t TensorDesc::storage_elems() const {
  if (numel() == 0) return offset;
  int64_t far = 0;
  auto st = effective_strides();
  for (size_t i = 0; i < shape.size(); ++i) far = checked_mad(shape[i] - 1, st[i], far);
  return checked_mad(1, offset, far + 1);
}

int64_t TensorDesc::storage_bytes() const {
  return checked_mad(storage_elems(), static_cast<int64_t>(dtype_size(dtype)), 0);
}

namespace {

/// f on [0, n) in parallel slices of 4 MiB: a fresh payload's pages are first touched by
/// many threads.
template <class F>
void in_slices(size_t n, F f) {
  const size_t slice = size_t(1) << 22;
  par_for(size_t(0), (n + slice - 1) / slice, [&](size_t s) { f(s * slice, std::min(slice, n - s * slice)); });
}

}  // namespace

Buffer::Buffer(size_t payload_bytes) : block_(payload_bytes, kMinCanaryBytes) {
  // The payload is left as it comes (the harness poisons or writes all of it); only the
  // canaries are set.
  std::memset(block_.lead(), kCanary, block_.lead_bytes());
}

void Buffer::copy_from(const Buffer& other) {
  if (other.payload_bytes() != payload_bytes()) throw HarnessError("Buffer::copy_from: sizes differ");
  uint8_t* d = payload();
  const uint8_t* s = other.payload();
  in_slices(payload_bytes(), [&](size_t at, size_t n) { std::memcpy(d + at, s + at, n); });
}

void Buffer::poison(DType d) {
  // Every poison pattern is all ones, whatever the dtype.
  static_assert(kCanary != 0xFF);
  (void)d;
  uint8_t* p = payload();
  in_slices(payload_bytes(), [&](size_t at, size_t n) { std::memset(p + at, 0xFF, n); });
}

std::optional<std::string> Buffer::canary_damage() const {
  // Past the end there is nothing to look at: the guard page faulted at the first byte.
  const uint8_t* start = payload();
  const size_t lead = block_.lead_bytes();
  // Up to 4 KiB per buffer, every case: whole words first, bytes only to locate damage.
  const uint8_t* lo = start - lead;
  uint64_t pattern, diff = 0;
  std::memset(&pattern, kCanary, sizeof pattern);
  size_t k = 0;
  for (; k + 8 <= lead; k += 8) {
    uint64_t w;
    std::memcpy(&w, lo + k, 8);
    diff |= w ^ pattern;
  }
  for (; k < lead; ++k) diff |= lo[k] ^ kCanary;
  if (diff != 0)
    for (size_t i = 1; i <= lead; ++i)
      if (start[-static_cast<std::ptrdiff_t>(i)] != kCanary)
        return "write " + std::to_string(i) + " byte(s) before the start of the buffer";
  if (!noted_.empty()) return noted_;
  return std::nullopt;
}

int64_t TensorView::strided_index(int64_t logical) const {
  int64_t idx = desc.offset;
  for (size_t i = desc.shape.size(); i-- > 0;) {
    int64_t d = desc.shape[i];
    idx += (logical % d) * desc.strides[i];
    logical /= d;
  }
  return idx;
}

void TensorView::read(int64_t start, int64_t n, double* out) const {
  if (desc.strides.empty() && (desc.dtype == DType::f32 || desc.dtype == DType::bf16)) {
    const uint8_t* p = base + (desc.offset + start) * static_cast<int64_t>(dtype_size(desc.dtype));
    for (int64_t i = 0; i < n; ++i) {
      uint32_t b;
      if (desc.dtype == DType::f32) {
        std::memcpy(&b, p + 4 * i, 4);
      } else {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        b = static_cast<uint32_t>(h) << 16;  // a bf16 is the top half of an fp32
      }
      float f;
      std::memcpy(&f, &b, 4);
      out[i] = f;  // NaN payloads do not matter: a NaN input gives NaN outputs either way
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = get(start + i);
}

void TensorView::set_bits(int64_t logical, uint32_t b) {
  uint8_t* p = base + storage_index(logical) * dtype_size(desc.dtype);
  if (dtype_size(desc.dtype) == 4) {
    std::memcpy(p, &b, 4);
  } else {
    uint16_t h = static_cast<uint16_t>(b);
    std::memcpy(p, &h, 2);
  }
}

const TensorSlot& TensorSet::at(const std::string& name) const {
  for (auto& s : slots)
    if (s.desc.name == name) return s;
  throw HarnessError("no tensor named '" + name + "'");
}

TensorSlot& TensorSet::at(const std::string& name) {
  for (auto& s : slots)
    if (s.desc.name == name) return s;
  throw HarnessError("no tensor named '" + name + "'");
}

}  // namespace kv
