// Tensors as the harness owns them: a dtype each, strides and a base offset in elements,
// storage between guard pages with canaries before it, outputs poisoned before every run.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/guard_pages.hpp"

namespace kv {

enum class Role { input, output };

struct TensorDesc {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // elements; empty means contiguous row-major
  int64_t offset = 0;            // elements from the start of the storage

  int64_t numel() const;
  std::vector<int64_t> effective_strides() const;
  bool contiguous() const;
  /// Elements of storage the view reaches: offset + farthest element + 1.
  int64_t storage_elems() const;
  /// storage_elems() in bytes.
  int64_t storage_bytes() const;
};

/// Host storage between guard pages (core/guard_pages.hpp): the payload ends flush with a
/// PROT_NONE zone, so a write past the end faults at once; before it, between the leading
/// guard zone and the payload, lie kMinCanaryBytes or more canary bytes, checked after the
/// run, and before those another guard zone. Device mirrors keep canaries of their own and
/// report damage to them here (note_damage).
class Buffer {
 public:
  static constexpr size_t kMinCanaryBytes = 256;
  static constexpr uint8_t kCanary = 0xA5;
  explicit Buffer(size_t payload_bytes);
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* payload() { return block_.payload(); }
  const uint8_t* payload() const { return block_.payload(); }
  size_t payload_bytes() const { return block_.payload_bytes(); }
  /// The canary bytes before the payload (between kMinCanaryBytes and that plus a page).
  size_t lead_canary_bytes() const { return block_.lead_bytes(); }
  /// The payload of another buffer of the same size, copied in.
  void copy_from(const Buffer& other);
  /// What a guard-page fault report calls this buffer (a tensor's or workspace's name).
  void set_label(const std::string& label) { block_.set_label(label); }
  void poison(DType d);
  /// A description of the first overwritten canary byte (or of damage noted by a device
  /// mirror), if any.
  std::optional<std::string> canary_damage() const;
  /// Damage a device mirror found on its own canaries around this buffer.
  void note_damage(const std::string& what) {
    if (noted_.empty()) noted_ = what;
  }

 private:
  GuardedBlock block_;
  std::string noted_;
};

/// A typed view of a Buffer with strides and offset; indices are logical row-major.
struct TensorView {
  TensorDesc desc;
  uint8_t* base = nullptr;  // payload start

  int64_t storage_index(int64_t logical) const {
    return desc.strides.empty() ? desc.offset + logical : strided_index(logical);
  }
  uint32_t bits(int64_t logical) const {
    const uint8_t* p = base + storage_index(logical) * static_cast<int64_t>(dtype_size(desc.dtype));
    if (dtype_size(desc.dtype) == 4) {
      uint32_t b;
      std::memcpy(&b, p, 4);
      return b;
    }
    uint16_t b;
    std::memcpy(&b, p, 2);
    return b;
  }
  void set_bits(int64_t logical, uint32_t b);
  double get(int64_t logical) const { return decode(desc.dtype, bits(logical)); }
  /// Exact values of n consecutive logical elements from `start` (a fast path for
  /// contiguous fp32 and bf16 storage; the others element by element).
  void read(int64_t start, int64_t n, double* out) const;
  /// Stores RNE(v) in the view's dtype.
  void store(int64_t logical, double v) { set_bits(logical, encode(desc.dtype, round_to(desc.dtype, v))); }

 private:
  int64_t strided_index(int64_t logical) const;
};

struct TensorSlot {
  TensorDesc desc;
  Role role = Role::input;
  std::string alias_of;  // an output written into an input's storage
  std::shared_ptr<Buffer> buffer;
  TensorView view() const { return TensorView{desc, buffer->payload()}; }
};

/// The tensors and workspaces of one case, in the order the op names them.
struct TensorSet {
  std::vector<TensorSlot> slots;
  std::map<std::string, std::shared_ptr<Buffer>> workspaces;
  /// Timings an impl measures itself (e.g. kernel_ms from CUDA events).
  std::map<std::string, double> timings;
  const TensorSlot& at(const std::string& name) const;
  TensorSlot& at(const std::string& name);
  TensorView view(const std::string& name) const { return at(name).view(); }
};

/// The most elements (and bytes) a tensor may have: sizes and offsets computed from a shape
/// stay far from int64's limit, so sums of a few of them cannot overflow either.
inline constexpr int64_t kMaxElements = int64_t(1) << 56;
/// The element count; UsageError when it exceeds kMaxElements (or a dimension is negative).
int64_t numel(const std::vector<int64_t>& shape);
/// UsageError when the product of the shape's non-zero dimensions exceeds kMaxElements,
/// which bounds every tensor an op derives from the shape (before the op multiplies).
void check_shape_size(const std::vector<int64_t>& shape);

}  // namespace kv
