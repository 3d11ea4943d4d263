// Reading and writing .safetensors files, strictly: every header entry is checked
// against the file's size before a byte is copied.
#include "core/safetensors.hpp"

#include "core/case.hpp"

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace kv {

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw std::runtime_error("malformed safetensors file " + path + ": " + why);
}

DType dtype_from(const std::string& path, const std::string& s, bool& f64) {
  f64 = s == "F64";
  if (f64) return DType::f32;
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  if (s == "I32") return DType::i32;
  bad(path, "unsupported dtype " + s + " (F32, F16, BF16, I32, F64)");
}

}  // namespace

const char* safetensors_dtype(DType d) {
  switch (d) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
  }
  return "?";
}

StoredTensor f64_tensor(const std::vector<int64_t>& shape, const double* v, size_t n) {
  StoredTensor t;
  t.f64 = true;
  t.shape = shape;
  t.bytes.resize(n * 8);
  std::memcpy(t.bytes.data(), v, n * 8);  // little endian, as the format wants
  return t;
}

StoredTensor gather(const TensorView& v) {
  StoredTensor t;
  t.dtype = v.desc.dtype;
  t.shape = v.desc.shape;
  const size_t es = dtype_size(v.desc.dtype);
  const int64_t n = v.desc.numel();
  t.bytes.resize(static_cast<size_t>(n) * es);
  if (v.desc.contiguous()) {
    std::memcpy(t.bytes.data(), v.base + v.desc.offset * static_cast<int64_t>(es), t.bytes.size());
    return t;
  }
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = v.bits(i);
    std::memcpy(t.bytes.data() + static_cast<size_t>(i) * es, &b, es);  // little endian
  }
  return t;
}

void scatter(const StoredTensor& t, const TensorView& v) {
  const size_t es = dtype_size(v.desc.dtype);
  const int64_t n = v.desc.numel();
  if (t.f64 || t.dtype != v.desc.dtype || t.shape != v.desc.shape || t.bytes.size() != static_cast<size_t>(n) * es)
    throw std::runtime_error("tensor " + v.desc.name + " is " + std::string(dtype_name(t.dtype)) + " " +
                             shape_str(t.shape) + ", expected " + std::string(dtype_name(v.desc.dtype)) + " " +
                             shape_str(v.desc.shape));
  TensorView w = v;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = 0;
    std::memcpy(&b, t.bytes.data() + static_cast<size_t>(i) * es, es);
    w.set_bits(i, b);
  }
}

void write_safetensors(const std::string& path, const std::map<std::string, StoredTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json h = nlohmann::json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t off = 0;
  for (auto& [name, t] : tensors) {
    h[name] = {{"dtype", t.f64 ? "F64" : safetensors_dtype(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size()}}};
    off += t.bytes.size();
  }
  std::string hs = h.dump();
  hs.resize((hs.size() + 7) / 8 * 8, ' ');  // the format pads the header to 8 bytes with spaces
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw std::runtime_error("cannot write " + path);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(hs.size()) >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f.write(hs.data(), static_cast<std::streamsize>(hs.size()));
  for (auto& [name, t] : tensors) f.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  if (!f) throw std::runtime_error("writing " + path + " failed");
}

std::map<std::string, StoredTensor> read_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error("cannot read " + path + " (missing?)");
  const uint64_t size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  if (size < 8) bad(path, "shorter than its 8-byte header length");
  uint8_t len[8];
  f.read(reinterpret_cast<char*>(len), 8);
  uint64_t hl = 0;
  for (int i = 0; i < 8; ++i) hl |= static_cast<uint64_t>(len[i]) << (8 * i);
  if (hl > size - 8 || hl > (uint64_t(100) << 20)) bad(path, "header length " + std::to_string(hl) + " exceeds the file");
  std::string hs(hl, '\0');
  f.read(hs.data(), static_cast<std::streamsize>(hl));
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(hs);
  } catch (const std::exception& e) {
    bad(path, std::string("header is not JSON (") + e.what() + ")");
  }
  if (!h.is_object()) bad(path, "header is not a JSON object");
  const uint64_t data_size = size - 8 - hl;
  std::map<std::string, StoredTensor> out;
  for (auto& [name, e] : h.items()) {
    if (name == "__metadata__") continue;
    try {
      StoredTensor t;
      t.dtype = dtype_from(path, e.at("dtype").get<std::string>(), t.f64);
      t.shape = e.at("shape").get<std::vector<int64_t>>();
      auto offs = e.at("data_offsets").get<std::vector<uint64_t>>();
      if (offs.size() != 2 || offs[0] > offs[1] || offs[1] > data_size) bad(path, name + ": data_offsets outside the data");
      uint64_t n = 1;
      for (int64_t d : t.shape) {
        if (d < 0) bad(path, name + ": negative dimension");
        n *= static_cast<uint64_t>(d);
      }
      if (offs[1] - offs[0] != n * (t.f64 ? 8 : dtype_size(t.dtype)))
        bad(path, name + ": " + std::to_string(offs[1] - offs[0]) + " bytes for " + std::to_string(n) + " elements");
      t.bytes.resize(offs[1] - offs[0]);
      f.seekg(static_cast<std::streamoff>(8 + hl + offs[0]));
      f.read(reinterpret_cast<char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
      if (!f) bad(path, name + ": truncated data");
      out.emplace(name, std::move(t));
    } catch (const nlohmann::json::exception& ex) {
      bad(path, name + ": " + ex.what());
    }
  }
  return out;
}

}  // namespace kv
