// Tensor views, canaried buffers and poisoning.
#include "core/tensor.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include <tbb/parallel_for.h>

#include "core/error.hpp"

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

/// Released buffer storage, reused by the next Buffer of a size it can hold: large
/// tensors then cost no fresh page faults from case to case.
struct Pool {
  std::mutex mu;
  std::vector<ByteBuf> free;
  size_t bytes = 0;
  static constexpr size_t kMaxBytes = size_t(24) << 30;
};
Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: buffers may be released at exit
  return *p;
}

ByteBuf take(size_t n) {
  Pool& p = pool();
  std::lock_guard<std::mutex> g(p.mu);
  size_t best = p.free.size();
  for (size_t i = 0; i < p.free.size(); ++i)
    if (p.free[i].capacity() >= n && (best == p.free.size() || p.free[i].capacity() < p.free[best].capacity())) best = i;
  if (best == p.free.size()) return {};
  ByteBuf v = std::move(p.free[best]);
  p.free.erase(p.free.begin() + static_cast<std::ptrdiff_t>(best));
  p.bytes -= v.capacity();
  return v;
}

void give(ByteBuf&& v) {
  Pool& p = pool();
  std::lock_guard<std::mutex> g(p.mu);
  if (v.capacity() < (1u << 20) || p.bytes + v.capacity() > Pool::kMaxBytes) return;
  p.bytes += v.capacity();
  p.free.push_back(std::move(v));
}

}  // namespace

Buffer::Buffer(size_t payload_bytes) : bytes_(take(payload_bytes + 2 * kCanaryBytes)) {
  // The payload is left as it comes (the harness poisons or writes all of it); only the
  // canaries are set.
  bytes_.resize(payload_bytes + 2 * kCanaryBytes);
  std::memset(bytes_.data(), kCanary, kCanaryBytes);
  std::memset(bytes_.data() + bytes_.size() - kCanaryBytes, kCanary, kCanaryBytes);
}

Buffer::~Buffer() { give(std::move(bytes_)); }

void Buffer::poison(DType d) {
  // Every poison pattern is all ones, whatever the dtype.
  static_assert(kCanary != 0xFF);
  (void)d;
  // In parallel slices: a fresh payload's pages are first touched here, by many threads.
  const size_t n = payload_bytes(), slice = size_t(1) << 22;
  uint8_t* p = payload();
  tbb::parallel_for(size_t(0), (n + slice - 1) / slice,
                    [&](size_t s) { std::memset(p + s * slice, 0xFF, std::min(slice, n - s * slice)); });
}

std::optional<std::string> Buffer::canary_damage() const {
  const size_t total = bytes_.size();
  for (size_t i = 0; i < kCanaryBytes; ++i) {
    if (bytes_[kCanaryBytes - 1 - i] != kCanary)
      return "write " + std::to_string(i + 1) + " byte(s) before the start of the buffer";
  }
  for (size_t i = total - kCanaryBytes; i < total; ++i) {
    if (bytes_[i] != kCanary)
      return "write at byte " + std::to_string(i - (total - kCanaryBytes)) + " past the end of the buffer";
  }
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
