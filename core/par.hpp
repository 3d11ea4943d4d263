// Parallel loops whose exceptions never unwind through oneTBB. The self-contained release
// binaries link libstdc++ and libgcc statically while Debian's libtbb.so uses the shared
// ones: an exception thrown in a loop body and rethrown by oneTBB crossed two C++ runtimes
// and aborted the process (a HarnessError became a worker crash, recorded as `error` without
// its message). Here the body's exception is caught inside the body, in this binary's
// runtime, the remaining iterations are skipped, and the first exception caught is rethrown
// after the loop, as oneTBB would.
#pragma once
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <exception>
#include <mutex>
#include <utility>

namespace kv {

namespace par_detail {
/// The first exception a loop's bodies threw.
struct Catcher {
  std::atomic<bool> failed{false};
  std::mutex m;
  std::exception_ptr first;
  template <class F>
  void run(F&& f) {
    if (failed.load(std::memory_order_relaxed)) return;
    try {
      f();
    } catch (...) {
      std::lock_guard<std::mutex> lock(m);
      if (!first) first = std::current_exception();
      failed = true;
    }
  }
  void rethrow() {
    if (first) std::rethrow_exception(first);
  }
};
}  // namespace par_detail

/// tbb::parallel_for(b, e, f) over indices [b, e).
template <class I, class F>
void par_for(I b, I e, F&& f) {
  par_detail::Catcher c;
  tbb::parallel_for(b, e, [&](I i) { c.run([&] { f(i); }); });
  c.rethrow();
}

/// tbb::parallel_for(range, f) over a blocked_range.
template <class I, class F>
void par_for(const tbb::blocked_range<I>& range, F&& f) {
  par_detail::Catcher c;
  tbb::parallel_for(range, [&](const tbb::blocked_range<I>& r) { c.run([&] { f(r); }); });
  c.rethrow();
}

}  // namespace kv
