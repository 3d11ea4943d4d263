// The formats external impls speak: .safetensors files (bits survive a round trip through
// strided views; every malformed file is refused with its defect named) and contracts
// declared as JSON (what `list` prints reads back to the same contract; bad ones are refused).
#include <gtest/gtest.h>

#include <filesystem>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/registry.hpp"
#include "core/safetensors.hpp"
#include "cli_util.hpp"

namespace {

using namespace kv;

std::string write_raw(const std::string& dir, const std::string& name, const std::string& bytes) {
  std::string p = dir + "/" + name;
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));
  return s;
}

std::string expect_refused(const std::string& path) {
  try {
    read_safetensors(path);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  ADD_FAILURE() << path << " was accepted";
  return "";
}

}  // namespace

TEST(Safetensors, BitsSurviveARoundTripThroughStridedViews) {
  const std::string dir = kvtest::tmpdir("st_roundtrip");
  std::map<std::string, StoredTensor> out;
  std::map<std::string, std::vector<uint32_t>> want;
  for (DType d : {DType::f32, DType::f16, DType::bf16, DType::i32}) {
    // A 3x5 view into 3x8 storage at offset 2: every bit pattern class (NaN, inf, -0,
    // subnormals) passes through unchanged.
    Buffer b(static_cast<size_t>(2 + 3 * 8) * dtype_size(d));
    TensorView v{TensorDesc{"t", d, {3, 5}, {8, 1}, 2}, b.payload()};
    std::vector<uint32_t> bits;
    for (int64_t i = 0; i < 15; ++i) {
      uint32_t x = static_cast<uint32_t>(0x9E3779B9u * (i + 1)) ^ (i % 4 == 0 ? 0xFFFFFFFFu : 0);
      if (dtype_size(d) == 2) x &= 0xFFFF;
      v.set_bits(i, x);
      bits.push_back(x);
    }
    out[std::string(dtype_name(d))] = gather(v);
    want[std::string(dtype_name(d))] = bits;
  }
  write_safetensors(dir + "/a.safetensors", out, {{"case", "kv1 op=x"}});
  auto back = read_safetensors(dir + "/a.safetensors");
  ASSERT_EQ(back.size(), 4u);
  for (auto& [name, t] : back) {
    const DType d = t.dtype;
    EXPECT_EQ(std::string(dtype_name(d)), name);
    EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 5}));
    Buffer b(static_cast<size_t>(1 + 5 * 4) * dtype_size(d));  // transposed: strides {1, 4}, offset 1
    TensorView v{TensorDesc{"t", d, {3, 5}, {1, 4}, 1}, b.payload()};
    scatter(t, v);
    for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(v.bits(i), want[name][static_cast<size_t>(i)]) << name << " " << i;
  }
  // A tensor of another shape or dtype is refused, not reinterpreted.
  Buffer b(15 * 4);
  TensorView v{TensorDesc{"t", DType::f32, {5, 3}, {}, 0}, b.payload()};
  EXPECT_THROW(scatter(back.at("fp32"), v), std::runtime_error);
  TensorView w{TensorDesc{"t", DType::i32, {3, 5}, {}, 0}, b.payload()};
  EXPECT_THROW(scatter(back.at("fp32"), w), std::runtime_error);
}

TEST(Safetensors, MalformedFilesAreRefusedWithTheirDefect) {
  const std::string dir = kvtest::tmpdir("st_bad");
  auto msg = [&](const std::string& name, const std::string& bytes) { return expect_refused(write_raw(dir, name, bytes)); };
  EXPECT_NE(msg("short", "abc").find("shorter than"), std::string::npos);
  EXPECT_NE(msg("len", le64(1000) + "{}").find("exceeds the file"), std::string::npos);
  EXPECT_NE(msg("json", le64(4) + "{{{{").find("not JSON"), std::string::npos);
  const std::string h1 = R"({"x":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})";
  EXPECT_NE(msg("dtype", le64(h1.size()) + h1 + std::string(8, '\0')).find("unsupported dtype C64"), std::string::npos);
  const std::string h2 = R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})";
  EXPECT_NE(msg("size", le64(h2.size()) + h2 + std::string(8, '\0')).find("8 bytes for 3 elements"), std::string::npos);
  const std::string h3 = R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
  EXPECT_NE(msg("trunc", le64(h3.size()) + h3 + std::string(8, '\0')).find("outside the data"), std::string::npos);
  const std::string h4 = R"({"x":{"dtype":"F32","shape":[2]}})";
  EXPECT_NE(msg("field", le64(h4.size()) + h4).find("x:"), std::string::npos);
  EXPECT_NE(expect_refused(dir + "/missing").find("missing"), std::string::npos);
}

TEST(ContractJson, WhatListPrintsReadsBackToTheSameContract) {
  register_builtin();
  int checked = 0;
  for (auto* op : registry().ops())
    for (auto* im : registry().impls(op->name())) {
      Case c;
      c.op = op->name();
      c.impl = im->name();
      c.shape = op->example_shape();
      c.dtypes["x"] = DType::bf16;
      registry().normalize(c);
      Contract k = im->contract(c, host_device().profile);
      Contract back = Contract::from_json(k.to_json());
      EXPECT_EQ(back.hash(), k.hash()) << c.str() << "\n" << k.to_json().dump() << "\n" << back.to_json().dump();
      ++checked;
    }
  EXPECT_GT(checked, 15);
}

TEST(ContractJson, DefectsAreRefusedByName) {
  auto why = [](const char* text) -> std::string {
    try {
      Contract::from_json(nlohmann::json::parse(text));
    } catch (const UsageError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(why(R"({"acc":"fp32","fmaa":true})").find("unknown field 'fmaa'"), std::string::npos);
  EXPECT_NE(why(R"({"acc":"fp64"})").find("'fp64'"), std::string::npos);
  EXPECT_NE(why(R"({"reductions":{"row":{"serial":-1}}})").find("row.serial"), std::string::npos);
  EXPECT_NE(why(R"({"reductions":{"row":{}}})").find("no rounding steps"), std::string::npos);
  EXPECT_NE(why(R"({"reductions":{"row":{"serial":4,"n_eff":3}}})").find("n_eff"), std::string::npos);
  EXPECT_NE(why(R"({"math_ulps":{"exp":"two"}})").find("math_ulps.exp"), std::string::npos);
  EXPECT_NE(why(R"({"determinism":{"y":["always"]}})").find("unknown claim"), std::string::npos);
  EXPECT_NE(why(R"({"u":1e-9})").find("below"), std::string::npos);
  EXPECT_NE(why(R"([1,2])").find("not a JSON object"), std::string::npos);
  // A directed rounding mode's u survives; RN's is the default.
  Contract k = Contract::from_json(nlohmann::json::parse(R"({"acc":"fp32","u":1.1920928955078125e-07})"));
  EXPECT_EQ(k.unit(), 0x1p-23);
}

TEST(Repro, AFailingCaseLeavesABundleThatReadsBack) {
  const std::string out = kvtest::tmpdir("repro");
  kvtest::Out o = kvtest::sh(KV_TESTBIN, "run --op rms_norm.fwd --impl host.bug.drop_last_square --dtype bf16 --shape 3x40 --out " + out);
  ASSERT_EQ(o.code, 1) << o.text;
  std::string dir;
  for (auto& e : std::filesystem::directory_iterator(out + "/repro")) dir = e.path().string();
  ASSERT_FALSE(dir.empty()) << o.text;
  auto t = read_safetensors(dir + "/tensors.safetensors");
  for (const char* n : {"x", "w", "y", "rstd", "ref.y", "ref_err.y", "lo.y", "hi.y", "ref.rstd"}) ASSERT_TRUE(t.count(n)) << n;
  EXPECT_EQ(t.at("y").dtype, DType::bf16);
  EXPECT_EQ(t.at("y").shape, (std::vector<int64_t>{3, 40}));
  EXPECT_TRUE(t.at("ref.y").f64);
  // The reference lies in its admissible interval, element by element.
  auto f64 = [&](const char* n, size_t i) {
    double v;
    std::memcpy(&v, t.at(n).bytes.data() + 8 * i, 8);
    return v;
  };
  for (size_t i = 0; i < 120; ++i) {
    EXPECT_LE(f64("lo.y", i), f64("ref.y", i));
    EXPECT_LE(f64("ref.y", i), f64("hi.y", i));
  }
  std::ifstream f(dir + "/case.json");
  auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_NE(j["replay"].get<std::string>().find("impl=host.bug.drop_last_square"), std::string::npos);
}
