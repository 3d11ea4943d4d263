#include "core/huge_pages.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <new>

namespace kv {

namespace {
constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;

/// Asks for huge pages on the 2 MiB-aligned part of [p, p + bytes) (before first touch);
/// no effect below kHugeMin or where the kernel declines.
void advise_huge(void* p, std::size_t bytes) noexcept {
  if (bytes < kHugeMin) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t lo = (a + kHuge - 1) & ~(kHuge - 1), hi = (a + bytes) & ~(kHuge - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

}  // namespace

void* huge_alloc(std::size_t bytes) {
  const std::size_t size = (bytes + kHuge - 1) & ~(kHuge - 1);
  void* p = std::aligned_alloc(kHuge, size);
  if (!p) throw std::bad_alloc();
  advise_huge(p, size);
  return p;
}

void huge_free(void* p) noexcept { std::free(p); }

}  // namespace kv
