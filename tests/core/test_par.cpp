// core/par.hpp: an exception thrown in a parallel loop's body reaches the caller as itself
// (type and message), in every build. In the static release build (-static-libstdc++ with
// Debian's shared libtbb) the same exception rethrown by oneTBB itself aborted the process:
// MathFunctions.TheListingIsWhatEachDefinitionCalls aborted in .dist/kv_tests at 0299518.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/par.hpp"

TEST(Par, ABodysExceptionReachesTheCallerAsItself) {
  std::atomic<int64_t> ran{0};
  try {
    kv::par_for(int64_t(0), int64_t(100000), [&](int64_t i) {
      ++ran;
      if (i == 777) throw kv::HarnessError("element 777 lies outside its own enclosure");
    });
    FAIL() << "no exception";
  } catch (const kv::HarnessError& e) {
    EXPECT_EQ(std::string(e.what()), "element 777 lies outside its own enclosure");
  }
  EXPECT_GE(ran.load(), 1);
}

TEST(Par, BlockedRangesToo) {
  EXPECT_THROW(kv::par_for(tbb::blocked_range<int64_t>(0, 4096), [&](const tbb::blocked_range<int64_t>& r) {
                 if (r.begin() <= 2000 && 2000 < r.end()) throw kv::UsageError("shape too large");
               }),
               kv::UsageError);
}

TEST(Par, WithoutAThrowEveryIterationRunsOnce) {
  std::vector<std::atomic<int>> hits(5000);
  kv::par_for(size_t(0), hits.size(), [&](size_t i) { ++hits[i]; });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}
