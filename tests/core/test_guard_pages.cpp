// Host buffers between guard pages: the payload ends flush with a PROT_NONE page (a write
// one byte past the end faults, and the fault report names the buffer and the distance),
// the canary slack before it is checked, a fault before the slack is reported too, and
// reused and huge-page-sized blocks keep the same layout.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <memory>

#include "core/guard_pages.hpp"
#include "core/tensor.hpp"

namespace {

uintptr_t addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

/// A block's layout: payload end on a page boundary, canary slack within a page of the minimum.
void expect_layout(const kv::Buffer& b, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  EXPECT_EQ(b.payload_bytes(), n);
  EXPECT_EQ((addr(b.payload()) + n) % page, 0u) << n;
  EXPECT_GE(b.lead_canary_bytes(), kv::Buffer::kMinCanaryBytes);
  EXPECT_LT(b.lead_canary_bytes(), kv::Buffer::kMinCanaryBytes + page);
  EXPECT_EQ((addr(b.payload()) - b.lead_canary_bytes()) % page, 0u);
  // The start is aligned to the largest power of two dividing the size (the element size
  // of any tensor stored in it).
  const uintptr_t align = n == 0 ? page : std::min<uintptr_t>(page, n & (~n + 1));
  EXPECT_EQ(addr(b.payload()) % align, 0u) << n;
}

TEST(GuardPages, PayloadEndsFlushWithAGuardPage) {
  for (size_t n : {size_t(0), size_t(1), size_t(6), size_t(64), size_t(1000), size_t(4096), size_t(4097), size_t(12) << 20}) {
    kv::Buffer b(n);
    expect_layout(b, n);
    b.poison(kv::DType::f32);  // every payload byte writable
    if (n) {
      EXPECT_EQ(b.payload()[n - 1], 0xFF);
    }
    EXPECT_FALSE(b.canary_damage().has_value());
  }
}

TEST(GuardPages, ReusedBlocksKeepTheLayout) {
  for (int round = 0; round < 3; ++round) {
    auto big = std::make_unique<kv::Buffer>(size_t(3) << 20);
    big->poison(kv::DType::f32);
    big.reset();  // kept for reuse
    kv::Buffer smaller((size_t(3) << 20) - 40000), larger((size_t(3) << 20) + 4096);
    expect_layout(smaller, (size_t(3) << 20) - 40000);
    expect_layout(larger, (size_t(3) << 20) + 4096);
    smaller.poison(kv::DType::f32);
    EXPECT_FALSE(smaller.canary_damage().has_value());
  }
}

class GuardFaults : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(GuardFaults, AWriteOneBytePastTheEndFaultsAndNamesTheBuffer) {
  EXPECT_EXIT(
      {
        kv::install_guard_fault_report(2);
        kv::Buffer b(100);
        b.set_label("y");
        volatile uint8_t* p = b.payload();
        p[100] = 0;
      },
      ::testing::KilledBySignal(SIGSEGV), "out-of-bounds write at byte 0 past the end of y");
}

TEST_F(GuardFaults, AWriteFourKiBPastTheEndOfAReusedBlockFaults) {
  EXPECT_EXIT(
      {
        kv::install_guard_fault_report(2);
        { kv::Buffer first(size_t(2) << 20); }  // released: the next block reuses its mapping
        kv::Buffer b((size_t(2) << 20) - 10000);
        b.set_label("dx");
        volatile uint8_t* p = b.payload();
        p[b.payload_bytes() + 4096] = 0;
      },
      ::testing::KilledBySignal(SIGSEGV), "out-of-bounds write at byte 4096 past the end of dx");
}

TEST_F(GuardFaults, AWriteBeforeTheCanariesFaults) {
  EXPECT_EXIT(
      {
        kv::install_guard_fault_report(2);
        kv::Buffer b(1000);
        b.set_label("workspace partials");
        volatile uint8_t* p = b.payload();
        p[-static_cast<std::ptrdiff_t>(b.lead_canary_bytes()) - 1] = 0;
      },
      ::testing::KilledBySignal(SIGSEGV), "out-of-bounds write [0-9]+ byte\\(s\\) before the start of workspace partials");
}

TEST_F(GuardFaults, AReadPastTheEndFaultsToo) {
  EXPECT_EXIT(
      {
        kv::install_guard_fault_report(2);
        kv::Buffer b(64);
        b.set_label("x");
        volatile uint8_t* p = b.payload();
        volatile uint8_t v = p[64];
        (void)v;
      },
      ::testing::KilledBySignal(SIGSEGV), "out-of-bounds (read|access) at byte 0 past the end of x");
}

}  // namespace
