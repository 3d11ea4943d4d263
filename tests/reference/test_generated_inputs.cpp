// What the ops' generators put into the inputs where bugs hide (issue 18): every backward
// op's upstream gradient is drawn at random, never ones, under every reduction (FLCE's
// reduction=none dW bug upstream went unseen while every test backpropagated ones); the
// confident distributions drive p_y to 1 in every dtype (the p_y - 1 cancellation), and the
// fuzz generators draw them in every dtype.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <cmath>
#include <set>

#include "run/runner.hpp"
#include "core/error.hpp"
#include "fuzz/gen.hpp"
#include "fuzz/space.hpp"
#include "ops/op_base.hpp"

namespace {

struct Generated {
  kv::Case c;
  const kv::OpBinding* op;
  kv::TensorSet ts;
};

Generated generate(kv::Case c) {
  kv::registry().normalize(c);
  const auto& op = kv::registry().op(c.op);
  Generated g{c, &op, kv::allocate_tensors(c, op)};
  op.generate(c, g.ts);
  return g;
}

std::vector<double> values(const kv::TensorSet& ts, const std::string& name) {
  const auto v = ts.view(name);
  std::vector<double> out(static_cast<size_t>(v.desc.numel()));
  v.read(0, v.desc.numel(), out.data());
  return out;
}

/// A backward op's upstream gradients: its inputs named d* (dy, dc, dloss, dq_out, dk_out).
std::vector<std::string> upstream(const kv::Case& c, const kv::OpBinding& op) {
  std::vector<std::string> out;
  for (auto& t : op.tensors(c))
    if (t.role == kv::Role::input && t.name[0] == 'd') out.push_back(t.name);
  return out;
}

/// Rows whose target is a class, with their target.
std::vector<std::pair<int64_t, int64_t>> class_rows(const kv::TensorSet& ts, int64_t v) {
  std::vector<std::pair<int64_t, int64_t>> out;
  const auto t = values(ts, "target");
  for (size_t r = 0; r < t.size(); ++r)
    if (t[r] >= 0 && t[r] < static_cast<double>(v)) out.push_back({static_cast<int64_t>(r), static_cast<int64_t>(t[r])});
  return out;
}

/// 1 - p_t for one row of logits (their stored values), in long double: sum_v e^(x_v - x_t)
/// is 1 plus the others' share.
long double one_minus_p(const double* x, int64_t v, int64_t t) {
  long double s = 0;
  for (int64_t j = 0; j < v; ++j)
    if (j != t) s += std::exp(static_cast<long double>(x[j]) - static_cast<long double>(x[t]));
  return s / (1 + s);
}

constexpr double kFp32Ulp1 = 0x1p-24;  // an fp32 ulp just below 1

}  // namespace

TEST(GeneratedInputs, EveryBackwardOpDrawsItsUpstreamGradientAtRandomUnderEveryReduction) {
  // Per-row (or per-element) gradients differ across the tensor; a scalar one (mean, sum)
  // differs across seeds and is never 1 or 0. Each op at its example shape, fp32 and bf16.
  int checked = 0;
  for (auto* op : kv::registry().ops()) {
    const std::string name = op->name();
    if (name.size() < 4 || name.substr(name.size() - 4) != ".bwd") continue;
    std::vector<std::string> reductions = {""};
    for (auto& a : op->attrs())
      if (a.name == "reduction") reductions = a.choices;
    for (const std::string& red : reductions)
      for (kv::DType d : {kv::DType::f32, kv::DType::bf16}) {
        std::set<double> firsts;
        std::vector<std::string> names;
        for (uint64_t seed = 1; seed <= 6; ++seed) {
          kv::Case c;
          c.op = name;
          c.impl = "host";
          c.shape = op->example_shape();
          c.dtypes = {{"x", d}};
          if (!red.empty()) c.attrs["reduction"] = red;
          c.seed = seed;
          Generated g = generate(c);
          names = upstream(g.c, *g.op);
          ASSERT_FALSE(names.empty()) << name << ": no upstream gradient input";
          for (auto& n : names) {
            const auto v = values(g.ts, n);
            ASSERT_FALSE(v.empty()) << name << " " << n;
            for (double e : v) EXPECT_TRUE(std::isfinite(e)) << name << " " << n;
            if (v.size() > 1) {
              const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
              EXPECT_LT(*lo, *hi) << name << " reduction " << red << ": " << n << " is constant (" << *lo << ")";
            } else {
              EXPECT_NE(v[0], 1.0) << name << " reduction " << red << ": " << n << " is 1";
              EXPECT_NE(v[0], 0.0) << name << " reduction " << red << ": " << n << " is 0";
            }
            firsts.insert(v[0]);
            ++checked;
          }
        }
        EXPECT_GT(firsts.size(), 3u) << name << " reduction " << red << ": the upstream gradient repeats across seeds";
      }
  }
  EXPECT_GE(checked, 100);
}

TEST(GeneratedInputs, ConfidentCrossEntropyRowsReachPyOneInEveryDtype) {
  // Target logit 32 over 2 N(0,1) logits, exact in every dtype: 1 - p_y about V e^2 e^-32,
  // within a few fp32 ulps of 1 up to Llama-3's V. The reference's loss is then that small
  // (about 1 - p_y), and the gradient at the target, dloss (p_y - 1), a few fp32 ulps of
  // dloss, of the opposite sign: the value a kernel computing p_y - 1 after rounding p_y
  // to 1 loses.
  for (kv::DType d : {kv::DType::f32, kv::DType::bf16, kv::DType::f16})
    for (int64_t v : {1000, 32000, 128256}) {
      kv::Case c;
      c.op = "cross_entropy.bwd";
      c.impl = "host";
      c.shape = {4, v};
      c.dtypes = {{"x", d}};
      c.attrs["reduction"] = "none";
      c.dist = "confident";
      c.seed = 7;
      Generated g = generate(c);
      const auto x = values(g.ts, "logits"), dloss = values(g.ts, "dloss");
      const auto rows = class_rows(g.ts, v);
      ASSERT_GE(rows.size(), 2u);
      kv::Case fc = c;
      fc.op = "cross_entropy.fwd";
      Generated fwd = generate(fc);
      ASSERT_EQ(values(fwd.ts, "logits"), x) << "the forward draws the same logits";
      const auto loss = fwd.op->reference(fwd.c, fwd.ts).at("loss").v;
      const auto grad = g.op->reference(g.c, g.ts).at("dlogits").v;
      for (auto [r, t] : rows) {
        const long double q = one_minus_p(x.data() + r * v, v, t);
        EXPECT_GT(q, 0) << kv::dtype_name(d) << " V " << v << " row " << r;
        EXPECT_LT(q, 4 * kFp32Ulp1) << kv::dtype_name(d) << " V " << v << " row " << r << ": p_y not within 4 fp32 ulps of 1";
        EXPECT_GE(loss[static_cast<size_t>(r)], 0) << kv::dtype_name(d) << " V " << v;
        EXPECT_LT(loss[static_cast<size_t>(r)], 4 * kFp32Ulp1) << kv::dtype_name(d) << " V " << v << " row " << r;
        const double gt = grad[static_cast<size_t>(r * v + t)], dl = dloss[static_cast<size_t>(r)];
        EXPECT_LE(std::fabs(gt), 4 * kFp32Ulp1 * std::fabs(dl)) << kv::dtype_name(d) << " V " << v << " row " << r;
        EXPECT_LE(gt * dl, 0) << "the target's gradient has dloss's opposite sign";
      }
    }
}

TEST(GeneratedInputs, ConfidentMarginFlceRowsReachPyOneAtAnyHiddenSizeAndDtype) {
  // FLCE's `confident` leads by about 32 (1 - 1/sqrt(H)) only for large H; at H = 1..64 a
  // row's other logits reach past its target's. confident_margin leads by 40 at any H: the
  // logits of the stored x, W, b (in long double) give 1 - p_y below V e^-40.
  for (kv::DType d : {kv::DType::f32, kv::DType::bf16, kv::DType::f16})
    for (int64_t h : {1, 3, 16, 64}) {
      for (const char* dist : {"confident", "confident_margin"}) {
        kv::Case c;
        c.op = "fused_linear_cross_entropy.fwd";
        c.impl = "host";
        c.shape = {16, h, 2000};
        c.dtypes = {{"x", d}};
        c.attrs = {{"reduction", "none"}, {"bias", "true"}};
        c.dist = dist;
        c.seed = 11;
        Generated g = generate(c);
        const auto x = values(g.ts, "x"), w = values(g.ts, "weight"), b = values(g.ts, "bias");
        const int64_t v = c.shape[2];
        const auto rows = class_rows(g.ts, v);
        ASSERT_GE(rows.size(), 8u);
        int confident = 0;
        for (auto [r, t] : rows) {
          std::vector<double> l(static_cast<size_t>(v));
          for (int64_t j = 0; j < v; ++j) {
            long double s = b[static_cast<size_t>(j)];
            for (int64_t k = 0; k < h; ++k)
              s += static_cast<long double>(x[static_cast<size_t>(r * h + k)]) * w[static_cast<size_t>(j * h + k)];
            l[static_cast<size_t>(j)] = static_cast<double>(s);
          }
          confident += one_minus_p(l.data(), v, t) < kFp32Ulp1;
        }
        if (std::string(dist) == "confident_margin") {
          EXPECT_EQ(confident, static_cast<int>(rows.size())) << kv::dtype_name(d) << " H " << h;
          EXPECT_EQ(g.op->reference(g.c, g.ts).at("loss").v.size(), 16u);
        } else if (h == 1) {
          EXPECT_LT(confident, static_cast<int>(rows.size())) << "confident reaches p_y -> 1 at H = 1 after all";
        }
      }
    }
}

TEST(GeneratedInputs, TheFuzzGeneratorsDrawTheConfidentDistributionsInEveryDtype) {
  for (const char* op : {"cross_entropy.fwd", "cross_entropy.bwd", "fused_linear_cross_entropy.fwd",
                         "fused_linear_cross_entropy.bwd"}) {
    const kv::CaseSpace space = kv::make_space(op, "host");
    std::set<std::pair<std::string, kv::DType>> drawn;
    for (int i = 0; i < 1500; ++i) {
      kv::Case c = kv::draw_case(space, rc::Random(static_cast<uint64_t>(i)), i % 101, {});
      if (c.dist.rfind("confident", 0) != 0) continue;
      try {
        kv::registry().normalize(c);  // a draw the op refuses never runs
      } catch (const kv::UsageError&) {
        continue;
      }
      drawn.insert({c.dist, kv::main_dtype(c)});
    }
    for (const std::string dist : {"confident", "confident_margin"}) {
      if (std::string(op).rfind("cross_entropy", 0) == 0 && dist == "confident_margin") continue;
      for (kv::DType d : {kv::DType::f32, kv::DType::bf16, kv::DType::f16})
        EXPECT_TRUE(drawn.count({dist, d})) << op << ": " << dist << " never drawn in " << kv::dtype_name(d);
    }
  }
}
