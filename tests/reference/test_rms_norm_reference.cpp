// The RMSNorm reference against a 256-bit MPFR instance of the same template: the
// certified double enclosure must contain the MPFR value, and double-double must agree.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/inputs.hpp"
#include "reference/policy.hpp"
#include "reference/rms_norm.hpp"
#include "test_util.hpp"

namespace {

using kv::DType;

struct RefSetup {
  kv::RmsParams q;
  kv::RmsData d;
};

/// Inputs drawn like the generator does (values exact in their dtypes).
RefSetup make(int64_t rows, int64_t n, DType xd, kv::RmsMode mode, double offset, const std::string& dist, uint64_t seed,
           bool m_round_x) {
  RefSetup s;
  s.q.mode = mode;
  s.q.x = xd;
  s.q.rows = rows;
  s.q.n = n;
  s.q.offset = offset;
  s.q.m_round_x = m_round_x;
  auto draw = [&](const char* name, std::vector<int64_t> shape, std::vector<double>& out, const std::string& dd,
                  double shift, double scale, DType t) {
    out.resize(static_cast<size_t>(kv::numel(shape)));
    std::vector<int64_t> coords;
    for (size_t i = 0; i < out.size(); ++i) {
      kv::unravel(static_cast<int64_t>(i), shape, coords);
      out[i] = kv::round_to(t, shift + scale * kv::draw(dd, seed, name, coords));
    }
  };
  draw("x", {rows, n}, s.d.x, dist, 0, 1, xd);
  draw("w", {n}, s.d.w, "normal", 1 - offset, 0.25, xd);
  draw("dy", {rows, n}, s.d.dy, "normal", 0, 1, xd);
  kv::EncPolicy p;
  for (int64_t r = 0; r < rows; ++r)
    s.d.rstd.push_back(kv::round_to(s.q.compute(), kv::rms_rstd_row(p, s.q, s.d.x.data() + r * n).m));
  return s;
}

}  // namespace

RC_GTEST_PROP(RmsReference, CertifiedDoubleEnclosureContainsMpfr256, ()) {
  const int64_t rows = *rc::gen::inRange<int64_t>(1, 4);
  const int64_t n = *rc::gen::element<int64_t>(1, 2, 7, 31, 123, 257, 1000);
  const DType xd = *rc::gen::element(DType::f32, DType::f16, DType::bf16);
  const auto mode = *rc::gen::element(kv::RmsMode::llama, kv::RmsMode::gemma, kv::RmsMode::none);
  const double offset = *rc::gen::element(0.0, 1.0);
  const std::string dist = *rc::gen::element<std::string>("normal", "tiny", "large", "wide", "mean_shift");
  const bool m_round = *rc::gen::arbitrary<bool>();
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  RefSetup s = make(rows, n, xd, mode, offset, dist, seed, m_round);

  kv::EncPolicy cert;
  kv::set_mpfr_bits(256);
  kv::ValuePolicy<kv::mpfr_float> mp;
  auto f_c = kv::rms_fwd(cert, s.q, s.d, false);
  auto f_m = kv::rms_fwd(mp, s.q, s.d, false);
  auto b_c = kv::rms_bwd(cert, s.q, s.d, false);
  auto b_m = kv::rms_bwd(mp, s.q, s.d, false);
  // A mandated rounding whose certified interval straddles a rounding boundary widens the
  // bound (the ladder escalates those); the containment must hold regardless.
  auto contains = [](const std::vector<kv::Enc>& c, const std::vector<kv::mpfr_float>& m) {
    for (size_t i = 0; i < c.size(); ++i) {
      kv::mpfr_float diff = abs(kv::mpfr_float(c[i].m) - m[i]);
      RC_ASSERT(diff <= kv::mpfr_float(c[i].r));
    }
  };
  contains(f_c.y, f_m.y);
  contains(f_c.rstd, f_m.rstd);
  contains(b_c.dx, b_m.dx);
  contains(b_c.dw, b_m.dw);
}

RC_GTEST_PROP(RmsReference, DoubleDoubleAgreesWithMpfr256, ()) {
  const int64_t n = *rc::gen::element<int64_t>(1, 5, 123, 700);
  const DType xd = *rc::gen::element(DType::f32, DType::bf16);
  const auto mode = *rc::gen::element(kv::RmsMode::llama, kv::RmsMode::gemma);
  const uint64_t seed = *rc::gen::arbitrary<uint64_t>();
  RefSetup s = make(2, n, xd, mode, 0.0, "normal", seed, false);
  kv::set_mpfr_bits(256);
  auto dd = kv::rms_fwd(kv::ValuePolicy<dd_real>{}, s.q, s.d, false);
  auto mp = kv::rms_fwd(kv::ValuePolicy<kv::mpfr_float>{}, s.q, s.d, false);
  for (size_t i = 0; i < dd.y.size(); ++i) {
    kv::mpfr_float a = kv::mpfr_float(dd.y[i].x[0]) + kv::mpfr_float(dd.y[i].x[1]);
    RC_ASSERT(abs(a - mp.y[i]) <= abs(mp.y[i]) * kv::mpfr_float(0x1p-95) + kv::mpfr_float(0x1p-200));
  }
}

TEST(RmsReference, CertifiedBoundIsTightOnTypicalRows) {
  // The a-priori bound of the double reference is far below the 2^-16 target for fp32
  // outputs (so the ladder's cheap path is the one taken).
  RefSetup s = make(4, 4096, DType::f32, kv::RmsMode::gemma, 0.0, "normal", 7, false);
  auto f = kv::rms_fwd(kv::EncPolicy{}, s.q, s.d, false);
  for (auto& e : f.y) ASSERT_LE(e.r, std::fabs(e.m) * 0x1p-44 + 0x1p-120);
}

TEST(RmsReference, AllZeroRowGivesRsqrtEps) {
  // An all-zero row: rstd = 1/sqrt(RN_fp32(eps)), y = 0 exactly.
  RefSetup s = make(1, 16, DType::f32, kv::RmsMode::llama, 0.0, "normal", 1, false);
  std::fill(s.d.x.begin(), s.d.x.end(), 0.0);
  s.q.eps = 1e-6;
  kv::set_mpfr_bits(256);
  auto f = kv::rms_fwd(kv::ValuePolicy<kv::mpfr_float>{}, s.q, s.d, false);
  kv::mpfr_float expect = 1 / sqrt(kv::mpfr_float(static_cast<double>(static_cast<float>(1e-6))));
  EXPECT_LE(abs(f.rstd[0] - expect), expect * kv::mpfr_float(0x1p-250));
  for (auto& y : f.y) EXPECT_EQ(y, 0);
}

TEST(RmsReference, RefineReplacesLooseElementsWithAgreedMpfrValues) {
  // Mark some elements as missing the target; refine() recomputes their rows at two
  // MPFR precisions and the new bounds are far tighter than the certified double's.
  for (bool bwd : {false, true}) {
    kv::Case c = kvtest::rms_case(bwd, "host", {3, 40}, {{"x", DType::bf16}}, "llama", 5);
    kv::registry().normalize(c);
    const kv::OpBinding& op = kv::registry().op(c.op);
    kv::TensorSet ts = kv::allocate_tensors(c, op);
    op.generate(c, ts);
    kv::RefResult ref = op.reference(c, ts);
    const std::string out = bwd ? "dx" : "y";
    kv::RefResult before = ref;
    op.refine(c, ts, ref, {{out, {41, 42}}});
    EXPECT_NE(ref.method.find("agreed:mpfr"), std::string::npos);
    for (int64_t i : {41, 42, 40, 79}) {  // row 1 is refined whole
      // Agreed at 128/256 bits; what remains is the rounding of the value to double.
      EXPECT_LE(ref.at(out).err[i], std::fabs(ref.at(out).v[i]) * 0x1p-52 + 0x1p-200) << i;
      // Both bounds hold for the same exact value.
      EXPECT_LE(std::fabs(ref.at(out).v[i] - before.at(out).v[i]), before.at(out).err[i] + ref.at(out).err[i]) << i;
    }
    EXPECT_EQ(ref.at(out).err[0], before.at(out).err[0]);  // row 0 untouched
  }
}
