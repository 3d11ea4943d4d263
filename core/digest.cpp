// Canonical digests.
#include "core/digest.hpp"

#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <algorithm>

#include "core/case.hpp"

namespace kv {

int64_t digest_chunk_elems(int64_t n) {
  int64_t c = (n + 31) / 32;
  return c < 4096 ? 4096 : c;
}

Digest digest(const TensorView& t) {
  Digest d;
  const int64_t n = t.desc.numel();
  const DType dt = t.desc.dtype;
  const size_t es = dtype_size(dt);
  d.chunk_elems = digest_chunk_elems(n);
  // Canonical bytes first (in parallel), then the whole digest and the chunk digests.
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * es);
  const int64_t block = 1 << 16;
  tbb::parallel_for(int64_t(0), (n + block - 1) / block, [&](int64_t b) {
    for (int64_t i = b * block; i < std::min(n, (b + 1) * block); ++i) {
      uint32_t v = t.bits(i);
      if (is_nan_bits(dt, v)) v = canonical_nan_bits(dt);
      for (size_t k = 0; k < es; ++k) bytes[static_cast<size_t>(i) * es + k] = static_cast<uint8_t>(v >> (8 * k));
    }
  });
  d.whole = XXH64(bytes.data(), bytes.size(), 0);
  const int64_t nchunks = n == 0 ? 0 : (n + d.chunk_elems - 1) / d.chunk_elems;
  d.chunks.resize(static_cast<size_t>(nchunks));
  tbb::parallel_for(int64_t(0), nchunks, [&](int64_t c) {
    int64_t b = c * d.chunk_elems, e = std::min(n, b + d.chunk_elems);
    d.chunks[c] = XXH64(bytes.data() + b * es, static_cast<size_t>(e - b) * es, 0);
  });
  return d;
}

uint64_t raw_digest(const uint8_t* p, size_t n) { return XXH64(p, n, 0); }

nlohmann::json Digest::to_json() const {
  nlohmann::json c = nlohmann::json::array();
  for (auto v : chunks) c.push_back(hex64(v));
  return {{"xxh64", hex64(whole)}, {"chunk_elems", chunk_elems}, {"chunks", c}};
}

}  // namespace kv
