// The rope cases the CUDA tests rely on, on the host: in place, strided and offset q/k,
// tables in another dtype, more k heads than q; and the 3d generator really draws padding
// tokens (so a kernel that rotates padding is caught), with every real token's positions
// inside its axis table.
#include <gtest/gtest.h>

#include "ops/rope_common.hpp"
#include "op_cases.hpp"
#include "test_util.hpp"

namespace {

kv::Case host_rope(const std::string& op, std::vector<int64_t> shape, const std::string& x, const std::string& layout,
                   const std::string& pos, const std::string& k_heads = "0") {
  return kvtest::op_case(op, std::move(shape), x, {{"layout", layout}, {"positions", pos}, {"k_heads", k_heads}});
}

}  // namespace

TEST(OpsHost, RopeInPlaceStridedAndMixedDtypesPass) {
  for (const char* op : {"rope.fwd", "rope.bwd"}) {
    const bool bwd = std::string(op) == "rope.bwd";
    const std::string q = bwd ? "dq_out" : "q", k = bwd ? "dk_out" : "k", qo = bwd ? "dq" : "q_out", ko = bwd ? "dk" : "k_out";
    for (const char* layout : {"rotate_half", "interleaved"})
      for (const char* pos : {"1d", "3d", "mrope"}) {
        kv::Case a = host_rope(op, {2, 9, 2, 16}, "bf16", layout, pos, "3");
        a.alias[qo] = q, a.alias[ko] = k;
        kv::Case b = host_rope(op, {2, 9, 3, 16}, "fp16", layout, pos);
        b.layout[q] = {0, {9 * 3 * 24, 3 * 24, 24, 1}};
        b.layout[k] = {0, {3 * 9 * 16, 16, 9 * 16, 1}};
        b.layout[ko] = {3, {}};
        kv::Case m = host_rope(op, {1, 7, 2, 12}, "bf16", layout, pos);
        m.layout[q] = {0, {2 * 7 * 24, 2 * 24, 24, 2}};
        const bool three = std::string(pos) == "3d";
        for (auto& t : kv::table_names_all())
          if ((t.size() > 3) == three) m.dtypes[t] = kv::DType::f32;
        m.layout[three ? "cos_h" : "cos"] = {5, {}};
        for (auto& c : {a, b, m}) {
          auto j = kvtest::run_in_process(c);
          EXPECT_EQ(j["verdict"], "pass") << j["case"] << " " << j.value("reason", "");
        }
      }
  }
}

TEST(OpsHost, RopeThreeDGeneratorDrawsPaddingTokens) {
  for (uint64_t seed : {1, 2, 3}) {
    kv::Case c = host_rope("rope.fwd", {3, 37, 3, 64}, "bf16", "rotate_half", "3d");
    c.seed = seed;
    kv::registry().normalize(c);
    const auto& op = kv::registry().op(c.op);
    kv::TensorSet ts = kv::allocate_tensors(c, op);
    op.generate(c, ts);
    auto grid = ts.view("grid"), len = ts.view("seq_len");
    int64_t pad = 0, real = 0;
    for (int64_t b = 0; b < 3; ++b) {
      const int64_t F = static_cast<int64_t>(grid.get(b * 3)), H = static_cast<int64_t>(grid.get(b * 3 + 1)),
                    W = static_cast<int64_t>(grid.get(b * 3 + 2)), n = static_cast<int64_t>(len.get(b));
      ASSERT_GE(F * H * W, 1);
      const int64_t lim = std::min(n, F * H * W);
      for (int64_t s = 0; s < 37; ++s) {
        if (s >= lim) {
          ++pad;
          continue;
        }
        ++real;
        // Positions index the (S, c) axis tables: each below S.
        EXPECT_LT(s / (H * W), 37);
        EXPECT_LT((s / W) % H, 37);
      }
    }
    EXPECT_GT(pad, 0) << "seed " << seed;
    EXPECT_GT(real, 0) << "seed " << seed;
  }
}
