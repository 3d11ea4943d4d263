// kv::Case: the replay string must parse back to the same case (it is how a failure is
// reproduced), malformed strings must be rejected with a reason, and the identities must
// separate what changes the inputs from what only changes the impl.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "core/case.hpp"
#include "core/error.hpp"

namespace {

using kv::Case;
using kv::DType;

// Names use no separator of the grammar (' ', ':', ',', '=', '+', ';', '/').
rc::Gen<std::string> name_gen() {
  return rc::gen::nonEmpty(rc::gen::container<std::string>(rc::gen::elementOf(std::string("abcxyz_019.-"))));
}
rc::Gen<std::string> value_gen() {  // values may be empty
  return rc::gen::container<std::string>(rc::gen::elementOf(std::string("abcxyz_019.-")));
}
rc::Gen<std::map<std::string, std::string>> kv_gen() {
  return rc::gen::container<std::map<std::string, std::string>>(name_gen(), value_gen());
}

rc::Gen<Case> case_gen() {
  return rc::gen::exec([] {
    Case c;
    c.op = *name_gen();
    c.impl = *value_gen();
    c.config = *kv_gen();
    c.shape = *rc::gen::container<std::vector<int64_t>>(
        static_cast<size_t>(*rc::gen::inRange(1, 5)),
        rc::gen::oneOf(rc::gen::inRange<int64_t>(0, 4097), rc::gen::positive<int64_t>()));
    c.dtypes = *rc::gen::container<std::map<std::string, DType>>(
        name_gen(), rc::gen::element(DType::f32, DType::f16, DType::bf16));
    // attrs: plain words and exact hex floats (what ops store for eps and the like).
    c.attrs = *kv_gen();
    if (*rc::gen::arbitrary<bool>()) {
      const uint64_t b = *rc::gen::arbitrary<uint64_t>();
      double x;
      std::memcpy(&x, &b, 8);
      c.attrs["eps"] = kv::hex_float(x);
    }
    c.layout = *rc::gen::container<std::map<std::string, kv::TensorLayout>>(name_gen(), rc::gen::exec([] {
      kv::TensorLayout t;
      t.offset = *rc::gen::inRange<int64_t>(0, 1 << 20);
      t.strides = *rc::gen::container<std::vector<int64_t>>(rc::gen::arbitrary<int64_t>());
      return t;
    }));
    c.alias = *rc::gen::container<std::map<std::string, std::string>>(name_gen(), name_gen());
    c.dist = *rc::gen::elementOf(std::vector<std::string>{"normal", "uniform", "tiny", "large", "mean_shift", "wide"});
    c.seed = *rc::gen::arbitrary<uint64_t>();
    c.gen = kv::kGeneratorVersion;
    return c;
  });
}

RC_GTEST_PROP(CaseProp, StrParseRoundTrip, ()) {
  const Case c = *case_gen();
  const std::string s = c.str();
  RC_ASSERT(s.rfind("kv1 ", 0) == 0);
  const Case back = Case::parse(s);
  RC_ASSERT(back == c);
  RC_ASSERT(back.str() == s);
  RC_ASSERT(back.case_id() == c.case_id());
  RC_ASSERT(back.input_id() == c.input_id());
}

RC_GTEST_PROP(CaseProp, HexFloatRoundTripsExactly, (uint64_t bits)) {
  double x;
  std::memcpy(&x, &bits, 8);
  const double y = kv::parse_real(kv::hex_float(x), "attr");
  if (std::isnan(x)) {
    RC_ASSERT(std::isnan(y));
  } else {
    RC_ASSERT(std::memcmp(&x, &y, 8) == 0);  // bitwise: -0.0 and subnormals included
    Case c;
    c.op = "op";
    c.shape = {1};
    c.attrs["eps"] = kv::hex_float(x);
    const double z = Case::parse(c.str()).attr_real("eps");
    RC_ASSERT(std::memcmp(&x, &z, 8) == 0);
  }
}

TEST(Case, HexFloatKnownValues) {
  for (double x : {0.0, -0.0, 1.0, 1e-6, 0.1, -3.5, 5e-324, 1.7976931348623157e308, 0x1.fffffep127})
    EXPECT_EQ(kv::parse_real(kv::hex_float(x), "x"), x) << kv::hex_float(x);
  EXPECT_TRUE(std::signbit(kv::parse_real(kv::hex_float(-0.0), "x")));
  EXPECT_EQ(kv::parse_real("1e-5", "x"), 1e-5);  // decimal accepted too
  EXPECT_THROW(kv::parse_real("1e-5x", "x"), kv::UsageError);
  EXPECT_THROW(kv::parse_real("", "x"), kv::UsageError);
}

// Parses s and expects a UsageError whose message contains `needle`.
void expect_usage_error(const std::string& s, const std::string& needle) {
  try {
    Case::parse(s);
    ADD_FAILURE() << "accepted: '" << s << "'";
  } catch (const kv::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "for '" << s << "' the message was: " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a UsageError for '" << s << "': " << e.what();
  }
}

TEST(Case, MalformedStringsAreRejectedWithReason) {
  const std::string ok = "kv1 op=rms_norm.fwd shape=4x8";
  ASSERT_NO_THROW(Case::parse(ok));
  expect_usage_error("op=rms_norm.fwd shape=4x8", "kv1");
  expect_usage_error("kv2 op=rms_norm.fwd shape=4x8", "kv1");
  expect_usage_error("", "kv1");
  expect_usage_error("kv1 shape=4x8", "no op=");
  expect_usage_error("kv1 op=rms_norm.fwd", "no shape=");
  expect_usage_error("kv1 op=x shape=-3x4", "negative dimension");
  expect_usage_error("kv1 op=x shape=4x-3", "negative dimension");
  expect_usage_error("kv1 op=x shape=3xa", "dimension");
  expect_usage_error("kv1 op=x shape=1.5", "dimension");
  expect_usage_error("kv1 op=x shape=4x", "dimension");
  expect_usage_error("kv1 op=x shape=", "shape");
  expect_usage_error(ok + " colour=red", "unknown case field 'colour'");
  expect_usage_error(ok + " junk", "expected key=value");
  expect_usage_error(ok + " dtypes=x:fp8", "unknown dtype 'fp8'");
  expect_usage_error(ok + " dtypes=x", "dtypes");
  expect_usage_error(ok + " gen=999", "generator version 999");
  expect_usage_error(ok + " gen=one", "generator version");
  expect_usage_error(ok + " seed=-1", "malformed seed '-1'");
  expect_usage_error(ok + " seed=abc", "malformed seed 'abc'");
  expect_usage_error(ok + " seed=", "malformed seed");
  expect_usage_error(ok + " seed=12x", "malformed seed");
  expect_usage_error(ok + " seed=99999999999999999999999", "malformed seed");  // > 2^64
  expect_usage_error(ok + " config=block", "malformed config entry 'block'");
  expect_usage_error(ok + " config=a:1,block", "malformed config entry 'block'");
  expect_usage_error(ok + " config=:1", "malformed config entry");
  expect_usage_error(ok + " attrs=eps", "malformed attrs entry");
  expect_usage_error(ok + " layout=x", "malformed layout");
  expect_usage_error(ok + " layout=x+-1", "negative layout offset");
  expect_usage_error(ok + " layout=x+0/1,b", "layout stride");
}

TEST(Case, AcceptsBothSeparatorsAndLargeSeed) {
  const Case c = Case::parse("kv1 op=o shape=2x0x3 config=a=1,b:2 seed=18446744073709551615 gen=1");
  EXPECT_EQ(c.config.at("a"), "1");
  EXPECT_EQ(c.config.at("b"), "2");
  EXPECT_EQ(c.seed, UINT64_MAX);
  EXPECT_EQ(c.shape, (std::vector<int64_t>{2, 0, 3}));
  EXPECT_EQ(c.dist, "normal");  // default when absent
  EXPECT_EQ(c.config_int("a", 7), 1);
  EXPECT_EQ(c.config_int("zz", 7), 7);
  EXPECT_THROW(c.attr("missing"), kv::UsageError);
}

Case base_case() {
  Case c;
  c.op = "rms_norm.fwd";
  c.impl = "host.naive";
  c.config = {{"block", "256"}};
  c.shape = {4, 64};
  c.dtypes = {{"x", DType::bf16}, {"y", DType::bf16}};
  c.attrs = {{"eps", kv::hex_float(1e-6)}};
  c.dist = "normal";
  c.seed = 42;
  return c;
}

TEST(Case, CaseIdSeparatesImplAndConfig) {
  const Case a = base_case();
  Case b = a;
  EXPECT_EQ(a.case_id(), b.case_id());
  b.impl = "host.blocked";
  EXPECT_NE(a.case_id(), b.case_id());
  b = a;
  b.config["block"] = "128";
  EXPECT_NE(a.case_id(), b.case_id());
  b = a;
  b.layout["x"] = kv::TensorLayout{1, {}};
  EXPECT_NE(a.case_id(), b.case_id());
}

TEST(Case, InputIdIgnoresImplConfigLayoutOnly) {
  const Case a = base_case();
  auto same = [&](auto mutate, const char* what) {
    Case b = a;
    mutate(b);
    EXPECT_EQ(a.input_id(), b.input_id()) << what;
  };
  auto differs = [&](auto mutate, const char* what) {
    Case b = a;
    mutate(b);
    EXPECT_NE(a.input_id(), b.input_id()) << what;
  };
  same([](Case& b) { b.impl = "other"; }, "impl");
  same([](Case& b) { b.config = {{"block", "64"}, {"vec", "4"}}; }, "config");
  same([](Case& b) { b.layout["x"] = kv::TensorLayout{3, {128, 2}}; }, "layout");
  differs([](Case& b) { b.seed = 43; }, "seed");
  differs([](Case& b) { b.shape = {4, 65}; }, "shape");
  differs([](Case& b) { b.shape = {4, 64, 1}; }, "shape rank");
  differs([](Case& b) { b.dtypes["x"] = DType::f32; }, "dtypes");
  differs([](Case& b) { b.attrs["eps"] = kv::hex_float(1e-5); }, "attrs");
  differs([](Case& b) { b.dist = "wide"; }, "dist");
  differs([](Case& b) { b.op = "rms_norm.bwd"; }, "op");
}

// The same separation on random cases: replacing impl/config/layout never moves input_id.
RC_GTEST_PROP(CaseProp, InputIdInvariantUnderImplConfigLayout, ()) {
  const Case a = *case_gen();
  Case b = a;
  b.impl = *value_gen();
  b.config = *kv_gen();
  b.layout.clear();
  RC_ASSERT(a.input_id() == b.input_id());
  b.seed = a.seed + 1;
  RC_ASSERT(a.input_id() != b.input_id());
}

}  // namespace
