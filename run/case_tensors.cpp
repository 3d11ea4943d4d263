// A case's tensors as laid out (run/runner.hpp): their bytes, and their buffers allocated
// poisoned and canaried, aliased outputs sharing their input's storage.
#include "run/runner.hpp"

#include <fstream>

namespace kv {

int64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t(1) << 40;
}

double case_tensor_bytes(const Case& c, const OpBinding& op) {
  double bytes = 0;
  for (auto& s : op.tensors(c)) {
    if (c.alias.count(s.name)) continue;  // written over an input's storage
    TensorDesc d{s.name, s.dtype, s.shape, {}, 0};
    if (auto it = c.layout.find(s.name); it != c.layout.end()) d.strides = it->second.strides, d.offset = it->second.offset;
    bytes += static_cast<double>(d.storage_elems()) * static_cast<double>(dtype_size(s.dtype));
  }
  return bytes;
}

TensorSet allocate_tensors(const Case& c, const OpBinding& op) {
  TensorSet ts;
  for (auto& s : op.tensors(c)) {
    TensorSlot slot;
    slot.desc = TensorDesc{s.name, s.dtype, s.shape, {}, 0};
    slot.role = s.role;
    if (auto it = c.layout.find(s.name); it != c.layout.end()) {
      slot.desc.strides = it->second.strides;
      slot.desc.offset = it->second.offset;
    }
    if (auto it = c.alias.find(s.name); it != c.alias.end()) {
      const TensorSlot& in = ts.at(it->second);
      slot.alias_of = it->second;
      slot.desc.strides = in.desc.strides;
      slot.desc.offset = in.desc.offset;
      slot.buffer = in.buffer;
      slot.buffer->set_label(in.desc.name + " (" + s.name + " written in place)");
    } else {
      slot.buffer = std::make_shared<Buffer>(static_cast<size_t>(slot.desc.storage_elems()) * dtype_size(s.dtype));
      slot.buffer->set_label(s.name);
      slot.buffer->poison(s.dtype);
    }
    ts.slots.push_back(std::move(slot));
  }
  return ts;
}

}  // namespace kv
