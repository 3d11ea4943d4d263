// The generator inside what an impl accepts (CaseSpace's dtypes, attr_values, strided,
// in_place, filled from impl_accepts): every draw stays inside the declared sets, and a
// space that allows everything draws exactly the cases it drew before (the same random
// draws), so campaigns of impls that declare nothing regenerate unchanged.
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include "fuzz/gen.hpp"
#include "fuzz/space.hpp"
#include "test_util.hpp"

namespace {

kv::Case draw(const kv::CaseSpace& s, uint64_t key) {
  return kv::draw_case(s, rc::Random(key), static_cast<int>(key % 101), kv::GenLimits{1 << 16});
}

}  // namespace

TEST(FuzzAccepts, DrawsStayInsideTheDeclaredSets) {
  kv::CaseSpace s = kv::make_space("rms_norm.fwd", "host");
  ASSERT_FALSE(s.mixable.empty());  // w and y may differ from x: mixes are drawn too
  s.dtypes = {kv::DType::bf16};
  s.attr_values["mode"] = {"gemma"};
  s.strided = s.in_place = false;
  int mixed = 0;
  for (uint64_t key = 1; key <= 400; ++key) {
    const kv::Case c = draw(s, key);
    for (auto& [t, d] : c.dtypes) EXPECT_EQ(d, kv::DType::bf16) << t << " in " << c.str();
    EXPECT_EQ(c.attrs.at("mode"), "gemma") << c.str();
    EXPECT_TRUE(c.layout.empty() && c.alias.empty()) << c.str();
    mixed += c.dtypes.size() > 1;
  }
  EXPECT_GT(mixed, 0) << "no draw mixed dtypes: the mix was not exercised";
}

TEST(FuzzAccepts, ASpaceThatAllowsEverythingDrawsWhatItDrewBefore) {
  const kv::CaseSpace plain = kv::make_space("rms_norm.fwd", "host");
  kv::CaseSpace all = plain;
  all.dtypes = {kv::DType::f32, kv::DType::bf16, kv::DType::f16};
  bool layouts = false;
  for (uint64_t key = 1; key <= 400; ++key) {
    const kv::Case a = draw(plain, key), b = draw(all, key);
    EXPECT_EQ(a, b) << a.str() << "\n" << b.str();
    layouts |= !a.layout.empty() || !a.alias.empty();
  }
  EXPECT_TRUE(layouts) << "no draw had a layout or alias: the layout draws were not exercised";
}
