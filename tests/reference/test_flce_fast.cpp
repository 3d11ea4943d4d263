// FLCE's dense-product pass (ops/flce_fast.cpp) against the term-by-term definition: its
// reference contains MPFR-256's value within its stated error, its enclosure under the host
// contract contains the generic pass's enclosure and is at most 1% wider (the float
// magnitude bounds' gamma_n(2^-24) factor, one accumulator rounding per product that the
// generic pass proves absent where a product is an fp32 number, and absolute terms below
// float's normal range; not for grad_rounding=x_dtype, where G's enclosure is rounded to
// bf16/fp16 values and a slightly wider one may take a whole further value). And each copy of the dense
// products (baseline, AVX2, AVX-512: those this CPU runs) within Higham's bound of an exact sum.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "check/judge.hpp"
#include "core/error.hpp"
#include "run/runner.hpp"
#include "op_cases.hpp"
#include "ops/flce_certify.hpp"
#include "ops/op_base.hpp"
#include "reference/gemm.hpp"
#include "test_util.hpp"

namespace {

std::vector<kv::Case> flce_cases() {
  std::vector<kv::Case> v;
  for (const char* op : {"fused_linear_cross_entropy.fwd", "fused_linear_cross_entropy.bwd"}) {
    v.push_back(kvtest::op_case(op, {7, 33, 40}, "bf16"));
    v.push_back(kvtest::op_case(op, {300, 20, 17}, "bf16", {{"bias", "true"}}));  // two row chunks
    v.push_back(kvtest::op_case(op, {5, 64, 30}, "fp32", {{"reduction", "none"}}, "large"));
    v.push_back(kvtest::op_case(op, {6, 40, 25}, "fp16", {{"reduction", "sum"}, {"label_smoothing", "0.1"}, {"z_loss", "1e-4"}}));
    v.push_back(kvtest::op_case(op, {70, 64, 500}, "bf16", {{"label_smoothing", "0.1"}, {"softcap", "30"}, {"bias", "true"}}));
    v.push_back(kvtest::op_case(op, {6, 24, 50}, "bf16", {{"softcap", "3"}, {"bias", "true"}, {"ignore_index", "2"}}, "wide"));
    v.push_back(kvtest::op_case(op, {9, 40, 60}, "bf16", {{"grad_rounding", "x_dtype"}, {"bias", "true"}, {"label_smoothing", "0.1"}}));
    v.push_back(kvtest::op_case(op, {7, 32, 45}, "fp16", {{"grad_rounding", "x_dtype"}, {"reduction", "sum"}}, "large"));
  }
  return v;
}

TEST(FlceFast, ContainsMpfrAndTheGenericEnclosure) {
  const auto env = kv::host_device();
  int64_t checked = 0;
  for (auto c : flce_cases()) {
    kv::registry().normalize(c);
    const auto& op = kv::registry().op(c.op);
    auto* ev = dynamic_cast<const kv::PolicyEval*>(&op);
    ASSERT_NE(ev, nullptr);
    kv::TensorSet ts = kv::allocate_tensors(c, op);
    op.generate(c, ts);
    kv::Contract k = kv::registry().impl(c.op, "host").contract(c, env.profile);
    kv::RefResult fast_ref;
    std::vector<kv::OutputEnclosure> fast, gen;
    op.evaluate(c, ts, k, fast_ref, fast);
    op.enclose(c, ts, k, gen);
    EXPECT_NE(fast_ref.method.find("+gemm:eigen-"), std::string::npos) << fast_ref.method;
    EXPECT_NE(fast_ref.method.find(c.op.find(".bwd") != std::string::npos ? "+sampled:mpfr-256(4)" : "+sampled:mpfr-256(2)"),
              std::string::npos)
        << fast_ref.method;
    // The ladder's target holds without refinement (label smoothing's p_v - 1/V cancels,
    // so each radius must be carried through the products, not bounded by a ratio).
    for (auto& t : op.tensors(c))
      for (size_t o = 0; o < fast.size(); ++o)
        if (fast[o].name == t.name)
          for (int64_t i : kv::ref_target_misses(fast_ref.outputs[o], fast[o], t.dtype))
            ADD_FAILURE() << c.str() << " " << t.name << "[" << i << "] v=" << fast_ref.outputs[o].v[i]
                          << " err=" << fast_ref.outputs[o].err[i] << " enclosure [" << fast[o].lo[i] << ", "
                          << fast[o].hi[i] << "]";
    auto hi = ev->eval_mpfr(c, ts, 256);
    // Absolute terms: per term of a sum, one accumulator underflow (2^-150), and the float
    // magnitude bounds' subnormal step (2^-149) times the other factor.
    double big = 1;
    for (const char* t : {"x", "weight"}) {
      auto tv = ts.view(t);
      for (int64_t i = 0; i < tv.desc.numel(); ++i) big = std::max(big, std::fabs(tv.get(i)));
    }
    const double slack = static_cast<double>(4 * (c.shape[0] + c.shape[1] + c.shape[2])) * 0x1p-149 * big;
    for (size_t o = 0; o < hi.size(); ++o)
      for (size_t i = 0; i < hi[o].size(); ++i) {
        const std::string at = c.str() + " " + fast_ref.outputs[o].name + "[" + std::to_string(i) + "]";
        const double v = fast_ref.outputs[o].v[i], err = fast_ref.outputs[o].err[i];
        ASSERT_LE(std::fabs((hi[o][i] - v).convert_to<double>()), err) << at;
        const double flo = fast[o].lo[i], fhi = fast[o].hi[i], glo = gen[o].lo[i], ghi = gen[o].hi[i];
        ASSERT_FALSE(fast[o].unverifiable[i]) << at;
        ASSERT_LE(flo, glo) << at;
        ASSERT_GE(fhi, ghi) << at;
        if (c.attr("grad_rounding") != "x_dtype")
          ASSERT_LE(fhi - flo, (ghi - glo) * 1.01 + slack) << at << " fast [" << flo << ", " << fhi << "] generic ["
                                                           << glo << ", " << ghi << "]";
        ++checked;
      }
  }
  EXPECT_GT(checked, 5000);
}

template <class S>
void check_products(const kv::GemmTable& t, bool dbl) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  const int64_t m = 37, n = 29, k = 301;
  auto fill = [&](std::vector<S>& v, int64_t len) {
    v.resize(static_cast<size_t>(len));
    for (auto& e : v) e = static_cast<S>(std::ldexp(nd(rng), static_cast<int>(rng() % 9) - 4));
  };
  std::vector<S> a, b, c;
  for (kv::GemmOp op : {kv::GemmOp::nt, kv::GemmOp::nn, kv::GemmOp::tn}) {
    fill(a, m * k), fill(b, n * k), fill(c, m * n);
    std::vector<S> c0 = c;
    for (bool acc : {false, true}) {
      std::vector<S> out = c0;
      auto A = [&](int64_t i, int64_t l) { return op == kv::GemmOp::tn ? a[l * m + i] : a[i * k + l]; };
      auto B = [&](int64_t l, int64_t j) { return op == kv::GemmOp::nt ? b[j * k + l] : b[l * n + j]; };
      const int64_t lda = op == kv::GemmOp::tn ? m : k, ldb = op == kv::GemmOp::nt ? k : n;
      if constexpr (std::is_same_v<S, double>) t.d(op, m, n, k, a.data(), lda, b.data(), ldb, out.data(), n, acc);
      else t.s(op, m, n, k, a.data(), lda, b.data(), ldb, out.data(), n, acc);
      const double u = dbl ? 0x1p-53 : 0x1p-24;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          long double s = acc ? static_cast<long double>(c0[i * n + j]) : 0.0L, mag = acc ? std::fabs(c0[i * n + j]) : 0.0;
          for (int64_t l = 0; l < k; ++l) {
            s += static_cast<long double>(A(i, l)) * B(l, j);
            mag += std::fabs(static_cast<long double>(A(i, l)) * B(l, j));
          }
          const double bound = kv::gamma_n(k + 2, u) * static_cast<double>(mag) * (1 + 0x1p-40);
          ASSERT_LE(std::fabs(static_cast<double>(s - out[i * n + j])), bound)
              << t.isa << " op " << static_cast<int>(op) << " acc " << acc << " (" << i << "," << j << ")";
        }
    }
  }
}

TEST(FlceFast, EveryProductCopyWithinHighamsBound) {
  auto all = kv::gemm_tables_supported();
  ASSERT_FALSE(all.empty());
  EXPECT_STREQ(all.back()->isa, "generic");
  for (auto* t : all) {
    check_products<double>(*t, true);
    check_products<float>(*t, false);
  }
}

// The certification samples catch a value outside its stated bound, and pass one inside.
TEST(FlceFast, CertificationSampleCatchesAViolatedBound) {
  std::vector<double> a = {0.1, 0.2, 0.3}, b = {1.5, -2.0, 0x1p-30};
  const double v = 0.1 * 1.5 - 0.2 * 2.0 + 0.3 * 0x1p-30;  // within a few ulps of the exact sum
  EXPECT_NO_THROW(kv::certify_samples({{"inside", a.data(), 1, b.data(), 1, 3, v, 0x1p-50}}));
  EXPECT_THROW(kv::certify_samples({{"outside", a.data(), 1, b.data(), 1, 3, v + 1e-9, 1e-12}}), kv::HarnessError);
}

}  // namespace

// FLCE backward over BT = 0 rows: dW is a sum over no rows, exactly 0. Its product buffers
// are allocated uninitialized and no chunk wrote them; in a process whose allocator hands
// back memory a larger case used, the reference read that memory ("reference value of
// dweight[0] lies outside its own enclosure", found by Strict.ACaseWithAnEmptyOutputNeverPasses
// in one whole-binary run). A larger case first, then BT = 0, a few times over.
TEST(FlceFast, NoRowsGiveAZeroDWeightWhateverTheMemoryHeld) {
  for (int round = 0; round < 3; ++round) {
    for (const char* bt : {"96", "0"}) {
      const std::string s = std::string("kv1 op=fused_linear_cross_entropy.bwd impl=host shape=") + bt +
                            "x64x300 dtypes=x:bf16 dist=normal seed=5 gen=1";
      const nlohmann::json j = kvtest::run_in_process(kv::Case::parse(s));
      SCOPED_TRACE(s);
      EXPECT_NE(j.value("verdict", ""), "error") << j.value("reason", "");
      if (std::string(bt) == "0") {
        EXPECT_EQ(j.value("verdict", ""), "skip") << j.value("reason", "");  // dx has no elements
        EXPECT_EQ(j["outputs"]["dweight"]["verdict"], "pass") << j["outputs"]["dweight"].dump();
      }
    }
  }
}
