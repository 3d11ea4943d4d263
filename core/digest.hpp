// Output and input digests: XXH64 of each chunk of canonical little-endian bytes in
// logical row-major order with NaNs canonicalized (so a drift can be located), and the
// whole tensor's digest as XXH64 over the chunk digests.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/tensor.hpp"

namespace kv {

struct Digest {
  uint64_t whole = 0;
  int64_t chunk_elems = 0;
  std::vector<uint64_t> chunks;
  nlohmann::json to_json() const;
};

/// Chunk size depends on the element count only: max(4096, ceil(n / 32)).
int64_t digest_chunk_elems(int64_t n);
Digest digest(const TensorView& t);
/// XXH64 of raw bytes (used to detect writes into input storage).
uint64_t raw_digest(const uint8_t* p, size_t n);

}  // namespace kv
