// Sensitivity: each planted bug must be flagged at N in {123, 1536, 4096, 16384} for
// fp32 and bf16 outputs, while the correct impl passes the very same cases. The table
// of flagged fractions is printed (and quoted in the closing note).
#include <gtest/gtest.h>

#include <cstdio>

#include "faults/rms_norm.hpp"
#include "test_util.hpp"

namespace {

using kv::DType;

/// Dtypes for "fp32 outputs": all fp32, except where the bug lives in the llama
/// intermediate rounding to bf16, which an all-fp32 case does not have.
std::map<std::string, DType> dtypes_for(const kvtest::PlantedBug& b, bool bf16_out) {
  if (bf16_out) return {{"x", DType::bf16}, {"w", DType::bf16}};
  bool needs_bf16_x = b.name == "gemma_for_llama" || b.name == "truncate_to_bf16";
  if (!needs_bf16_x) return {{"x", DType::f32}};
  if (b.bwd) return {{"x", DType::bf16}, {"w", DType::f32}, {"dx", DType::f32}, {"dy", DType::f32}};
  return {{"x", DType::bf16}, {"w", DType::f32}, {"y", DType::f32}};
}

struct Tally {
  int flagged = 0, total = 0, control_failed = 0;
};

Tally run_bug(const kvtest::PlantedBug& b, int64_t n, bool bf16_out) {
  Tally t;
  const int64_t rows = n >= 16384 ? 2 : 4;
  for (const char* dist : {"normal", "uniform", "tiny", "large", "wide"})
    for (uint64_t seed : {1, 2}) {
      kv::Case c = kvtest::rms_case(b.bwd, "host.bug." + b.name, {rows, n}, dtypes_for(b, bf16_out), "llama", seed, dist);
      auto bug = kvtest::run_in_process(c);
      c.impl = "host";
      auto ok = kvtest::run_in_process(c);
      ++t.total;
      if (bug["verdict"] == "fail") ++t.flagged;
      if (ok["verdict"] != "pass") ++t.control_failed;
    }
  return t;
}

}  // namespace

TEST(RmsSensitivity, EveryPlantedBugIsFlaggedAtEveryN) {
  std::printf("%-22s %-6s %8s %8s %8s %8s\n", "planted bug", "out", "N=123", "N=1536", "N=4096", "N=16384");
  for (auto& b : kvtest::planted_bugs())
    for (bool bf16_out : {false, true}) {
      // Its write lands on a guard page: in this process that is a crash. It is run
      // through the worker instead (Containment.OutOfBoundsWritesOnTheHostNeverPass).
      if (b.name == "write_past_end") continue;
      std::printf("%-22s %-6s", b.name.c_str(), bf16_out ? "bf16" : "fp32");
      for (int64_t n : {123, 1536, 4096, 16384}) {
        Tally t = run_bug(b, n, bf16_out);
        std::printf(" %3d/%-4d", t.flagged, t.total);
        EXPECT_GT(t.flagged, 0) << b.name << " not flagged at N=" << n << (bf16_out ? " bf16" : " fp32");
        EXPECT_EQ(t.control_failed, 0) << "the correct impl failed a case of " << b.name << " at N=" << n;
      }
      std::printf("\n");
      std::fflush(stdout);
    }
}
