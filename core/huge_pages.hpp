// Large buffers backed by transparent huge pages where the kernel offers them on request
// (THP "madvise" mode, as on the GPU machines' virtual CPUs): the reference's working sets
// run to tens of GiB, and with 4 KiB pages under virtualization the TLB misses of strided
// passes over them cost more than the arithmetic.
#pragma once
#include <cstddef>

namespace kv {

/// Buffers of at least this many bytes get huge pages.
inline constexpr std::size_t kHugeMin = std::size_t(4) << 20;

/// 2 MiB-aligned memory with huge pages requested; throws std::bad_alloc.
void* huge_alloc(std::size_t bytes);
void huge_free(void* p) noexcept;

}  // namespace kv
