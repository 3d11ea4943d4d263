// Cross-entropy's named edge semantics (issue 20): empty_mean (`mean` over rows that are all
// ignored: NaN, PyTorch's 0/0, or 0) and ignored_grad (an ignored row's gradient: 0 * softmax,
// PyTorch's, NaN throughout where the row holds +inf or NaN; or an exact 0), for
// cross_entropy and FLCE. The reference gives each choice exactly; the host impl (the
// definition in fp32) passes under each; an output of the other choice fails either way:
// 0 where NaN is named, NaN where 0 is.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "ce_cases.hpp"
#include "check/judge.hpp"
#include "core/device.hpp"
#include "op_cases.hpp"
#include "run/runner.hpp"
#include "test_util.hpp"

namespace {

using Attrs = std::map<std::string, std::string>;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A case with inputs set by hand, its reference and enclosure under the host contract,
/// and the host impl's outputs.
struct Checked {
  kv::Case c;
  kv::TensorSet ts;
  kv::RefResult ref;
  std::vector<kv::OutputEnclosure> enc;

  const kv::OutputRef& out_ref(const std::string& name) const { return ref.at(name); }
  /// The verdict of output `name` as it stands in ts.
  std::string verdict(const std::string& name) {
    for (size_t o = 0; o < enc.size(); ++o)
      if (enc[o].name == name) return kv::judge(ts.view(name), ref.at(name), enc[o], false).verdict;
    ADD_FAILURE() << "no output " << name;
    return "";
  }
};

/// The case's inputs drawn, then changed by `set`; the reference, the enclosure and the
/// host impl's outputs over them.
Checked check(kv::Case c, const std::function<void(kv::TensorSet&)>& set) {
  kv::registry().normalize(c);
  const auto& op = kv::registry().op(c.op);
  Checked k{c, kv::allocate_tensors(c, op), {}, {}};
  op.generate(c, k.ts);
  set(k.ts);
  const auto& impl = kv::registry().impl(c.op, "host");
  const kv::DeviceProfile prof = kv::host_profile();
  op.evaluate(c, k.ts, impl.contract(c, prof), k.ref, k.enc);
  for (auto& t : op.tensors(c))
    if (t.role == kv::Role::output) k.ts.at(t.name).buffer->poison(t.dtype);
  impl.run(k.ts, c, prof);
  return k;
}

void set_targets(kv::TensorSet& ts, std::initializer_list<double> t) {
  auto v = ts.view("target");
  int64_t r = 0;
  for (double x : t) v.store(r++, x);
}

/// Writes v over elements [b, e) of output `name`.
void plant(Checked& k, const std::string& name, int64_t b, int64_t e, double v) {
  auto o = k.ts.view(name);
  for (int64_t i = b; i < e; ++i) o.store(i, v);
}

}  // namespace

// Mean over rows that are all ignored: NaN under empty_mean=nan (the default), 0 under
// zero; sum gives 0 under either. The host impl passes; the other choice's value fails.
TEST(CeEdgeSemantics, EmptyMeanIsTheNamedValueAndTheOtherOneFails) {
  for (const char* op : {"cross_entropy.fwd", "fused_linear_cross_entropy.fwd"})
    for (const char* em : {"nan", "zero"})
      for (const char* red : {"mean", "sum"})
        for (const char* ls : {"0", "0.1"}) {
          const bool flce = std::string(op) != "cross_entropy.fwd";
          Attrs a = {{"reduction", red}, {"label_smoothing", ls}};
          if (!flce) a["weights"] = std::string(ls) == "0" ? "none" : "class";
          if (std::string(em) != "nan") a["empty_mean"] = em;  // nan: the default, left out
          kv::Case c = kvtest::op_case(op, flce ? std::vector<int64_t>{3, 16, 10} : std::vector<int64_t>{3, 10}, "fp32", a);
          Checked k = check(c, [](kv::TensorSet& ts) { set_targets(ts, {-100, -100, -100}); });
          const bool nan = std::string(red) == "mean" && std::string(em) == "nan";
          const double v = k.out_ref("loss").v[0];
          const std::string what = k.c.str();
          if (nan) EXPECT_TRUE(std::isnan(v)) << what << ": " << v;
          else EXPECT_EQ(v, 0.0) << what;
          EXPECT_EQ(k.verdict("loss"), "pass") << what;
          plant(k, "loss", 0, 1, nan ? 0.0 : kNan);
          EXPECT_EQ(k.verdict("loss"), "fail") << what << ": the other choice passed";
        }
}

// The default is PyTorch's, and a case line without the attributes means it: mean over no
// rows through the runner (a row drawn ignored) is NaN, and a NaN planted under zero fails.
TEST(CeEdgeSemantics, DefaultsArePyTorchsThroughTheRunner) {
  kv::Case c = kvtest::op_case("cross_entropy.fwd", {1, 50}, "bf16");
  kv::registry().normalize(c);
  EXPECT_EQ(c.attr("empty_mean"), "nan");
  EXPECT_EQ(c.attr("ignored_grad"), "propagate");
  c.seed = kvtest::seed_ignoring_every_row(c);
  ASSERT_LT(c.seed, 500u) << "no seed below 500 ignores the row";
  for (const char* em : {"nan", "zero"}) {
    c.attrs["empty_mean"] = em;
    const auto j = kvtest::run_in_process(c);
    EXPECT_EQ(j["verdict"], "pass") << j.dump().substr(0, 2000);
    EXPECT_EQ(j["outputs"]["loss"]["n_nan_expected"], std::string(em) == "nan" ? 1 : 0) << j.dump().substr(0, 2000);
  }
  kv::Case bad = c;  // empty_mean=zero, NaN planted over the loss
  bad.impl = "test.contract_env";
  kvtest::Env nan_at("KV_TEST_NAN_AT", "0");
  EXPECT_EQ(kvtest::run_in_process(bad)["verdict"], "fail");
}

// An ignored row's gradient over logits with +inf (row 0), NaN (row 1), -inf (row 2) and all
// -inf (row 4), and a row not ignored (row 3): under propagate rows 0, 1 and 4 are NaN
// throughout and row 2 is 0; under zero every ignored row is an exact 0. Under softcap the
// infinities become finite logits (rows 0 and 4 then 0).
TEST(CeEdgeSemantics, IgnoredGradIsTheNamedValueAndTheOtherOneFails) {
  const int64_t v = 8;
  for (const char* ig : {"propagate", "zero"})
    for (const char* red : {"mean", "none"})
      for (const char* cap : {"0", "5"}) {
        Attrs a = {{"reduction", red}, {"softcap", cap}, {"ignored_grad", ig}};
        Checked k = check(kvtest::op_case("cross_entropy.bwd", {5, v}, "fp32", a), [&](kv::TensorSet& ts) {
          set_targets(ts, {-100, -100, -100, 2, -100});
          auto x = ts.view("logits");
          x.store(0 * v + 3, kInf);
          x.store(1 * v + 5, kNan);
          x.store(2 * v + 5, -kInf);
          for (int64_t j = 0; j < v; ++j) x.store(4 * v + j, -kInf);
        });
        const std::string what = k.c.str();
        const bool prop = std::string(ig) == "propagate", capped = std::string(cap) != "0";
        const auto& g = k.out_ref("dlogits").v;
        for (int64_t r : {0, 1, 2, 4})
          for (int64_t j = 0; j < v; ++j) {
            const bool nan = prop && (r == 1 || ((r == 0 || r == 4) && !capped));
            if (nan) EXPECT_TRUE(std::isnan(g[r * v + j])) << what << " row " << r << " [" << j << "]";
            else EXPECT_EQ(g[r * v + j], 0.0) << what << " row " << r << " [" << j << "]";
          }
        for (int64_t j = 0; j < v; ++j) EXPECT_TRUE(std::isfinite(g[3 * v + j])) << what;
        EXPECT_EQ(k.verdict("dlogits"), "pass") << what;
        // The other choice in row 1 (NaN under propagate, whatever the softcap).
        plant(k, "dlogits", 1 * v, 2 * v, prop ? 0.0 : kNan);
        EXPECT_EQ(k.verdict("dlogits"), "fail") << what << ": the other choice passed in row 1";
        plant(k, "dlogits", 1 * v, 2 * v, prop ? kNan : 0.0);
        EXPECT_EQ(k.verdict("dlogits"), "pass") << what;
        // NaN in row 2 (-inf: 0 under either choice) fails.
        plant(k, "dlogits", 2 * v, 3 * v, kNan);
        EXPECT_EQ(k.verdict("dlogits"), "fail") << what << ": NaN passed where 0 is defined";
      }
}

// FLCE: a NaN in an ignored row's x makes its logits NaN. Under propagate that row's dx is
// NaN and so is all of dW (a sum over rows); under zero dx's row is 0 and only dW's column
// that meets the NaN x is NaN. The host impl passes under each; the other choice's dx fails.
TEST(CeEdgeSemantics, FlceIgnoredGradReachesDxAndDw) {
  const int64_t h = 16;
  for (const char* ig : {"propagate", "zero"}) {
    Checked k = check(kvtest::op_case("fused_linear_cross_entropy.bwd", {3, h, 10}, "fp32", {{"ignored_grad", ig}}),
                      [&](kv::TensorSet& ts) {
                        set_targets(ts, {4, -100, 7});
                        ts.view("x").store(1 * h + 5, kNan);
                      });
    const std::string what = k.c.str();
    const bool prop = std::string(ig) == "propagate";
    const auto &dx = k.out_ref("dx").v, &dw = k.out_ref("dweight").v;
    for (int64_t i = 0; i < h; ++i) {
      EXPECT_EQ(std::isnan(dx[1 * h + i]), prop) << what << " dx[1, " << i << "]";
      if (!prop) EXPECT_EQ(dx[1 * h + i], 0.0) << what;
      EXPECT_TRUE(std::isfinite(dx[0 * h + i])) << what;
    }
    // dW = sum_r G_r^T x_r: x's NaN meets row 1's G in column 5 either way (0 * NaN).
    for (size_t i = 0; i < dw.size(); ++i) EXPECT_EQ(std::isnan(dw[i]), prop || i % h == 5) << what << " dW[" << i << "]";
    EXPECT_EQ(k.verdict("dx"), "pass") << what;
    EXPECT_EQ(k.verdict("dweight"), "pass") << what;
    plant(k, "dx", 1 * h, 2 * h, prop ? 0.0 : kNan);
    EXPECT_EQ(k.verdict("dx"), "fail") << what << ": the other choice passed";
  }
}

// With every row ignored under mean the gradient is 0 (finite logits) under either choice,
// and the case line names the choices so a replay is exact.
TEST(CeEdgeSemantics, AllIgnoredBackwardIsZeroAndTheCaseLineNamesTheChoices) {
  for (const char* ig : {"propagate", "zero"}) {
    Checked k = check(kvtest::op_case("cross_entropy.bwd", {2, 6}, "fp32", {{"ignored_grad", ig}}),
                      [](kv::TensorSet& ts) { set_targets(ts, {-100, -100}); });
    for (double e : k.out_ref("dlogits").v) EXPECT_EQ(e, 0.0) << k.c.str();
    EXPECT_EQ(k.verdict("dlogits"), "pass") << k.c.str();
    EXPECT_NE(k.c.str().find(std::string("ignored_grad:") + ig), std::string::npos) << k.c.str();
    EXPECT_NE(k.c.str().find("empty_mean:nan"), std::string::npos) << k.c.str();
  }
}
