// The CUDA impls' dispatch thresholds (Impl::thresholds, issue 18), without a GPU: they
// are declarations the fuzz generator reads, never launches. Every CUDA impl but rope_table
// declares some; where a threshold moves a contract or the cross-entropy plan, it moves
// between t and t + 1 (so the values are where the code path really changes); and the
// generator draws every declared size at and beside its value.
#include <gtest/gtest.h>

#include "fuzz/target_coverage.hpp"
#include "kernels/cross_entropy/cuda_plan.hpp"

namespace {

kv::DeviceProfile h100() {
  kv::DeviceProfile p;
  p.sm_count = 132;
  p.smem_per_block = 227 * 1024;
  return p;
}

kv::Case example(const std::string& op, kv::DType x) {
  kv::Case c;
  c.op = op;
  c.impl = "cuda";
  c.shape = kv::registry().op(op).example_shape();
  c.dtypes = {{"x", x}};
  kv::registry().normalize(c);
  return c;
}

}  // namespace

TEST(CudaThresholds, TheGeneratorDrawsEveryDeclaredSizeOfEveryCudaImpl) {
  for (auto* op : kv::registry().ops())
    for (auto* im : kv::registry().impls(op->name())) {
      if (im->device() != "cuda" || im->test_only()) continue;
      const std::string label = op->name() + " cuda";
      const auto declared = im->thresholds(example(op->name(), kv::DType::bf16), h100());
      if (op->name() == "rope_table.fwd") {
        EXPECT_TRUE(declared.empty()) << label;
        continue;
      }
      ASSERT_FALSE(declared.empty()) << label;
      // The default config (thresholds follow num_warps, block_v, chunk): each declared
      // size is then declared by most draws of its dtype.
      kv::CaseSpace space = kv::make_space(op->name(), "cuda");
      for (auto& k : space.knobs) k.values = {k.values.front()};
      kvtest::expect_covered(kvtest::coverage(space, {int64_t(1) << 20, h100()}, 1500), 300, label);
    }
}

TEST(CudaThresholds, RowKernelsChangeTheirReductionShapeAtTheirRowAndProgramThresholds) {
  // softmax, layer_norm, rms_norm: past a register threshold the team doubles (or the row is
  // read again), past the chunk a lane holds two: the row's reduction shape changes. Past
  // rows = dW programs a program sums two rows.
  int checked = 0;
  for (const char* op : {"softmax.fwd", "softmax.bwd", "layer_norm.fwd", "layer_norm.bwd", "rms_norm.fwd", "rms_norm.bwd"})
    for (kv::DType x : {kv::DType::f32, kv::DType::bf16})
      for (const char* warps : {"1", "4", "32"}) {
        kv::Case c = example(op, x);
        c.config["num_warps"] = warps;
        const auto& im = kv::registry().impl(op, "cuda");
        const int rank = static_cast<int>(c.shape.size());
        for (auto& t : im.thresholds(c, h100())) {
          const bool row = t.begin == rank - 1, programs = t.what.rfind("dW programs", 0) == 0;
          if (!row && !programs) continue;  // one block's teams: the grid, not the sums
          for (int64_t v : t.values) {
            kv::Case a = c, b = c;
            a.shape = b.shape = std::vector<int64_t>(static_cast<size_t>(rank), 1);
            a.shape.back() = b.shape.back() = row ? v : c.shape.back();
            if (row) b.shape.back() = v + 1;
            else a.shape.front() = v, b.shape.front() = v + 1;
            const std::string axis = row ? "row" : "rows";
            EXPECT_NE(im.contract(a, h100()).reductions.at(axis).n_eff(), im.contract(b, h100()).reductions.at(axis).n_eff())
                << op << " " << kv::dtype_name(x) << " num_warps " << warps << ": " << t.what << " at " << v;
            ++checked;
          }
        }
      }
  EXPECT_GE(checked, 100);
}

TEST(CudaThresholds, CrossEntropyRowThresholdsAreWhereItsPlanChanges) {
  // Each declared row length t: the plan at t and at t + 1 differ in blocks per row, in
  // whether the segment is cached whole, or in whether two segments fit (pipelined); the
  // 16-byte chunk is the alignment, not a plan change.
  int checked = 0;
  for (const char* bv : {"row", "auto", "2048", "32768"})
    for (const char* warps : {"32", "4"})
      for (kv::DType x : {kv::DType::f32, kv::DType::bf16}) {
        kv::Case c = example("cross_entropy.bwd", x);
        c.config = {{"block_v", bv}, {"num_warps", warps}};
        auto whole = [](const kv::cecuda::Plan& p, int64_t v) {
          return p.cache_bytes >= (std::min(v, p.block_v) + p.chunk - 1) / p.chunk * 16;
        };
        for (int64_t t : kv::cecuda::row_thresholds(c, x, h100())) {
          if (t == 16 / static_cast<int64_t>(kv::dtype_size(x))) continue;
          ++checked;
          const auto a = kv::cecuda::plan(c, t, x, h100()), b = kv::cecuda::plan(c, t + 1, x, h100());
          const bool moved = a.ctas != b.ctas || whole(a, t) != whole(b, t + 1) || (a.piped_bytes > 0) != (b.piped_bytes > 0);
          EXPECT_TRUE(moved) << "block_v " << bv << " num_warps " << warps << " " << kv::dtype_name(x) << ": nothing changes at " << t;
        }
      }
  EXPECT_GE(checked, 40);
}
