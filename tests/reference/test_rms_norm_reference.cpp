// The RMSNorm reference against a 256-bit MPFR instance of the same template: the
// certified double enclosure must contain the MPFR value, and double-double must agree;
// the fast one-pass reference and enclosure against the generic pass (the row functions
// of reference/rms_norm.hpp driven as ops/rms_norm.cpp's compute drives them).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cstring>
#include <limits>

#include "core/inputs.hpp"
#include "ops/op_base.hpp"
#include "reference/dual_policy.hpp"
#include "reference/policy.hpp"
#include "reference/rms_norm.hpp"
#include "reference/rms_norm_fast.hpp"
#include "test_util.hpp"

namespace {

using kv::DType;

/// Exact input values, whole.
struct RmsData {
  std::vector<double> x, w, dy, rstd;
};

struct RefSetup {
  kv::RmsParams q;
  RmsData d;
};

template <class T>
struct FwdOut {
  std::vector<T> y, rstd;
};
template <class T>
struct BwdOut {
  std::vector<T> dx, dw;
};

/// The generic forward pass over policy p, row by row.
template <class P>
FwdOut<typename P::T> rms_fwd(const P& p, const kv::RmsParams& q, const RmsData& d) {
  FwdOut<typename P::T> o;
  o.y.resize(static_cast<size_t>(q.rows * q.n));
  o.rstd.resize(static_cast<size_t>(q.rows));
  const auto wp = kv::rms_wprime(p, q, d.w.data());
  for (int64_t r = 0; r < q.rows; ++r)
    kv::rms_fwd_row(p, q, d.x.data() + r * q.n, wp.data(), o.y.data() + r * q.n, o.rstd[r]);
  return o;
}

/// The generic backward pass over policy p: dW's sums over chunks of rows (column_sums).
template <class P>
BwdOut<typename P::T> rms_bwd(const P& p, const kv::RmsParams& q, const RmsData& d, bool parallel) {
  using T = typename P::T;
  BwdOut<T> o;
  o.dx.resize(static_cast<size_t>(q.rows * q.n));
  o.dw.resize(static_cast<size_t>(q.n));
  const auto wp = kv::rms_wprime(p, q, d.w.data());
  kv::column_sums(
      p, q.rows, q.n, 1, kv::RowSet{}, parallel, "rows",
      [&](int64_t r, auto* sums) {
        kv::rms_bwd_row(p, q, d.dy.data() + r * q.n, d.x.data() + r * q.n, wp.data(), d.rstd[r],
                        o.dx.data() + r * q.n, [&](int64_t j, const T& t) { sums[j].add(t); });
      },
      [&](int, int64_t j, const T& v) { o.dw[j] = v; });
  return o;
}

/// The inputs as the fast pass reads them.
kv::RmsSource source_of(const RmsData& d, int64_t n) {
  kv::RmsSource s;
  s.x_row = [&d, n](int64_t r, double* out) { std::copy(d.x.begin() + r * n, d.x.begin() + (r + 1) * n, out); };
  s.dy_row = [&d, n](int64_t r, double* out) { std::copy(d.dy.begin() + r * n, d.dy.begin() + (r + 1) * n, out); };
  s.w = d.w;
  s.rstd = d.rstd;
  return s;
}

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
  s.q.m_dtype = xd;  // m_rounding=x_dtype
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
  auto f_c = rms_fwd(cert, s.q, s.d);
  auto f_m = rms_fwd(mp, s.q, s.d);
  auto b_c = rms_bwd(cert, s.q, s.d, false);
  auto b_m = rms_bwd(mp, s.q, s.d, false);
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
  auto dd = rms_fwd(kv::ValuePolicy<dd_real>{}, s.q, s.d);
  auto mp = rms_fwd(kv::ValuePolicy<kv::mpfr_float>{}, s.q, s.d);
  for (size_t i = 0; i < dd.y.size(); ++i) {
    kv::mpfr_float a = kv::mpfr_float(dd.y[i].x[0]) + kv::mpfr_float(dd.y[i].x[1]);
    RC_ASSERT(abs(a - mp.y[i]) <= abs(mp.y[i]) * kv::mpfr_float(0x1p-95) + kv::mpfr_float(0x1p-200));
  }
}

TEST(RmsReference, CertifiedBoundIsTightOnTypicalRows) {
  // The a-priori bound of the double reference is far below the 2^-16 target for fp32
  // outputs (so the ladder's cheap path is the one taken).
  RefSetup s = make(4, 4096, DType::f32, kv::RmsMode::gemma, 0.0, "normal", 7, false);
  auto f = rms_fwd(kv::EncPolicy{}, s.q, s.d);
  for (auto& e : f.y) ASSERT_LE(e.r, std::fabs(e.m) * 0x1p-44 + 0x1p-120);
}

TEST(RmsReference, AllZeroRowGivesRsqrtEps) {
  // An all-zero row: rstd = 1/sqrt(RN_fp32(eps)), y = 0 exactly.
  RefSetup s = make(1, 16, DType::f32, kv::RmsMode::llama, 0.0, "normal", 1, false);
  std::fill(s.d.x.begin(), s.d.x.end(), 0.0);
  s.q.eps = 1e-6;
  kv::set_mpfr_bits(256);
  auto f = rms_fwd(kv::ValuePolicy<kv::mpfr_float>{}, s.q, s.d);
  kv::mpfr_float expect = 1 / sqrt(kv::mpfr_float(static_cast<double>(static_cast<float>(1e-6))));
  EXPECT_LE(abs(f.rstd[0] - expect), expect * kv::mpfr_float(0x1p-250));
  for (auto& y : f.y) EXPECT_EQ(y, 0);
}

TEST(RmsReference, RefineReplacesLooseElementsWithCertifiedMpfiValues) {
  // Mark some elements as missing the target; refine() recomputes their rows over MPFI
  // (PolicyOp::refine) and the new bounds are far tighter than the certified double's.
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
    EXPECT_NE(ref.method.find("certified:mpfi"), std::string::npos);
    for (int64_t i : {41, 42, 40, 79}) {  // row 1 is refined whole
      // Certified at 128 bits or more; what remains is the rounding of the value to double.
      EXPECT_LE(ref.at(out).err[i], std::fabs(ref.at(out).v[i]) * 0x1p-52 + 0x1p-200) << i;
      // Both bounds hold for the same exact value.
      EXPECT_LE(std::fabs(ref.at(out).v[i] - before.at(out).v[i]), before.at(out).err[i] + ref.at(out).err[i]) << i;
    }
    EXPECT_EQ(ref.at(out).err[0], before.at(out).err[0]);  // row 0 untouched
  }
}

// The fast one-pass reference and enclosure (reference/rms_norm_fast.hpp, what
// RmsNormOp::evaluate runs) against the generic pass over DualPolicy and against
// MPFR-256: across dtypes, modes, offsets, eps, value distributions (zeros, non-finite
// values, subnormal-range values), row lengths that leave a tail after the vector lanes,
// and contracts (flush to zero, directed rounding, an accumulator other than fp32, one
// that admits no bound).
namespace {

/// One output tensor as evaluate() stores it.
struct OutBufs {
  std::vector<double> v, err, lo, hi;
  std::vector<uint8_t> unv, nan;
  explicit OutBufs(size_t n) : v(n, -1.0), err(n, -1.0), lo(n, -1.0), hi(n, -1.0), unv(n, 7), nan(n, 7) {}
  kv::RmsOut out() { return kv::RmsOut{v.data(), err.data(), lo.data(), hi.data(), unv.data(), nan.data()}; }
  static OutBufs of(const std::vector<kv::Dual>& g) {
    OutBufs b(g.size());
    for (size_t i = 0; i < g.size(); ++i) b.out().put(static_cast<int64_t>(i), g[i]);
    return b;
  }
};

kv::Contract rms_contract(const kv::RmsParams& q, int variant) {
  kv::Contract k;
  k.acc = q.mode == kv::RmsMode::none ? q.x : DType::f32;
  k.math_ulps["rsqrt"] = 2.0;
  k.reductions["row"] = {(q.n + 127) / 128, 7, 0, std::nullopt};
  k.reductions["rows"] = {(q.rows + 3) / 4, 0, 4, DType::f32};
  if (variant == 1) k.ftz = true;
  if (variant == 2) k.u = 2 * kv::unit_roundoff(k.acc);               // directed rounding
  if (variant == 3) k.acc = DType::bf16;                               // a bf16 accumulator
  if (variant == 4) k.reductions["row"] = {int64_t(1) << 40, 0, 0, std::nullopt};  // n_eff u >= 1
  return k;
}

struct Compared {
  int64_t elements = 0, differing_bits = 0;
};

/// Fast against generic, element by element: the fast reference interval contains the
/// generic value, the fast enclosure contains the generic one's midpoint and is at most
/// (1 + 1e-6) as wide (plus 2^-1000); counts elements whose bits differ at all.
void compare(const char* what, const OutBufs& f, const OutBufs& g, Compared& c) {
  ASSERT_EQ(f.v.size(), g.v.size());
  for (size_t i = 0; i < f.v.size(); ++i) {
    SCOPED_TRACE(std::string(what) + "[" + std::to_string(i) + "]");
    ++c.elements;
    if (std::memcmp(&f.v[i], &g.v[i], 8) || std::memcmp(&f.err[i], &g.err[i], 8) ||
        std::memcmp(&f.lo[i], &g.lo[i], 8) || std::memcmp(&f.hi[i], &g.hi[i], 8) || f.unv[i] != g.unv[i] ||
        f.nan[i] != g.nan[i])
      ++c.differing_bits;
    ASSERT_EQ(f.unv[i], g.unv[i]);
    ASSERT_EQ(f.nan[i], g.nan[i]);
    if (!std::isfinite(g.v[i])) {
      ASSERT_TRUE(f.v[i] == g.v[i] || (std::isnan(f.v[i]) && std::isnan(g.v[i])));
    } else {
      ASSERT_LE(std::fabs(f.v[i] - g.v[i]), f.err[i]);
    }
    if (std::isfinite(g.lo[i]) && std::isfinite(g.hi[i])) {
      const double mid = g.lo[i] + (g.hi[i] - g.lo[i]) * 0.5;
      ASSERT_LE(f.lo[i], mid);
      ASSERT_GE(f.hi[i], mid);
      ASSERT_LE(f.hi[i] - f.lo[i], (g.hi[i] - g.lo[i]) * (1 + 1e-6) + 0x1p-1000);
    } else {
      ASSERT_TRUE(!(f.lo[i] > g.lo[i]) && !(f.hi[i] < g.hi[i]));  // NaN and ±inf included
    }
  }
}

/// The MPFR-256 value of each element lies within the fast reference's stated error.
void contains_mpfr(const char* what, const OutBufs& f, const std::vector<kv::mpfr_float>& m) {
  for (size_t i = 0; i < m.size(); ++i) {
    if (isnan(m[i]) || isinf(m[i])) continue;
    kv::mpfr_float diff = abs(kv::mpfr_float(f.v[i]) - m[i]);
    ASSERT_LE(diff, kv::mpfr_float(f.err[i])) << what << "[" << i << "]";
  }
}

/// Runs both passes, forward and backward, on one setup; MPFR for small ones.
void fast_vs_generic(const RefSetup& s, const kv::Contract& k, Compared& c, bool mpfr, kv::RmsLanes lanes) {
  const kv::RmsSource src = source_of(s.d, s.q.n);
  const size_t nel = static_cast<size_t>(s.q.rows * s.q.n);
  {
    OutBufs y(nel), rstd(static_cast<size_t>(s.q.rows));
    kv::rms_fwd_fast(k, s.q, src, y.out(), rstd.out(), lanes);
    auto g = rms_fwd(kv::DualPolicy{&k}, s.q, s.d);
    compare("y", y, OutBufs::of(g.y), c);
    compare("rstd", rstd, OutBufs::of(g.rstd), c);
    if (mpfr) {
      kv::set_mpfr_bits(256);
      auto m = rms_fwd(kv::ValuePolicy<kv::mpfr_float>{}, s.q, s.d);
      contains_mpfr("y", y, m.y);
      contains_mpfr("rstd", rstd, m.rstd);
    }
  }
  {
    OutBufs dx(nel), dw(static_cast<size_t>(s.q.n));
    kv::rms_bwd_fast(k, s.q, src, dx.out(), dw.out(), lanes);
    auto g = rms_bwd(kv::DualPolicy{&k}, s.q, s.d, true);
    compare("dx", dx, OutBufs::of(g.dx), c);
    compare("dw", dw, OutBufs::of(g.dw), c);
    if (mpfr) {
      kv::set_mpfr_bits(256);
      auto m = rms_bwd(kv::ValuePolicy<kv::mpfr_float>{}, s.q, s.d, false);
      contains_mpfr("dx", dx, m.dx);
      contains_mpfr("dw", dw, m.dw);
    }
  }
}


/// Every kind of lanes this build and CPU have.
std::vector<kv::RmsLanes> available_lanes() {
  std::vector<kv::RmsLanes> l;
  for (auto k : {kv::RmsLanes::one, kv::RmsLanes::sse2, kv::RmsLanes::avx2})
    if (kv::rms_lanes_available(k)) l.push_back(k);
  return l;
}

/// Runs both passes, forward and backward, on one setup, on each kind of lanes; MPFR for
/// small ones.
void fast_vs_generic(const RefSetup& s, const kv::Contract& k, Compared& c, bool mpfr) {
  for (kv::RmsLanes lanes : available_lanes()) {
    SCOPED_TRACE("lanes " + std::to_string(static_cast<int>(lanes)));
    fast_vs_generic(s, k, c, mpfr, lanes);
    if (::testing::Test::HasFatalFailure()) return;
  }
}
}  // namespace

TEST(RmsReference, FastPassWithinGenericEnclosuresAndContainsMpfr) {
  // The fast pass is written to give the generic pass's bits; the comparison asserts the
  // weaker properties a sound fast pass must have, and the bit count the stronger one.
  ASSERT_FALSE(available_lanes().empty());
  Compared c;
  uint64_t seed = 11;
  for (DType xd : {DType::bf16, DType::f16, DType::f32})
    for (auto mode : {kv::RmsMode::llama, kv::RmsMode::gemma, kv::RmsMode::none})
      for (const char* dist : {"normal", "wide", "tiny", "large", "mean_shift"})
        for (int64_t n : {1, 7, 64, 333}) {
          ++seed;
          const double offset = seed % 3 == 0 ? 1.0 : 0.0;
          const bool m_round = seed % 2 == 0;
          RefSetup s = make(n == 333 ? 3 : 5, n, xd, mode, offset, dist, seed, m_round);
          s.q.eps = seed % 4 == 0 ? 0x1p-3 : 1e-6;
          if (seed % 5 == 0) std::fill(s.d.x.begin() + n, s.d.x.begin() + 2 * n, 0.0);  // a row of zeros
          SCOPED_TRACE(std::string(kv::dtype_name(xd)) + " mode " + std::to_string(int(mode)) + " " + dist + " n=" +
                       std::to_string(n) + " seed " + std::to_string(seed));
          fast_vs_generic(s, rms_contract(s.q, static_cast<int>(seed % 5)), c, n <= 64);
          if (HasFatalFailure()) return;
        }
  EXPECT_GT(c.elements, 50000);
  EXPECT_EQ(c.differing_bits, 0);
  std::printf("fast pass: %lld elements compared, %lld with other bits\n", static_cast<long long>(c.elements),
              static_cast<long long>(c.differing_bits));
}

TEST(RmsReference, FastPassOnLongRowsAndSpecialValues) {
  // Rows long enough for every vector path, with zeros, ±inf, NaN, values at the edge of
  // bf16's and fp16's normal range and an exact rounding tie placed in x.
  Compared c;
  for (DType xd : {DType::bf16, DType::f16})
    for (auto mode : {kv::RmsMode::llama, kv::RmsMode::gemma, kv::RmsMode::none})
      for (bool m_round : {false, true}) {
        RefSetup s = make(6, 1536, xd, mode, 0.0, "normal", 97, m_round);
        const double inf = std::numeric_limits<double>::infinity();
        s.d.x[1536 + 5] = 0.0;
        s.d.x[2 * 1536 + 9] = inf;
        s.d.x[3 * 1536 + 11] = -inf;
        s.d.x[4 * 1536 + 13] = std::numeric_limits<double>::quiet_NaN();
        s.d.x[5 * 1536 + 17] = kv::min_normal(xd);
        s.d.x[5 * 1536 + 18] = kv::min_subnormal(xd);
        s.d.dy[2 * 1536 + 3] = 0.0;
        s.d.w[21] = 0.0;
        SCOPED_TRACE(std::string(kv::dtype_name(xd)) + " mode " + std::to_string(int(mode)));
        fast_vs_generic(s, rms_contract(s.q, 0), c, false);
        if (HasFatalFailure()) return;
      }
  EXPECT_EQ(c.differing_bits, 0);
}
