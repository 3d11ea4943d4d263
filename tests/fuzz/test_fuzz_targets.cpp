// The generator's threshold targets (issue 18, fuzz/targets.hpp): over a few hundred
// indices it draws every size an impl declares as a threshold, and k * sm_count rows, at
// and beside the value; the profile (with --device-profile's overrides) reaches it and is
// kept in campaign.json; a batch companion can straddle a rows threshold.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>

#include "fuzz/batch.hpp"
#include "cli_util.hpp"
#include "core/error.hpp"
#include "fuzz/gen.hpp"
#include "fuzz/space.hpp"
#include "fuzz/targets.hpp"
#include "fuzz/target_coverage.hpp"

namespace {

using kv::Case;
using kvtest::coverage;
using kvtest::Coverage;
using kvtest::expect_covered;

kv::DeviceProfile profile_with_sms(int64_t sms) {
  kv::DeviceProfile p = kv::host_profile();
  p.sm_count = sms;
  return p;
}

}  // namespace

TEST(FuzzTargets, DeclaredThresholdsAndSmMultiplesAreDrawnAtAndBesideTheirValues) {
  // test.thresholds declares what a CUDA row kernel would (tests/test_impls.cpp): the
  // 16-byte chunk and 300 chunks on the row (1200 in fp32, 2400 in bf16/fp16), two dW
  // programs per SM on the rows; the generator adds k * sm_count rows. At 108 SMs (an A100)
  // none of 1199..1201, 2399..2401, 108, 215..217, 323..325, 431..433 is a special size:
  // without the targets they are all but never drawn.
  const kv::CaseSpace space = kv::make_space("rms_norm.bwd", "test.thresholds");
  const kv::GenLimits lim{int64_t(1) << 20, profile_with_sms(108)};
  const Coverage cov = coverage(space, lim, 1000);
  expect_covered(cov, 250, "test.thresholds at 108 SMs");
  for (int64_t v : {107, 108, 109, 215, 216, 217, 431, 432, 433, 1199, 1200, 1201, 2399, 2400, 2401}) {
    bool found = false;
    for (auto& k : cov.hit) found |= std::get<1>(k) + std::get<2>(k) == v;
    EXPECT_TRUE(found) << v << " never drawn";
  }
}

TEST(FuzzTargets, TheProfileReachesTheGeneratorAndDrawsStayDeterministic) {
  // The same index under another SM count aims its rows elsewhere (132: an H100 SXM);
  // under one profile the same (index, size) always gives the same case.
  const kv::CaseSpace space = kv::make_space("rms_norm.bwd", "host");
  const kv::GenLimits h100{int64_t(1) << 20, profile_with_sms(132)}, a100{int64_t(1) << 20, profile_with_sms(108)};
  std::set<int64_t> rows132, rows108;
  int differ = 0;
  for (int i = 0; i < 600; ++i) {
    const Case a = kv::draw_case(space, rc::Random(static_cast<uint64_t>(i)), i % 101, h100);
    EXPECT_EQ(a, kv::draw_case(space, rc::Random(static_cast<uint64_t>(i)), i % 101, h100)) << i;
    const Case b = kv::draw_case(space, rc::Random(static_cast<uint64_t>(i)), i % 101, a100);
    differ += a != b;
    rows132.insert(a.shape.front());
    rows108.insert(b.shape.front());
  }
  for (int64_t r : {131, 132, 133, 264}) EXPECT_TRUE(rows132.count(r)) << r << " rows never drawn at 132 SMs";
  for (int64_t r : {107, 108, 109, 216}) EXPECT_TRUE(rows108.count(r)) << r << " rows never drawn at 108 SMs";
  EXPECT_FALSE(rows108.count(264)) << "a 132-SM target drawn under a 108-SM profile";
  EXPECT_GT(differ, 0);
}

TEST(FuzzTargets, HostImplsDeclareTheirBlockingAndTheGeneratorDrawsIt) {
  // The host impls sum a row over 32 * num_warps lanes, columns over rows in chunks of 64,
  // and the host RMSNorm's dW over its partials (64 fixed, sm_count per_sm): with the
  // knobs at one value each, every such size is drawn at and beside its value.
  for (const std::string op : {"softmax.fwd", "cross_entropy.bwd", "layer_norm.bwd", "rms_norm.bwd",
                               "fused_linear_cross_entropy.bwd"}) {
    kv::CaseSpace space = kv::make_space(op, "host");
    for (auto& k : space.knobs) k.values = {k.name == "dw" ? "per_sm" : k.values.front()};
    const kv::GenLimits lim{int64_t(1) << 20, profile_with_sms(100)};
    Case ex;
    ex.op = op;
    ex.impl = "host";
    ex.shape = space.example;
    ex.dtypes = {{"x", kv::DType::f32}};
    for (auto& k : space.knobs) ex.config[k.name] = k.values.front();
    kv::registry().normalize(ex);
    const auto declared = kv::registry().impl(op, "host").thresholds(ex, lim.profile);
    ASSERT_FALSE(declared.empty()) << op;
    bool lanes = false;
    for (auto& t : declared) lanes |= std::count(t.values.begin(), t.values.end(), 128) > 0;  // num_warps 4
    EXPECT_TRUE(lanes) << op << ": no threshold at 128 lanes";
    expect_covered(coverage(space, lim, 800), 200, op + " host");
  }
}

TEST(FuzzTargets, MovedShapesStayUnderTheCapAndTheOpsAcceptThem) {
  // Every draw of every host op under a small cap is within the cap, and a draw the op
  // refuses is refused without its move too (the same draw with GenLimits::aim off): a
  // move that would break an attribute drawn for the old shape (a 3D grid, an mrope
  // section) is not taken. Some draws do move.
  auto refused = [](Case c) {
    try {
      kv::registry().normalize(c);
      return false;
    } catch (const kv::UsageError&) {
      return true;
    }
  };
  for (auto* op : kv::registry().ops()) {
    const kv::CaseSpace space = kv::make_space(op->name(), "host");
    kv::GenLimits lim{int64_t(1) << 14, profile_with_sms(132)}, still = lim;
    still.aim = false;
    int moved = 0;
    for (int i = 0; i < 300; ++i) {
      const Case c = kv::draw_case(space, rc::Random(static_cast<uint64_t>(i)), i % 101, lim);
      const Case c0 = kv::draw_case(space, rc::Random(static_cast<uint64_t>(i)), i % 101, still);
      EXPECT_LE(kv::shape_elements(c.shape), lim.max_elements) << c.str();
      moved += c.shape != c0.shape;
      if (c.shape != c0.shape) EXPECT_TRUE(!refused(c) || refused(c0)) << c.str() << " refused, unmoved " << c0.str() << " not";
    }
    EXPECT_GT(moved, 60) << op->name();
  }
}

TEST(FuzzTargets, ABatchCompanionCanStraddleTheNearestRowsThreshold) {
  // 100 rows under a 108-SM profile: test.thresholds declares 216 rows, the generator 108:
  // the companion's first dim is 109 (past 108), and a case already past every target has
  // none.
  Case c = Case::parse("kv1 op=rms_norm.bwd impl=test.thresholds shape=100x64 dtypes=x:fp32 seed=1");
  kv::registry().normalize(c);
  EXPECT_EQ(kv::straddling_first_dim(c, profile_with_sms(108), int64_t(1) << 20), 109);
  c.shape = {10, 10, 64};  // rows 100 over two dims: 11 x 10 = 110 > 108
  EXPECT_EQ(kv::straddling_first_dim(c, profile_with_sms(108), int64_t(1) << 20), 11);
  c.shape = {5000, 64};
  EXPECT_FALSE(kv::straddling_first_dim(c, profile_with_sms(108), int64_t(1) << 20));
  c.shape = {100, 64};
  EXPECT_FALSE(kv::straddling_first_dim(c, profile_with_sms(108), 6000)) << "109 x 64 is over the cap";
}

TEST(FuzzTargets, TheBatchCompanionStraddlesTheNearestRowsThreshold) {
  // fuzz/batch.cpp builds the companion past the threshold above the case's rows (108
  // under a 108-SM profile for 100 rows), so a batch_invariant claim is checked across it;
  // an explicit extra_rows (a replay) wins, and without a profile the default growth holds.
  Case c = Case::parse("kv1 op=rms_norm.bwd impl=test.thresholds shape=100x64 dtypes=x:fp32 seed=1");
  kv::registry().normalize(c);
  const nlohmann::json claims = {{"contract", {{"determinism", {{"dx", {"run_to_run", "batch_invariant"}}}}}}};
  const kv::GenLimits lim{int64_t(1) << 20, profile_with_sms(108)};
  auto big = kv::batch_companion(c, claims, 0, &lim);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->shape, (std::vector<int64_t>{109, 64}));
  EXPECT_LE(c.shape[0], 108);
  EXPECT_GT(big->shape[0], 108) << "the pair straddles the 108-row threshold";
  EXPECT_EQ(kv::batch_companion(c, claims, 5, &lim)->shape[0], 105);
  EXPECT_EQ(kv::batch_companion(c, claims)->shape[0], 102) << "1 + 100 % 3 rows more";
  const kv::GenLimits small{6000, profile_with_sms(108)};
  EXPECT_EQ(kv::batch_companion(c, claims, 0, &small)->shape[0], 102) << "109 x 64 is over the cap: the default";
  EXPECT_FALSE(kv::batch_companion(c, nlohmann::json::object(), 0, &lim)) << "no batch_invariant claim";
}

TEST(FuzzTargets, TheCampaignKeepsItsProfileAndDeviceProfileOverridesReachIt) {
  const std::string dir = kvtest::tmpdir("targets_profile");
  const auto r = kvtest::sh(KV_BIN, "fuzz --device host --op rms_norm.bwd --budget-cases 0 --curated none "
                                    "--device-profile sm_count=108 --seed 5 --out " + dir);
  ASSERT_EQ(r.code, 0) << r.text;
  std::ifstream f(dir + "/campaign.json");
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["profile"]["sm_count"], 108);
  EXPECT_EQ(j["generator"], 3);
}
