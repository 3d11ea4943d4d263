// Canonical digests.
#include "core/digest.hpp"

#include <tbb/parallel_for.h>
#include <xxhash.h>

#include <algorithm>

#include "core/case.hpp"
#include "core/par.hpp"

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
  const int64_t nchunks = n == 0 ? 0 : (n + d.chunk_elems - 1) / d.chunk_elems;
  d.chunks.resize(static_cast<size_t>(nchunks));
  // Chunks are hashed in parallel, each streaming its canonical bytes.
  par_for(int64_t(0), nchunks, [&](int64_t c) {
    XXH64_state_t* st = XXH64_createState();
    XXH64_reset(st, 0);
    uint8_t buf[4096 * 4];
    size_t used = 0;
    for (int64_t i = c * d.chunk_elems; i < std::min(n, (c + 1) * d.chunk_elems); ++i) {
      uint32_t v = t.bits(i);
      if (is_nan_bits(dt, v)) v = canonical_nan_bits(dt);
      for (size_t k = 0; k < es; ++k) buf[used++] = static_cast<uint8_t>(v >> (8 * k));
      if (used == sizeof buf) XXH64_update(st, buf, used), used = 0;
    }
    XXH64_update(st, buf, used);
    d.chunks[c] = XXH64_digest(st);
    XXH64_freeState(st);
  });
  // The whole-tensor digest: XXH64 over the chunk digests' little-endian bytes.
  std::vector<uint8_t> cat;
  for (uint64_t h : d.chunks)
    for (int k = 0; k < 8; ++k) cat.push_back(static_cast<uint8_t>(h >> (8 * k)));
  d.whole = XXH64(cat.data(), cat.size(), 0);
  return d;
}

uint64_t raw_digest(const uint8_t* p, size_t n) { return XXH64(p, n, 0); }

nlohmann::json Digest::to_json() const {
  nlohmann::json c = nlohmann::json::array();
  for (auto v : chunks) c.push_back(hex64(v));
  return {{"xxh64", hex64(whole)}, {"chunk_elems", chunk_elems}, {"chunks", c}};
}

}  // namespace kv
