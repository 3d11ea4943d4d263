// The generators per op (a RapidCheck property each): every generated case normalizes,
// round-trips through its case string and respects the element cap, and every one-step
// shrink is smaller. Plus the planted drop_tail bug fails exactly where it should.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <tuple>

#include "core/error.hpp"
#include "fuzz/gen.hpp"
#include "fuzz/space.hpp"
#include "test_util.hpp"

namespace {

using kv::Case;

/// (elements, nondefault knobs/attrs/dist/layout, nondefault dtypes): every shrink lowers it
/// lexicographically. The dtypes come last: which dtype is a case's main one is a vote over
/// its tensors, and a simpler attribute (rope's positions 3d -> 1d drops four fp32 tables)
/// can move that vote without making the dtypes any more complex.
std::tuple<int64_t, int, int> measure(const Case& c) {
  const int dtypes = (kv::main_dtype(c) != kv::DType::f32) + (kv::essential_dtypes(c).size() > 1);
  return {kv::shape_elements(c.shape), kv::nondefault_count(c) - dtypes, dtypes};
}

bool check_op(const std::string& op, const std::string& impl) {
  const kv::CaseSpace space = kv::make_space(op, impl);
  const kv::GenLimits lim{1 << 16};
  return rc::check(op + " " + impl + ": generated cases normalize, round-trip and shrink smaller", [&] {
    const Case c = *kv::case_gen(space, lim);
    RC_ASSERT(kv::is_normalized(c));
    RC_ASSERT(Case::parse(c.str()) == c);
    RC_ASSERT(kv::shape_elements(c.shape) <= lim.max_elements);
    RC_TAG(c.dist);
    int n = 0;
    auto seq = kv::shrink_case(c);
    while (auto s = seq.next()) {
      RC_ASSERT(kv::is_normalized(*s));
      RC_ASSERT(*s != c);
      RC_LOG() << c.str() << "\n  shrinks to " << s->str() << "\n";
      RC_ASSERT(measure(*s) < measure(c));
      if (++n == 40) break;  // the first ones are the big steps; enough to see the rule
    }
  });
}

}  // namespace

TEST(FuzzGen, EveryOpHasAPropertyThroughTheGenerators) {
  for (auto* op : kv::registry().ops())
    for (auto* im : kv::registry().impls(op->name()))
      if (!im->test_only() && im->device() == "host") EXPECT_TRUE(check_op(op->name(), im->name())) << op->name();
}

TEST(FuzzGen, FewDrawsAreRejectedAndNoneThrowsOtherwise) {
  // The campaign's candidates: the op refuses few draws, and only with UsageError.
  for (auto* op : kv::registry().ops()) {
    const kv::CaseSpace space = kv::make_space(op->name(), "host");
    auto gen = kv::candidate_gen(space, {1 << 16});
    int rejected = 0;
    const int n = 200;
    for (int i = 0; i < n; ++i) {
      Case c = gen(rc::Random(1000 + i), i % 101).value();
      rejected += !kv::is_normalized(c);
    }
    EXPECT_LE(rejected, n / 10) << op->name() << ": " << rejected << " of " << n << " draws rejected";
  }
}

TEST(FuzzGen, ShapesReachBlockEdgesAndTheSeedShapesWhenAllowed) {
  const kv::CaseSpace rms = kv::make_space("rms_norm.fwd", "host"), rope = kv::make_space("rope.fwd", "host");
  std::set<int64_t> rows;
  bool seed_rms = false, seed_rope = false;
  for (int i = 0; i < 3000; ++i) {
    Case a = kv::draw_case(rms, rc::Random(i), 100, {int64_t(1) << 26});
    Case b = kv::draw_case(rope, rc::Random(i), 100, {int64_t(1) << 26});
    rows.insert(a.shape.back());
    seed_rms |= a.shape == std::vector<int64_t>{32760, 1536};
    seed_rope |= b.shape == std::vector<int64_t>{1, 32760, 12, 128};
    EXPECT_EQ(b.shape.back() % 2, 0) << "rope's head dim is even";
  }
  for (int64_t n : {1, 31, 32, 33, 63, 64, 65, 113, 127, 128, 129, 239, 255, 256, 257, 799, 1023, 1024, 1025})
    EXPECT_TRUE(rows.count(n)) << "row length " << n << " never drawn";
  EXPECT_TRUE(seed_rms && seed_rope);
  // Under the default cap the seed shapes are never drawn.
  for (int i = 0; i < 500; ++i) EXPECT_LE(kv::shape_elements(kv::draw_case(rms, rc::Random(i), 100, {}).shape), 1 << 20);
}

TEST(FuzzGen, ShrinkingIsDeterministicAndReachesTheSimplestCase) {
  // A case with everything set shrinks, step by step, to 1x1 with every default.
  Case c = Case::parse("kv1 op=rms_norm.bwd impl=host config=num_warps:8,order:desc,dw:per_sm shape=7x300 "
                       "dtypes=x:bf16,w:fp16 attrs=mode:gemma,eps:1e-5,offset:1,m_rounding:x_dtype dist=wide seed=3");
  kv::registry().normalize(c);
  int steps = 0;
  while (true) {
    auto s = kv::shrink_case(c).next();
    if (!s) break;
    c = *s;
    ++steps;
  }
  EXPECT_EQ(c.shape, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(kv::nondefault_count(c), 0) << c.str();
  EXPECT_EQ(c.seed, 3u);  // the seed is not shrunk: it decides the values
  EXPECT_LT(steps, 30);
}

TEST(FuzzGen, DropTailBugFailsOnlyWhereARowHasAPartialBlock) {
  // host.bug.drop_tail drops the last N % lanes squares of rows longer than a block.
  auto verdict = [](int64_t n, int warps) {
    Case c = kvtest::rms_case(false, "host.bug.drop_tail", {2, n}, {{"x", kv::DType::f32}}, "llama", 1);
    c.config["num_warps"] = std::to_string(warps);
    return kvtest::run_in_process(c)["verdict"].get<std::string>();
  };
  for (int warps : {1, 2, 4, 8})
    for (int64_t n : {64, 128, 4096}) EXPECT_EQ(verdict(n, warps), "pass") << n << " num_warps " << warps;
  for (int64_t n : {65, 113}) EXPECT_EQ(verdict(n, 1), "fail") << n;
  EXPECT_EQ(verdict(65, 2), "fail");
  EXPECT_EQ(verdict(113, 4), "pass");  // shorter than a block of 128 lanes
  EXPECT_EQ(verdict(129, 4), "fail");
}
