// Inputs and digests: Philox against Random123's published known answers, coordinate-keyed
// fills that keep a shrunk shape's prefix, the libm-free normal sampler, layout-independent
// digests that locate a changed element, and canaried buffers.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

#include "core/case.hpp"
#include "core/digest.hpp"
#include "core/error.hpp"
#include "core/inputs.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"

namespace {

using kv::DType;
using Words = std::array<uint32_t, 4>;

// A tensor and the buffer behind it (contiguous unless strides are given).
struct Owned {
  std::shared_ptr<kv::Buffer> buf;
  kv::TensorView view;
  Owned(std::string name, DType d, std::vector<int64_t> shape, std::vector<int64_t> strides = {}, int64_t offset = 0) {
    kv::TensorDesc desc{std::move(name), d, std::move(shape), std::move(strides), offset};
    buf = std::make_shared<kv::Buffer>(desc.storage_elems() * kv::dtype_size(d));
    view = kv::TensorView{desc, buf->payload()};
  }
};

// Random123's kat_vectors, "philox4x32 10" lines: counter (4 words), key (2), result (4).
TEST(Rng, PhiloxKnownAnswers) {
  EXPECT_EQ(kv::philox4x32_10({0, 0}, {0, 0, 0, 0}), (Words{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(kv::philox4x32_10({0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}),
            (Words{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(kv::philox4x32_10({0xa4093822, 0x299f31d0}, {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}),
            (Words{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

RC_GTEST_PROP(RngProp, PhiloxIsPureAndCounterSensitive, (uint32_t k0, uint32_t k1, Words ctr)) {
  const auto a = kv::philox4x32_10({k0, k1}, ctr);
  RC_ASSERT(kv::philox4x32_10({k0, k1}, ctr) == a);
  const size_t i = *rc::gen::inRange<size_t>(0, 4);
  Words c2 = ctr;
  c2[i] ^= 1u << *rc::gen::inRange(0, 32);
  RC_ASSERT(kv::philox4x32_10({k0, k1}, c2) != a);
  RC_ASSERT(kv::philox4x32_10({k0 ^ 1u, k1}, ctr) != a);
}

// Every element of `small` equals the element with the same coordinates in `big`.
void expect_prefix(const std::vector<int64_t>& big, const std::vector<int64_t>& small, DType d, const char* dist) {
  Owned b("x", d, big), s("x", d, small);
  kv::fill_tensor(b.view, dist, 7, 0.0, 1.0);
  kv::fill_tensor(s.view, dist, 7, 0.0, 1.0);
  std::vector<int64_t> c;
  for (int64_t i = 0; i < s.view.desc.numel(); ++i) {
    kv::unravel(i, small, c);
    int64_t j = 0;  // row-major index of the same coordinates in `big`
    for (size_t k = 0; k < c.size(); ++k) j = j * big[k] + c[k];
    ASSERT_EQ(s.view.bits(i), b.view.bits(j)) << "element " << i << " dist " << dist;
  }
}

TEST(Rng, ShrunkShapeKeepsPrefix) {
  for (const char* dist : {"normal", "wide", "uniform"}) {
    expect_prefix({5, 7, 9}, {5, 7, 4}, DType::f32, dist);
    expect_prefix({5, 7, 9}, {2, 3, 9}, DType::bf16, dist);
    expect_prefix({3, 5, 7, 9}, {2, 5, 3, 4}, DType::f16, dist);  // 4th dim folded
    expect_prefix({3, 2, 5, 7, 9}, {3, 1, 5, 2, 9}, DType::f32, dist);
  }
}

// Every coordinate gets its own value: in particular the dims past the third, which are
// folded into one counter word, must still separate elements.
TEST(Rng, AllCoordinatesGetDistinctValues) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 4, 5, 6, 7}, {4, 1, 1, 300}, {2, 3, 2, 2, 2, 2}}) {
    Owned t("x", DType::f32, shape);
    kv::fill_tensor(t.view, "normal", 5, 0.0, 1.0);
    std::set<uint32_t> seen;
    for (int64_t i = 0; i < t.view.desc.numel(); ++i) seen.insert(t.view.bits(i));
    EXPECT_GE(int64_t(seen.size()), t.view.desc.numel() - 2) << kv::shape_str(shape);  // birthday slack
  }
}

// Fraction of elements whose bits differ between two fills.
double differing(const std::string& n1, uint64_t s1, const std::string& n2, uint64_t s2) {
  Owned a(n1, DType::f32, {64, 64}), b(n2, DType::f32, {64, 64});
  kv::fill_tensor(a.view, "normal", s1, 0.0, 1.0);
  kv::fill_tensor(b.view, "normal", s2, 0.0, 1.0);
  int64_t n = 0;
  for (int64_t i = 0; i < 64 * 64; ++i) n += a.view.bits(i) != b.view.bits(i);
  return n / 4096.0;
}

TEST(Rng, NamesAndSeedsGiveDifferentValues) {
  EXPECT_EQ(differing("x", 1, "x", 1), 0.0);  // deterministic
  EXPECT_GT(differing("x", 1, "w", 1), 0.99);
  EXPECT_GT(differing("x", 1, "x", 2), 0.99);
  EXPECT_GT(differing("x", 0, "x", 1ull << 32), 0.99);  // seed's high half matters
  EXPECT_NE(kv::philox_key(1, "x").k0, kv::philox_key(1, "x ").k0);
}

TEST(Rng, UniformOpen01Extremes) {
  const double lo = kv::uniform_open01(0, 0), hi = kv::uniform_open01(0xffffffff, 0xffffffff);
  EXPECT_GT(lo, 0.0);
  EXPECT_LT(hi, 1.0);
  EXPECT_EQ(lo, 0x1p-53);
  EXPECT_EQ(hi, 1.0 - 0x1p-53);
  EXPECT_TRUE(std::isfinite(kv::normal_from_uniform(lo)));
  EXPECT_TRUE(std::isfinite(kv::normal_from_uniform(hi)));
  EXPECT_LT(kv::normal_from_uniform(lo), -8.0);  // Phi^-1(2^-53) = -8.22
  EXPECT_GT(kv::normal_from_uniform(hi), 8.0);
}

RC_GTEST_PROP(RngProp, UniformOpen01StrictlyInside, (uint32_t hi, uint32_t lo)) {
  const double u = kv::uniform_open01(hi, lo);
  RC_ASSERT(u > 0.0);
  RC_ASSERT(u < 1.0);
  if (hi < 0xffffffffu) RC_ASSERT(kv::uniform_open01(hi + 1, lo) > u);  // monotone in the high word
}

TEST(Rng, NormalFromUniformShape) {
  const int n = 200000;
  double prev = -std::numeric_limits<double>::infinity();
  for (int i = 0; i < n; ++i) {
    const double u = (i + 0.5) / n, z = kv::normal_from_uniform(u);
    ASSERT_GT(z, prev) << "not monotone at u=" << u;
    prev = z;
    // Odd symmetry about 0.5 and agreement with the true quantile (Phi(z) = u).
    ASSERT_NEAR(z, -kv::normal_from_uniform(1.0 - u), 1e-9 * (1 + std::fabs(z))) << u;
    const double phi = 0.5 * std::erfc(-z / std::sqrt(2.0));
    ASSERT_NEAR(phi, u, 1e-7 * std::min(u, 1 - u)) << u;
  }
  EXPECT_EQ(kv::normal_from_uniform(0.5), 0.0);
}

TEST(Rng, NormalDrawMoments) {
  const int n = 200000;
  double sum = 0, sum2 = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double z = kv::draw("normal", 3, "x", {i / 1000, i % 1000});
    sum += z;
    sum2 += z * z;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(var, 1.0, 0.02);
  EXPECT_THROW(kv::draw("cauchy", 3, "x", {0}), kv::UsageError);
}

int64_t ulps_apart(double a, double b) {
  int64_t x, y;
  std::memcpy(&x, &a, 8);
  std::memcpy(&y, &b, 8);
  if ((x < 0) != (y < 0)) return a == b ? 0 : std::numeric_limits<int64_t>::max();
  return x > y ? x - y : y - x;
}

RC_GTEST_PROP(RngProp, DetLogAndSqrtWithin4Ulps, (uint64_t bits)) {
  // Positive finite doubles over the whole range, and ones near 1 where log cancels.
  double a, near1 = 1.0 + std::ldexp(static_cast<double>(bits >> 11), -53 - int(bits & 31));
  const uint64_t pos = bits & 0x7fffffffffffffffull;
  std::memcpy(&a, &pos, 8);
  for (double x : {a, near1, 1.0 / near1}) {
    if (!(x > 0) || !std::isfinite(x)) continue;
    RC_ASSERT(ulps_apart(kv::det_sqrt(x), std::sqrt(x)) <= 4);
    if (x != 1.0) RC_ASSERT(ulps_apart(kv::det_log(x), std::log(x)) <= 4);
  }
}

TEST(Rng, DetLogSqrtSpecialValues) {
  EXPECT_EQ(kv::det_log(1.0), 0.0);
  EXPECT_EQ(kv::det_sqrt(0.0), 0.0);
  EXPECT_EQ(kv::det_sqrt(4.0), 2.0);
  EXPECT_EQ(kv::det_sqrt(0x1p-1074), 0x1p-537);
  EXPECT_TRUE(std::isnan(kv::det_sqrt(-1.0)));
  EXPECT_LE(ulps_apart(kv::det_log(0x1p-1074), std::log(0x1p-1074)), 4);
}

// Writes logical values f(i), exactly representable in every dtype, through the view.
void write_values(kv::TensorView& v) {
  for (int64_t i = 0; i < v.desc.numel(); ++i) v.store(i, std::ldexp(double(i % 97) - 48, int(i % 7) - 3));
}

TEST(Digest, IndependentOfStridesAndOffset) {
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    Owned c("x", d, {6, 5});
    Owned s("x", d, {6, 5}, {13, 2}, 1);  // rows 13 apart, every other element, offset 1
    s.buf->poison(d);
    write_values(c.view);
    write_values(s.view);
    const kv::Digest dc = kv::digest(c.view), ds = kv::digest(s.view);
    EXPECT_EQ(dc.whole, ds.whole) << kv::dtype_name(d);
    EXPECT_EQ(dc.chunks, ds.chunks);
    EXPECT_EQ(dc.chunk_elems, 4096);
    // Contiguous, no NaN, little-endian host, one chunk: the chunk digest is XXH64 of the
    // raw payload, and the whole digest is XXH64 of that chunk digest's bytes.
    ASSERT_EQ(dc.chunks.size(), 1u);
    EXPECT_EQ(dc.chunks[0], kv::raw_digest(c.buf->payload(), c.buf->payload_bytes()));
    uint8_t le[8];
    for (int k = 0; k < 8; ++k) le[k] = static_cast<uint8_t>(dc.chunks[0] >> (8 * k));
    EXPECT_EQ(dc.whole, kv::raw_digest(le, 8));
    s.view.store(29, 1e4);
    EXPECT_NE(kv::digest(s.view).whole, dc.whole);
    EXPECT_FALSE(s.buf->canary_damage().has_value());
  }
}

TEST(Digest, NanPayloadsAreCanonicalized) {
  struct Nans { DType d; uint32_t a, b; } cases[] = {
      {DType::f32, 0x7FC00001u, 0xFFA12345u}, {DType::f16, 0x7C01u, 0xFE00u}, {DType::bf16, 0x7F81u, 0xFFFFu}};
  for (auto [d, na, nb] : cases) {
    Owned a("x", d, {100}), b("x", d, {100});
    write_values(a.view);
    write_values(b.view);
    a.view.set_bits(17, na);
    b.view.set_bits(17, nb);
    EXPECT_EQ(kv::digest(a.view).whole, kv::digest(b.view).whole) << kv::dtype_name(d);
    b.view.set_bits(17, kv::encode(d, kv::max_finite(d)));  // a non-NaN there does change it
    EXPECT_NE(kv::digest(a.view).whole, kv::digest(b.view).whole);
  }
}

TEST(Digest, ChunkSizes) {
  EXPECT_EQ(kv::digest_chunk_elems(0), 4096);
  EXPECT_EQ(kv::digest_chunk_elems(32 * 4096), 4096);
  EXPECT_EQ(kv::digest_chunk_elems(32 * 4096 + 1), 4097);
  EXPECT_EQ(kv::digest_chunk_elems(160000), 5000);
  Owned e("x", DType::f32, {0, 3});
  EXPECT_TRUE(kv::digest(e.view).chunks.empty());
}

TEST(Digest, OneChangedElementChangesExactlyOneChunk) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{5 * 4096 + 123}, {400, 400}}) {
    Owned t("x", DType::bf16, shape);
    kv::fill_tensor(t.view, "normal", 11, 0.0, 1.0);
    const kv::Digest before = kv::digest(t.view);
    const int64_t n = t.view.desc.numel(), ce = kv::digest_chunk_elems(n);
    ASSERT_EQ(int64_t(before.chunks.size()), (n + ce - 1) / ce);
    ASSERT_GT(before.chunks.size(), 4u);
    for (int64_t idx : {int64_t(0), 2 * ce + 7, n - 1}) {
      const uint32_t old = t.view.bits(idx);
      t.view.set_bits(idx, old ^ 1u);  // one bit of one element
      const kv::Digest after = kv::digest(t.view);
      EXPECT_NE(after.whole, before.whole);
      for (size_t k = 0; k < before.chunks.size(); ++k)
        EXPECT_EQ(after.chunks[k] != before.chunks[k], int64_t(k) == idx / ce) << "chunk " << k << " idx " << idx;
      t.view.set_bits(idx, old);
    }
    EXPECT_EQ(kv::digest(t.view).whole, before.whole);
  }
}

TEST(Buffer, CanariesCatchOneByteBeforeTheStart) {
  kv::Buffer b(64);
  EXPECT_FALSE(b.canary_damage().has_value());
  b.payload()[0] = 1, b.payload()[63] = 2;  // inside: fine
  EXPECT_FALSE(b.canary_damage().has_value());
  const size_t lead = b.lead_canary_bytes();
  EXPECT_GE(lead, kv::Buffer::kMinCanaryBytes);
  b.payload()[-1] ^= 0xFF;  // one byte before the start
  ASSERT_TRUE(b.canary_damage().has_value());
  EXPECT_NE(b.canary_damage()->find("1 byte(s) before the start"), std::string::npos) << *b.canary_damage();
  b.payload()[-1] ^= 0xFF;
  EXPECT_FALSE(b.canary_damage().has_value());
  b.payload()[-static_cast<std::ptrdiff_t>(lead)] ^= 1;  // the far end of the canaries is checked too
  ASSERT_TRUE(b.canary_damage().has_value());
  EXPECT_NE(b.canary_damage()->find(std::to_string(lead) + " byte(s) before"), std::string::npos) << *b.canary_damage();
  b.payload()[-static_cast<std::ptrdiff_t>(lead)] ^= 1;
  b.note_damage("write at byte 3 past the end of the buffer on the device");  // a device mirror's finding
  ASSERT_TRUE(b.canary_damage().has_value());
  EXPECT_NE(b.canary_damage()->find("on the device"), std::string::npos);
}

TEST(Buffer, PoisonFillsWithPoisonBits) {
  for (DType d : {DType::f32, DType::f16, DType::bf16}) {
    Owned t("y", d, {7});
    write_values(t.view);
    t.buf->poison(d);
    for (int64_t i = 0; i < 7; ++i) {
      EXPECT_EQ(t.view.bits(i), kv::poison_bits(d));
      EXPECT_TRUE(kv::is_nan_bits(d, t.view.bits(i)));
      const uint32_t sign = d == DType::f32 ? 0x80000000u : 0x8000u;
      EXPECT_TRUE(t.view.bits(i) & sign);  // a negative NaN, which arithmetic never produces
    }
    EXPECT_FALSE(t.buf->canary_damage().has_value());
  }
  kv::Buffer odd(10);  // 2 fp32 elements and 2 leftover bytes
  odd.poison(DType::f32);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(odd.payload()[i], 0xFF);
  EXPECT_FALSE(odd.canary_damage().has_value());
}

}  // namespace
