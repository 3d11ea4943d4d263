// Canonical digests.
#include "core/digest.hpp"

#include <xxhash.h>

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
  XXH64_state_t* whole = XXH64_createState();
  XXH64_state_t* chunk = XXH64_createState();
  XXH64_reset(whole, 0);
  XXH64_reset(chunk, 0);
  uint8_t buf[4];
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b = t.bits(i);
    if (is_nan_bits(dt, b)) b = canonical_nan_bits(dt);
    for (size_t k = 0; k < es; ++k) buf[k] = static_cast<uint8_t>(b >> (8 * k));
    XXH64_update(whole, buf, es);
    XXH64_update(chunk, buf, es);
    if ((i + 1) % d.chunk_elems == 0 || i + 1 == n) {
      d.chunks.push_back(XXH64_digest(chunk));
      XXH64_reset(chunk, 0);
    }
  }
  d.whole = XXH64_digest(whole);
  XXH64_freeState(whole);
  XXH64_freeState(chunk);
  return d;
}

uint64_t raw_digest(const uint8_t* p, size_t n) { return XXH64(p, n, 0); }

nlohmann::json Digest::to_json() const {
  nlohmann::json c = nlohmann::json::array();
  for (auto v : chunks) c.push_back(hex64(v));
  return {{"xxh64", hex64(whole)}, {"chunk_elems", chunk_elems}, {"chunks", c}};
}

}  // namespace kv
