// The references of every op against a 256-bit MPFR instance of the same
// definition: the double-enclosure reference's value lies within its stated error of
// MPFR's; MPFI intervals contain MPFR's value; double-double and double agree with it to
// their precision; the MPFR value lies inside the enclosure under a host contract; and
// closed forms (rope at angle 0, CE of equal logits, softmax of a constant row, swiglu at 0).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "check/judge.hpp"
#include "run/runner.hpp"
#include "op_cases.hpp"
#include "test_util.hpp"
#include "ops/op_base.hpp"

namespace {

struct Prepared {
  kv::Case c;
  const kv::OpBinding* op;
  const kv::PolicyEval* ev;
  kv::TensorSet ts;
};

Prepared prepare(kv::Case c) {
  kv::registry().normalize(c);
  const auto& op = kv::registry().op(c.op);
  Prepared p{c, &op, dynamic_cast<const kv::PolicyEval*>(&op), kv::allocate_tensors(c, op)};
  op.generate(c, p.ts);
  return p;
}

double mp(const kv::mpfr_float& v) { return v.convert_to<double>(); }

TEST(OpsReference, DoubleEnclosureWithinItsStatedErrorOfMpfr256) {
  int64_t checked = 0;
  for (auto& c0 : kvtest::representative_cases()) {
    Prepared p = prepare(c0);
    ASSERT_NE(p.ev, nullptr) << c0.op;
    kv::RefResult ref = p.op->reference(p.c, p.ts);
    auto hi = p.ev->eval_mpfr(p.c, p.ts, 256);
    auto dd = p.ev->eval_dd(p.c, p.ts);
    auto dbl = p.ev->eval_double(p.c, p.ts);
    for (size_t o = 0; o < hi.size(); ++o)
      for (size_t i = 0; i < hi[o].size(); ++i) {
        const double v = ref.outputs[o].v[i], err = ref.outputs[o].err[i];
        kv::mpfr_float diff = abs(hi[o][i] - v);
        ASSERT_LE(mp(diff), err) << p.c.str() << " " << ref.outputs[o].name << "[" << i << "] v=" << v
                                 << " mpfr=" << mp(hi[o][i]) << " err=" << err;
        // double-double within that same stated error (it is far more precise); plain double
        // (the enclosure's midpoint computation, in places in another order) within twice it.
        const double tol = err * (1 + 0x1p-20) + 0x1p-1060;
        ASSERT_LE(std::fabs(to_double(dd[o][i]) - mp(hi[o][i])), tol) << p.c.str() << " dd " << ref.outputs[o].name << "[" << i << "]";
        ASSERT_LE(std::fabs(dbl[o][i] - mp(hi[o][i])), 2 * tol + std::ldexp(std::fabs(v), -50)) << p.c.str() << " double " << ref.outputs[o].name << "[" << i << "]";
        ++checked;
      }
  }
  EXPECT_GT(checked, 10000);
}

// The precision ladder: after refinement every element's reference error is at most 2^-16
// of its enclosure's half-width under a host contract (or of half an output ulp).
TEST(OpsReference, LadderMeetsTheTargetAfterRefinement) {
  const auto env = kv::host_device();
  int64_t refined = 0;
  for (auto& c0 : kvtest::representative_cases()) {
    Prepared p = prepare(c0);
    kv::RefResult ref = p.op->reference(p.c, p.ts);
    kv::Contract k = kv::registry().impl(p.c.op, "host").contract(p.c, env.profile);
    std::vector<kv::OutputEnclosure> enc;
    p.op->enclose(p.c, p.ts, k, enc);
    auto outs = p.op->tensors(p.c);
    auto dtype_of = [&](const std::string& n) {
      for (auto& t : outs)
        if (t.name == n) return t.dtype;
      return kv::DType::f32;
    };
    std::map<std::string, std::vector<int64_t>> misses;
    for (size_t o = 0; o < enc.size(); ++o) {
      auto m = kv::ref_target_misses(ref.outputs[o], enc[o], dtype_of(enc[o].name));
      refined += static_cast<int64_t>(m.size());
      if (!m.empty()) misses[enc[o].name] = m;
    }
    if (misses.empty()) continue;
    p.op->refine(p.c, p.ts, ref, misses);
    EXPECT_NE(ref.method.find("certified:mpfi-"), std::string::npos) << p.c.str();
    auto hi = p.ev->eval_mpfr(p.c, p.ts, 256);
    for (size_t o = 0; o < enc.size(); ++o) {
      EXPECT_TRUE(kv::ref_target_misses(ref.outputs[o], enc[o], dtype_of(enc[o].name)).empty()) << p.c.str();
      for (int64_t i : misses[enc[o].name])
        ASSERT_LE(mp(abs(hi[o][i] - ref.outputs[o].v[i])), ref.outputs[o].err[i] + 0x1p-1060) << p.c.str();
    }
  }
  std::printf("elements refined to meet the target: %lld\n", static_cast<long long>(refined));
}

TEST(OpsReference, MpfiIntervalsContainTheMpfrValue) {
  for (auto& c0 : kvtest::representative_cases()) {
    Prepared p = prepare(c0);
    auto iv = p.ev->eval_mpfi(p.c, p.ts, 128);
    auto hi = p.ev->eval_mpfr(p.c, p.ts, 256);
    for (size_t o = 0; o < hi.size(); ++o)
      for (size_t i = 0; i < hi[o].size(); ++i) {
        kv::set_mpfr_bits(256);
        kv::mpfr_float lo = boost::multiprecision::lower(iv[o][i]), up = boost::multiprecision::upper(iv[o][i]);
        ASSERT_TRUE(lo <= hi[o][i] && hi[o][i] <= up) << p.c.str() << " [" << o << "][" << i << "]";

      }
  }
}

TEST(OpsReference, MpfrValueInsideTheEnclosureUnderAHostContract) {
  const auto env = kv::host_device();
  for (auto& c0 : kvtest::representative_cases()) {
    Prepared p = prepare(c0);
    const auto& impl = kv::registry().impl(p.c.op, "host");
    kv::Contract k = impl.contract(p.c, env.profile);
    std::vector<kv::OutputEnclosure> enc;
    p.op->enclose(p.c, p.ts, k, enc);
    auto hi = p.ev->eval_mpfr(p.c, p.ts, 256);
    for (size_t o = 0; o < hi.size(); ++o)
      for (size_t i = 0; i < hi[o].size(); ++i) {
        double v = mp(hi[o][i]);
        ASSERT_TRUE(enc[o].lo[i] <= v && v <= enc[o].hi[i])
            << p.c.str() << " " << enc[o].name << "[" << i << "] " << enc[o].lo[i] << " <= " << v << " <= " << enc[o].hi[i];
      }
  }
}

// Closed forms, through the references (values and their bounds).
TEST(OpsReference, ClosedForms) {
  // softmax of a constant row is uniform; CE of equal logits is log V.
  {
    Prepared p = prepare(kvtest::op_case("softmax.fwd", {2, 7}, "fp32"));
    auto x = p.ts.view("x");
    for (int64_t i = 0; i < 14; ++i) x.store(i, 3.5);
    auto r = p.op->reference(p.c, p.ts);
    for (double v : r.outputs[0].v) EXPECT_NEAR(v, 1.0 / 7.0, 1e-15);
  }
  {
    Prepared p = prepare(kvtest::op_case("cross_entropy.fwd", {3, 1000}, "fp32", {{"reduction", "none"}}));
    auto x = p.ts.view("logits"), t = p.ts.view("target");
    for (int64_t i = 0; i < 3000; ++i) x.store(i, -2.25);
    for (int64_t r = 0; r < 3; ++r) t.store(r, 17);
    auto r = p.op->reference(p.c, p.ts);
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_NEAR(r.outputs[0].v[i], std::log(1000.0), 1e-6);  // lse's fp32 constant rounding of nothing: exact math
      EXPECT_LE(std::fabs(r.outputs[0].v[i] - std::log(1000.0)), r.outputs[0].err[i] + 1e-15);
    }
  }
  // swiglu and geglu at a = 0 are 0 (and so is db).
  for (const char* op : {"swiglu.fwd", "geglu.fwd"}) {
    Prepared p = prepare(kvtest::op_case(op, {1, 9}, "bf16"));
    auto a = p.ts.view("a");
    for (int64_t i = 0; i < 9; ++i) a.store(i, 0.0);
    auto r = p.op->reference(p.c, p.ts);
    for (size_t i = 0; i < 9; ++i) {
      EXPECT_EQ(r.outputs[0].v[i], 0.0);
      EXPECT_EQ(r.outputs[0].err[i], 0.0);
    }
  }
  // rope at angle 0 (cos 1, sin 0) is the identity, exactly, in every layout and scheme.
  for (const char* pos : {"1d", "mrope", "3d"})
    for (const char* layout : {"rotate_half", "interleaved"})
      for (const char* op : {"rope.fwd", "rope.bwd"}) {
        Prepared p = prepare(kvtest::op_case(op, {2, 6, 2, 12}, "bf16", {{"positions", pos}, {"layout", layout}}));
        for (auto& t : p.op->tensors(p.c)) {
          if (t.name.rfind("cos", 0) == 0 || t.name.rfind("sin", 0) == 0) {
            auto v = p.ts.view(t.name);
            for (int64_t i = 0; i < v.desc.numel(); ++i) v.store(i, t.name[0] == 'c' ? 1.0 : 0.0);
          }
        }
        auto r = p.op->reference(p.c, p.ts);
        auto in0 = p.ts.view(p.op->tensors(p.c)[0].name);
        for (int64_t i = 0; i < in0.desc.numel(); ++i) {
          ASSERT_EQ(r.outputs[0].v[i], in0.get(i)) << p.c.str();
          ASSERT_EQ(r.outputs[0].err[i], 0.0);
        }
      }
}

}  // namespace

// evaluate() (reference and enclosure in one pass over the dual policy, or an op's own
// fast path) gives the same bits as reference() and enclose() separately, for every op
// (rms_norm included) at every representative case.
TEST(OpsReference, OnePassEvaluateEqualsSeparatePasses) {
  const auto env = kv::host_device();
  auto cases = kvtest::representative_cases();
  for (const char* s : {"kv1 op=rms_norm.fwd impl=host shape=5x300 dtypes=x:bf16 dist=normal seed=3 gen=1",
                        "kv1 op=rms_norm.bwd impl=host shape=70x33 dtypes=x:fp16 dist=normal seed=3 gen=1",
                        "kv1 op=rope.bwd impl=host shape=2x40x3x12 dtypes=x:bf16 attrs=positions:3d,layout:interleaved,k_heads:1 dist=normal seed=5 gen=1",
                        "kv1 op=rope.fwd impl=host shape=3x9x2x8 dtypes=x:fp16 dist=wide seed=6 gen=1"})
    cases.push_back(kv::Case::parse(s));
  for (auto& c0 : cases) {
    if (c0.op.rfind("fused_linear_cross_entropy", 0) == 0) continue;  // its own bounds: test_flce_fast.cpp
    Prepared p = prepare(c0);
    kv::Contract k = kv::registry().impl(p.c.op, "host").contract(p.c, env.profile);
    kv::RefResult r1 = p.op->reference(p.c, p.ts), r2;
    std::vector<kv::OutputEnclosure> e1, e2;
    p.op->enclose(p.c, p.ts, k, e1);
    p.op->evaluate(p.c, p.ts, k, r2, e2);
    ASSERT_EQ(r1.method, r2.method);
    ASSERT_EQ(r1.outputs.size(), r2.outputs.size());
    ASSERT_EQ(e1.size(), e2.size());
    for (size_t o = 0; o < r1.outputs.size(); ++o) {
      ASSERT_EQ(r1.outputs[o].name, r2.outputs[o].name);
      for (size_t i = 0; i < r1.outputs[o].v.size(); ++i) {
        ASSERT_EQ(r1.outputs[o].v[i], r2.outputs[o].v[i]) << p.c.str() << " " << r1.outputs[o].name << "[" << i << "]";
        ASSERT_EQ(r1.outputs[o].err[i], r2.outputs[o].err[i]) << p.c.str() << " " << r1.outputs[o].name << "[" << i << "]";
      }
    }
    for (size_t o = 0; o < e1.size(); ++o)
      for (size_t i = 0; i < e1[o].lo.size(); ++i) {
        ASSERT_EQ(e1[o].lo[i], e2[o].lo[i]) << p.c.str() << " " << e1[o].name << "[" << i << "]";
        ASSERT_EQ(e1[o].hi[i], e2[o].hi[i]) << p.c.str() << " " << e1[o].name << "[" << i << "]";
        ASSERT_EQ(e1[o].unverifiable[i], e2[o].unverifiable[i]) << p.c.str() << " " << e1[o].name << "[" << i << "]";
      }
  }
}

// The ladder's refinement escalates MPFI precision until the intervals are narrow, on the
// cancellations the a-priori bound cannot see through: the softcap's 1 - tanh^2 deep in
// saturation (x/s = 100: tanh is 1 - 2e^-200, so 1 - tanh^2 = 4e^-200 ~ 2^-286.5 needs
// about 350 bits to come out narrow; MPFR at 128 and 256 bits both give exactly 0 there,
// so two precisions agreeing proves nothing), CE with p_y -> 1 over V = 128256 (the loss ~ 5e-13 is lse - z_t), and
// LayerNorm with a large mean. Each refined element ends within its stated error of MPFR
// at 1024 bits.
TEST(OpsReference, RefineEscalatesUntilTheIntervalsAreNarrow) {
  struct Probe {
    kv::Case c;
    std::string out;
    std::vector<int64_t> idx;
    std::string method;  // the precision expected to give narrow intervals
    std::function<void(kv::TensorSet&)> set;
  };
  std::vector<Probe> probes;
  probes.push_back({kvtest::op_case("cross_entropy.bwd", {1, 8}, "fp32", {{"softcap", "1"}, {"reduction", "sum"}}),
                    "dlogits", {2, 5}, "mpfi-512", [](kv::TensorSet& ts) {
                      auto x = ts.view("logits");
                      for (int64_t i = 0; i < 8; ++i) x.store(i, i == 2 || i == 5 ? 100.0 : 0.5 * static_cast<double>(i));
                      ts.view("target").store(0, 3.0);
                    }});
  probes.push_back({kvtest::op_case("cross_entropy.fwd", {1, 128256}, "fp32", {{"reduction", "none"}}), "loss", {0},
                    "mpfi-128", [](kv::TensorSet& ts) {
                      auto x = ts.view("logits");
                      ts.view("target").store(0, 7.0);
                      x.store(7, 40.0);  // p_y = 1 - O(V e^-40)
                    }});
  probes.push_back({kvtest::op_case("layer_norm.fwd", {2, 64}, "fp32", {}, "big_mean"), "y", {3, 70}, "mpfi-128",
                    [](kv::TensorSet&) {}});
  for (auto& pr : probes) {
    Prepared p = prepare(pr.c);
    pr.set(p.ts);
    kv::RefResult ref = p.op->reference(p.c, p.ts);
    p.op->refine(p.c, p.ts, ref, {{pr.out, pr.idx}});
    EXPECT_NE(ref.method.find("certified:" + pr.method), std::string::npos) << p.c.str() << " " << ref.method;
    auto exact = p.ev->eval_mpfr(p.c, p.ts, 1024);
    size_t o = 0;
    while (ref.outputs[o].name != pr.out) ++o;
    for (int64_t i : pr.idx) {
      const double v = ref.outputs[o].v[i], err = ref.outputs[o].err[i];
      EXPECT_LE(err, std::fabs(v) * 0x1p-52 + 0x1p-1070) << p.c.str() << " [" << i << "]";
      kv::set_mpfr_bits(1024);
      EXPECT_LE(mp(abs(exact[o][i] - v)), err) << p.c.str() << " [" << i << "] v=" << v << " exact=" << mp(exact[o][i]);
    }
  }
}

TEST(OpsReference, ConfidentRowsDriveTheTargetProbabilityToOne) {
  // cross_entropy's and FLCE's `confident` distribution plants a target logit of about 32,
  // the others of order 1 (FLCE's of order 32/sqrt(H), so H = 1024 here): every class
  // row's exact loss is then below 1e-6 (about V e^(1/2) e^-32), while the same case drawn
  // normal loses more than 1 per row. The host impls pass on them.
  for (const char* op : {"cross_entropy.fwd", "fused_linear_cross_entropy.fwd"}) {
    for (const char* dist : {"confident", "normal"}) {
      kv::Case c;
      c.op = op;
      c.impl = "host";
      c.shape = std::string(op) == "cross_entropy.fwd" ? std::vector<int64_t>{16, 4096} : std::vector<int64_t>{16, 1024, 4096};
      c.dtypes = {{std::string(op) == "cross_entropy.fwd" ? "logits" : "x", kv::DType::f32}};
      c.attrs["reduction"] = "none";
      c.dist = dist;
      c.seed = 9;
      Prepared p = prepare(c);
      kv::RefResult ref = p.op->reference(p.c, p.ts);
      const auto target = p.ts.view("target");
      int classes = 0;
      for (int64_t r = 0; r < 16; ++r) {
        double t = 0;
        target.read(r, 1, &t);
        if (t < 0) continue;  // ignore_index
        ++classes;
        const double loss = ref.at("loss").v[static_cast<size_t>(r)];
        if (std::string(dist) == "confident") {
          EXPECT_GT(loss, 0) << op << " row " << r;
          EXPECT_LT(loss, 1e-6) << op << " row " << r;
        } else {
          EXPECT_GT(loss, 1.0) << op << " row " << r;
        }
      }
      EXPECT_GE(classes, 8) << op;
      EXPECT_EQ(kvtest::run_in_process(p.c)["verdict"], "pass") << op << " " << dist;
    }
  }
}
