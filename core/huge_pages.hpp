// Large buffers backed by transparent huge pages where the kernel offers them on request
// (THP "madvise" mode, as on the GPU machines' virtual CPUs): the reference's working sets
// run to tens of GiB, and with 4 KiB pages under virtualization the TLB misses of strided
// passes over them cost more than the arithmetic.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace kv {

/// Buffers of at least this many bytes get huge pages.
inline constexpr std::size_t kHugeMin = std::size_t(4) << 20;

/// 2 MiB-aligned memory with huge pages requested; throws std::bad_alloc.
void* huge_alloc(std::size_t bytes);
void huge_free(void* p) noexcept;

/// An allocator whose resize() leaves trivial elements uninitialized: reference and
/// enclosure buffers hold hundreds of millions of elements, every one written by the
/// (parallel) computation, so a serial zero fill would only cost time and put every page
/// on one thread's first touch.
template <class T>
struct NoInitAlloc : std::allocator<T> {
  template <class U>
  bool operator==(const NoInitAlloc<U>&) const noexcept { return true; }
  using value_type = T;
  NoInitAlloc() = default;
  template <class U>
  NoInitAlloc(const NoInitAlloc<U>&) noexcept {}
  template <class U>
  struct rebind {
    using other = NoInitAlloc<U>;
  };
  /// Large buffers on huge pages (core/huge_pages.hpp).
  T* allocate(std::size_t n) {
    if (n * sizeof(T) < kHugeMin) return std::allocator<T>::allocate(n);
    return static_cast<T*>(huge_alloc(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugeMin) std::allocator<T>::deallocate(p, n);
    else huge_free(p);
  }
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};
using ByteBuf = std::vector<uint8_t, NoInitAlloc<uint8_t>>;

}  // namespace kv
