// Soundness: the correct host impl never fails, whatever summation order its contract
// allows (ascending, descending, shuffled lanes), and not under upward rounding against
// a contract with u = 2^-23.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "test_util.hpp"

namespace {

using kv::DType;

std::map<std::string, DType> gen_dtypes() {
  const DType x = *rc::gen::element(DType::f32, DType::f16, DType::bf16);
  std::map<std::string, DType> d = {{"x", x}};
  if (*rc::gen::arbitrary<bool>()) d["w"] = *rc::gen::element(DType::f32, DType::f16, DType::bf16);
  return d;
}

/// Pass, or unverifiable only under low-precision accumulation (mode none). There the
/// definition's own arithmetic can overflow (rstd^3 in fp16 for tiny rows) and a faithful
/// impl writes NaN where the real value is finite: NaN never passes, so the case fails,
/// but only through NaN in elements whose admissible set is unbounded.
void expect_sound(const nlohmann::json& j) {
  const std::string v = j["verdict"];
  if (kvtest::has_empty_output(j)) {  // zero rows: nothing was checked
    RC_ASSERT(v == "skip");
    return;
  }
  if (v == "fail") {
    RC_ASSERT(j["attrs"]["mode"] == "none");
    for (auto& [name, o] : j["outputs"].items()) RC_ASSERT(o["n_fail"] == o["n_fail_unverifiable"]);
    return;
  }
  RC_ASSERT(v == "pass" || v == "unverifiable");
  if (v == "unverifiable") RC_ASSERT(j["attrs"]["mode"] == "none");  // only low-precision accumulation
}

}  // namespace

RC_GTEST_PROP(RmsSoundness, HostImplPassesUnderEveryAllowedOrder, ()) {
  const bool bwd = *rc::gen::arbitrary<bool>();
  const int64_t rows = *rc::gen::inRange<int64_t>(0, 6);
  const int64_t n = *rc::gen::oneOf(rc::gen::inRange<int64_t>(1, 300),
                                    rc::gen::element<int64_t>(123, 511, 512, 513, 1536, 4097));
  kv::Case c = kvtest::rms_case(bwd, "host", {rows, n}, gen_dtypes(),
                                *rc::gen::element<std::string>("llama", "gemma", "none"),
                                *rc::gen::inRange<uint64_t>(0, 1000000),
                                *rc::gen::element<std::string>("normal", "uniform", "tiny", "large", "mean_shift", "wide"));
  c.config["num_warps"] = *rc::gen::element<std::string>("1", "2", "4", "8", "16", "32");
  c.config["order"] = *rc::gen::element<std::string>("asc", "desc", "shuffle");
  if (bwd) {
    c.config["dw"] = *rc::gen::element<std::string>("fixed_partials", "per_sm", "serial");
    c.attrs["m_rounding"] = *rc::gen::element<std::string>("fp32", "x_dtype");
  }
  c.attrs["offset"] = *rc::gen::element<std::string>("0", "1");
  c.attrs["eps"] = *rc::gen::element<std::string>("1e-6", "1e-5", "1e-30");
  auto j = kvtest::run_in_process(c);
  RC_LOG() << j.dump() << "\n";
  expect_sound(j);
}

TEST(RmsSoundness, UpwardRoundingAgainstTwiceTheUnitRoundoff) {
  // host.upward runs the host impl under fesetround(FE_UPWARD) and declares u = 2^(1-p).
  for (bool bwd : {false, true})
    for (const char* mode : {"llama", "gemma", "none"})
      for (DType x : {DType::f32, DType::bf16, DType::f16})
        for (int64_t n : {123, 1536, 4096}) {
          auto j = kvtest::run_in_process(kvtest::rms_case(bwd, "host.upward", {3, n}, {{"x", x}}, mode, 11));
          const std::string v = j["verdict"];
          EXPECT_TRUE(v == "pass" || (v == "unverifiable" && std::string(mode) == "none")) << j["case"] << ": " << v
                                                                                             << " " << j.value("reason", "");
        }
}

TEST(RmsSoundness, EmptyTensorRunsButIsSkippedNeverPassed) {
  for (bool bwd : {false, true}) {
    auto j = kvtest::run_in_process(kvtest::rms_case(bwd, "host", {0, 64}, {{"x", DType::bf16}}, "llama", 1));
    EXPECT_EQ(j["verdict"], "skip") << j.dump();
  }
}

TEST(RmsSoundness, StridedMisalignedAndInPlaceLayoutsPass) {
  // A padded row stride, a 2-byte misaligned base, and dx written into dy's storage.
  kv::Case f = kvtest::rms_case(false, "host", {4, 100}, {{"x", DType::bf16}}, "llama", 3);
  f.layout["x"] = {1, {128, 1}};
  f.layout["y"] = {3, {101, 1}};
  auto j = kvtest::run_in_process(f);
  EXPECT_EQ(j["verdict"], "pass") << j.dump();
  kv::Case b = kvtest::rms_case(true, "host", {4, 100}, {{"x", DType::bf16}}, "llama", 3);
  b.alias["dx"] = "dy";
  j = kvtest::run_in_process(b);
  EXPECT_EQ(j["verdict"], "pass") << j.dump();
}

TEST(RmsSoundness, Fp16OverflowInModeNoneAdmitsNanOnlyAsUnverifiable) {
  // Found by fuzzing: rows of tiny values in fp16, mode none: rstd^3 overflows fp16 and the
  // host impl (the definition run in fp16) writes NaN (inf * 0) where the real dx is
  // finite. The contract's own arithmetic overflows there (the admissible set is unbounded),
  // so the NaN is admitted, and the case is unverifiable: never a pass.
  kv::Case c = kv::Case::parse(
      "kv1 op=rms_norm.bwd impl=host config=dw:serial,num_warps:8,order:asc shape=2x511 "
      "dtypes=dw:fp16,dx:fp16,dy:fp16,rstd:fp16,w:fp16,x:fp16 attrs=eps:0x1.4f8b588e368f1p-17,m_rounding:x_dtype,"
      "mode:none,offset:0x0p+0 dist=tiny seed=237451 gen=1");
  auto j = kvtest::run_in_process(c);
  EXPECT_EQ(j["verdict"], "unverifiable") << j.dump();
  const auto& dx = j["outputs"]["dx"];
  EXPECT_GT(dx["n_nan_admitted"].get<int64_t>(), 0);
  EXPECT_EQ(dx["n_nan_mismatch"], 0);
  EXPECT_EQ(dx["n_fail"], 0) << dx.dump();
  EXPECT_GE(dx["n_unverifiable"].get<int64_t>(), dx["n_nan_admitted"].get<int64_t>());
  // The same rows in llama mode (fp32 statistics) are bounded, and pass.
  kv::Case l = kv::Case::parse(
      "kv1 op=rms_norm.bwd impl=host config=dw:serial,num_warps:8,order:asc shape=2x511 "
      "dtypes=dw:fp16,dx:fp16,dy:fp16,rstd:fp32,w:fp16,x:fp16 attrs=eps:0x1.4f8b588e368f1p-17,m_rounding:x_dtype,"
      "mode:llama,offset:0x0p+0 dist=tiny seed=237451 gen=1");
  EXPECT_EQ(kvtest::run_in_process(l)["verdict"], "pass");
}
