// CUDA tests: they run on a GPU machine and skip, saying why, where there is none.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>

#include "device/calibrate.hpp"
#include "check/results.hpp"
#include "device/cuda_device.hpp"
#include "cuda/cuda_test_util.hpp"
#include "kernels/cuda_impl.hpp"
#include "op_cases.hpp"
#include "test_util.hpp"

namespace {

using kv::DType;
using kvtest::expect_pass;
using kvtest::run_cuda;

/// The test binary beside this one when the build tree is not here (a GPU machine).
std::string testbin() {
  if (std::filesystem::exists(KV_TESTBIN)) return KV_TESTBIN;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "kverify-testbin").string();
}

}  // namespace

TEST(Cuda, RmsNormPassesAcrossModesDtypesAndConfigs) {
  REQUIRE_GPU();
  for (bool bwd : {false, true})
    for (const char* mode : {"llama", "gemma", "none"})
      for (DType x : {DType::f32, DType::f16, DType::bf16})
        for (const char* nw : {"1", "32"}) {
          kv::Case c = kvtest::rms_case(bwd, "cuda", {5, 123, 123}, {{"x", x}}, mode, 1);
          c.config["num_warps"] = nw;
          if (bwd) c.config["dw"] = *nw == '1' ? "atomics" : "fixed_partials";
          auto j = run_cuda(c);
          EXPECT_TRUE(j["verdict"] == "pass" || (j["verdict"] == "unverifiable" && std::string(mode) == "none"))
              << j["case"] << ": " << j["verdict"] << " " << j.value("reason", "");
        }
}

TEST(Cuda, GluPassesAcrossDtypesDistsAndConfigs) {
  REQUIRE_GPU();
  for (const char* op : {"swiglu.fwd", "swiglu.bwd", "geglu.fwd", "geglu.bwd"})
    for (const char* x : {"fp32", "fp16", "bf16"})
      for (const char* dist : {"normal", "large", "wide"})
        for (const char* nw : {"1", "32"}) {
          kv::Case c = kvtest::op_case(op, {7, 333}, x, {}, dist, 3);
          c.impl = "cuda";
          c.config["num_warps"] = nw;
          auto j = run_cuda(c);
          EXPECT_EQ(j["verdict"], "pass") << j["case"] << ": " << j["verdict"] << " " << j.value("reason", "");
        }
}

namespace {

/// A case of a CUDA row impl (softmax, layer_norm) with x's dtype and a config.
kv::Case row_case(const std::string& op, std::vector<int64_t> shape, const std::string& x, const std::string& nw,
                  const std::string& dw = "", const std::string& dist = "normal", uint64_t seed = 5) {
  kv::Case c = kvtest::op_case(op, std::move(shape), x, {}, dist, seed);
  c.impl = "cuda";
  c.config["num_warps"] = nw;
  if (!dw.empty()) c.config["dw"] = dw;
  return c;
}

}  // namespace

// Every CUDA softmax/layer_norm impl x dtype x num_warps (x dW strategy) at odd row lengths
// (113, 799: element accesses), 4096+1 (a tail chunk after vector accesses), an aligned
// 3-D shape, and distributions that stress each op (large logits, a large mean over a
// small spread for the two-pass variance).
TEST(Cuda, SoftmaxAndLayerNormPassAcrossDtypesShapesAndConfigs) {
  REQUIRE_GPU();
  for (const char* op : {"softmax.fwd", "softmax.bwd", "layer_norm.fwd", "layer_norm.bwd"}) {
    const bool ln = std::string(op).rfind("layer_norm", 0) == 0, dw = std::string(op) == "layer_norm.bwd";
    const std::vector<std::pair<std::vector<int64_t>, std::string>> shapes = {
        {{5, 113}, "normal"}, {{3, 799}, "wide"}, {{2, 4097}, ln ? "big_mean" : "large"}, {{2, 3, 512}, "mean_shift"}};
    for (const char* x : {"fp32", "fp16", "bf16"})
      for (const char* nw : {"1", "2", "4", "8", "16", "32"})
        for (const char* s : dw ? std::vector<const char*>{"per_sm", "fixed_partials", "atomics"} : std::vector<const char*>{""})
          for (auto& [shape, dist] : shapes) expect_pass(row_case(op, shape, x, nw, s, dist));
  }
}

// The kernels' other paths: misaligned and padded rows (element and vector accesses),
// rows too long for the shared-memory cache (read again) or for shared-memory dW/dB
// partials (kept in the workspace), outputs written in place, w/b/dW/dB and the statistics
// in other dtypes than x, 1-D shapes, fewer rows than dW programs.
TEST(Cuda, RowKernelsHandleLayoutsAliasesMixedDtypesAndLongRows) {
  REQUIRE_GPU();
  std::vector<kv::Case> cs;
  auto add = [&](kv::Case c) { cs.push_back(std::move(c)); };
  {
    kv::Case c = row_case("softmax.fwd", {4, 1536}, "bf16", "8");
    c.layout["x"] = {1, {}};            // misaligned base: element accesses
    c.layout["y"] = {0, {1544, 1}};     // padded rows, aligned: vector accesses
    add(c);
  }
  add(row_case("softmax.fwd", {2, 12289}, "fp32", "4", "", "large"));  // longer than the cache
  {
    kv::Case c = row_case("softmax.fwd", {3, 1024}, "bf16", "2");
    c.alias["y"] = "x";
    add(c);
  }
  {
    kv::Case c = row_case("softmax.bwd", {3, 6000}, "fp16", "16");  // dy and y longer than the cache
    c.alias["dx"] = "dy";
    add(c);
  }
  {
    kv::Case c = row_case("softmax.bwd", {5, 77}, "fp32", "1");
    c.layout["y"] = {2, {90, 1}};
    c.alias["dx"] = "dy";
    add(c);
  }
  add(row_case("softmax.fwd", {1000}, "fp16", "32"));
  {
    kv::Case c = row_case("layer_norm.fwd", {3, 2048}, "bf16", "8", "", "big_mean");
    c.dtypes["w"] = c.dtypes["b"] = DType::f32;
    c.attrs["stat_dtype"] = "x_dtype";
    c.layout["x"] = {8, {2056, 1}};
    add(c);
  }
  {
    kv::Case c = row_case("layer_norm.fwd", {2, 12289}, "fp32", "16", "", "mean_shift");
    c.alias["y"] = "x";
    add(c);
  }
  {
    kv::Case c = row_case("layer_norm.fwd", {4, 333}, "fp16", "1");
    c.layout["w"] = {3, {}};
    c.layout["mean"] = {1, {}};
    add(c);
  }
  for (const char* s : {"per_sm", "fixed_partials", "atomics"}) {
    kv::Case c = row_case("layer_norm.bwd", {40, 6000}, "bf16", "8", s);  // dW/dB partials in the workspace
    c.dtypes["w"] = c.dtypes["dw"] = c.dtypes["db"] = DType::f32;
    add(c);
    kv::Case d = row_case("layer_norm.bwd", {7, 333}, "fp16", "32", s, "big_mean");
    d.attrs["stat_dtype"] = "x_dtype";
    d.layout["x"] = {3, {}};
    d.alias["dx"] = "dy";
    add(d);
    add(row_case("layer_norm.bwd", {777}, "fp32", "4", s));
    add(row_case("layer_norm.bwd", {300, 1536}, "bf16", "8", s, "big_mean"));
  }
  for (auto& c : cs) expect_pass(c);
}

// The RMSNorm kernels' paths (kernels/rms_norm/cuda_launch.hpp): a warp or a team of warps
// per row, rows longer than the registers hold (read again; dW partials in the
// workspace), misaligned and padded rows, in place, y/dy/dx/w in other dtypes than x,
// fewer rows than dW programs, 1024-thread blocks, and the seed shape at the defaults.
TEST(Cuda, RmsNormHandlesLayoutsAliasesMixedDtypesAndLongRows) {
  REQUIRE_GPU();
  std::vector<kv::Case> cs;
  auto rc = [](bool bwd, std::vector<int64_t> shape, DType x, const char* nw, const char* mode = "llama",
               const char* dw = "") {
    kv::Case c = kvtest::rms_case(bwd, "cuda", std::move(shape), {{"x", x}}, mode, 9);
    c.config["num_warps"] = nw;
    if (bwd && *dw) c.config["dw"] = dw;
    return c;
  };
  for (const char* nw : {"1", "4", "32"}) {
    cs.push_back(rc(false, {3, 70001}, DType::bf16, nw, "gemma"));  // past the registers
    kv::Case m = rc(false, {5, 1536}, DType::bf16, nw);
    m.layout["x"] = {1, {}};         // misaligned by 2 bytes: element accesses
    m.layout["y"] = {0, {1544, 1}};  // padded rows, aligned: vector accesses
    cs.push_back(m);
    kv::Case y = rc(false, {4, 4096}, DType::f16, nw, "none");
    y.dtypes["y"] = DType::f32;
    y.dtypes["w"] = DType::bf16;
    cs.push_back(y);
    kv::Case a = rc(false, {6, 2048}, DType::f32, nw);
    a.alias["y"] = "x";
    cs.push_back(a);
    for (const char* s : {"per_sm", "fixed_partials", "atomics"}) {
      cs.push_back(rc(true, {40, 9000}, DType::bf16, nw, "gemma", s));  // past the registers
      kv::Case b = rc(true, {300, 1536}, DType::bf16, nw, "llama", s);
      b.layout["x"] = {1, {}};
      b.alias["dx"] = "dy";
      b.attrs["m_rounding"] = "x_dtype";
      cs.push_back(b);
      kv::Case d = rc(true, {7, 333}, DType::f16, nw, "gemma", s);
      d.dtypes["dy"] = DType::f32;
      d.dtypes["dx"] = DType::bf16;
      d.dtypes["w"] = d.dtypes["dw"] = DType::f32;
      cs.push_back(d);
      cs.push_back(rc(true, {2, 4096}, DType::f32, nw, "llama", s));
    }
  }
  for (auto& c : cs) expect_pass(c);
  for (bool bwd : {false, true}) {  // the defaults at the seed shape
    kv::Case c = kvtest::rms_case(bwd, "cuda", {32760, 1536}, {{"x", DType::bf16}}, "llama", 1);
    expect_pass(c);
  }
  // fixed_partials: the same dW bits on a 108-SM profile; dx and dW repeat run to run.
  auto digest = [](const nlohmann::json& j, const char* t) { return j["outputs"][t]["digest"]["xxh64"]; };
  kv::Case f = rc(true, {1000, 1536}, DType::bf16, "16", "llama", "fixed_partials");
  auto p = run_cuda(f), q = run_cuda(f, "sm_count=108"), r = run_cuda(f);
  for (const char* t : {"dw", "dx"}) {
    EXPECT_EQ(digest(p, t), digest(q, t)) << t;
    EXPECT_EQ(digest(p, t), digest(r, t)) << t;
  }
}

// Clear reasons before launch: one dtype for the rows tensors, N exact in fp32 for
// layer_norm, and the device's thread limit (a warp of 64 makes num_warps=32 2048 threads).
TEST(Cuda, RowKernelsRejectWhatTheyCannotRun) {
  auto reason = [](kv::Case c, const std::string& profile = "") {
    kv::registry().normalize(c);
    kv::DeviceProfile p;
    p.sm_count = 132;
    p.apply_overrides(profile);
    auto why = kv::registry().impl(c.op, c.impl).invalid_reason(c, p);
    return why.value_or("");
  };
  kv::Case c = row_case("softmax.fwd", {4, 256}, "bf16", "8");
  c.dtypes["y"] = DType::f32;
  EXPECT_NE(reason(c).find("specialized for one dtype of x and y"), std::string::npos) << reason(c);
  kv::Case l = row_case("layer_norm.bwd", {2, 256}, "fp16", "8", "atomics");
  l.dtypes["dx"] = DType::bf16;
  EXPECT_NE(reason(l).find("one dtype"), std::string::npos) << reason(l);
  EXPECT_NE(reason(row_case("layer_norm.fwd", {1, (int64_t(1) << 24) + 1}, "fp32", "8")).find("2^24"), std::string::npos);
  kv::Case b = row_case("softmax.fwd", {2, 3, 64}, "bf16", "8");
  b.layout["x"] = {0, {512, 64, 1}};  // two row strides
  EXPECT_NE(reason(b).find("one stride"), std::string::npos) << reason(b);
  // In place only row for row (fuzzing on an H100 drew rstd written over w, which failed).
  kv::Case a = row_case("layer_norm.fwd", {2, 256}, "fp32", "8");
  a.alias["rstd"] = "w";
  a.shape = {256, 256};
  EXPECT_NE(reason(a).find("output rstd cannot be written over w"), std::string::npos) << reason(a);
  kv::Case r;
  r.op = "rms_norm.fwd";
  r.impl = "cuda";
  r.shape = {2, 2};
  r.dtypes["x"] = DType::f32;
  r.alias["rstd"] = "w";
  EXPECT_NE(reason(r).find("output rstd cannot be written over w"), std::string::npos) << reason(r);
  REQUIRE_GPU();  // the thread limit asks the kernel (cudaFuncGetAttributes)
  for (const char* op : {"softmax.fwd", "softmax.bwd", "layer_norm.fwd", "layer_norm.bwd"}) {
    kv::Case w = row_case(op, {4, 256}, "bf16", "32");
    EXPECT_NE(reason(w, "warp_size=64").find("2048 threads"), std::string::npos) << op << ": " << reason(w, "warp_size=64");
    EXPECT_EQ(reason(w), "") << op;
  }
}

// The claims the drift analysis holds them to, spot-checked: fixed_partials dW/dB have the
// same bits on a 108-SM profile as on this GPU; every output repeats its bits run to run.
TEST(Cuda, RowKernelsKeepTheirDeterminismClaims) {
  REQUIRE_GPU();
  auto digest = [](const nlohmann::json& j, const char* t) { return j["outputs"][t]["digest"]["xxh64"]; };
  kv::Case c = row_case("layer_norm.bwd", {1000, 512}, "bf16", "4", "fixed_partials");
  auto a = run_cuda(c), b = run_cuda(c, "sm_count=108"), r = run_cuda(c);
  for (const char* t : {"dw", "db", "dx"}) {
    EXPECT_EQ(digest(a, t), digest(b, t)) << t;
    EXPECT_EQ(digest(a, t), digest(r, t)) << t;
  }
  kv::Case s = row_case("softmax.fwd", {64, 3000}, "fp16", "8");
  EXPECT_EQ(digest(run_cuda(s), "y"), digest(run_cuda(s), "y"));
}

// The seed shape (Wan 1.3B, 32760 x 1536) in bf16, forward, default config.
TEST(Cuda, RowKernelsPassAtTheSeedShape) {
  REQUIRE_GPU();
  for (const char* op : {"softmax.fwd", "layer_norm.fwd"}) expect_pass(row_case(op, {32760, 1536}, "bf16", "8"));
}

TEST(Cuda, WarpSize64RejectsThirtyTwoWarps) {
  REQUIRE_GPU();
  kv::Case c = kvtest::rms_case(false, "cuda", {4, 256}, {{"x", DType::bf16}}, "llama", 1);
  c.config["num_warps"] = "32";
  kv::registry().normalize(c);
  kv::DeviceProfile p = kv::cuda_device(0).profile;
  p.apply_overrides("warp_size=64");
  auto why = kv::registry().impl(c.op, c.impl).invalid_reason(c, p);
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("2048 threads"), std::string::npos) << *why;
  c.config["num_warps"] = "16";
  EXPECT_FALSE(kv::registry().impl(c.op, c.impl).invalid_reason(c, p).has_value());
}

TEST(Cuda, CalibrationMeasuresRsqrtWithinItsDocumentedTwoUlps) {
  REQUIRE_GPU();
  auto m = kv::calibrate_math();
  ASSERT_TRUE(m.max_ulps.count("rsqrt"));
  EXPECT_GT(m.max_ulps["rsqrt"], 0.5);  // not correctly rounded everywhere
  EXPECT_LE(m.max_ulps["rsqrt"], 2.0);
}

TEST(Cuda, StickyErrorEndsTheWorkerAndTheRunGoesOn) {
  REQUIRE_GPU();
  auto d = std::filesystem::temp_directory_path() / "kv_sticky";
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  std::ofstream(d / "suite.json") << R"({"entries": [{"ops": ["rms_norm.fwd"], "impls": ["test.fault", "cuda"],
    "shapes": ["2x64"], "seeds": [1]}]})";
  std::string cmd = testbin() + " run --device cuda --suite " + (d / "suite.json").string() + " --out " +
                    d.string() + " > " + (d / "log").string() + " 2>&1";
  int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 1);
  auto lines = kv::read_results((d / "results.jsonl").string());
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["verdict"], "error");
  EXPECT_NE(lines[0]["reason"].get<std::string>().find("sticky"), std::string::npos) << lines[0]["reason"];
  EXPECT_EQ(lines[1]["verdict"], "pass") << lines[1].value("reason", "");
}

// Device canaries are at least a row of the tensor on each side: a byte a whole row past
// the end of y (3 KiB here, beyond the 256-byte canaries of old) fails the case, naming the
// device; the same for the first byte past the end and a row before the start.
TEST(Cuda, DeviceCanariesCatchWritesARowOutsideAnOutput) {
  REQUIRE_GPU();
  for (const char* where : {"after_1elem", "after_row", "before_row"}) {
    kv::Case c = kvtest::rms_case(false, "test.cuda_oob", {4, 1536}, {{"x", DType::bf16}}, "llama", 1);
    c.config["where"] = where;
    auto j = run_cuda(c);
    EXPECT_EQ(j["verdict"], "fail") << where << ": " << j.dump();
    const std::string why = j.value("reason", "");
    EXPECT_NE(why.find("out-of-bounds write on y"), std::string::npos) << where << ": " << why;
    EXPECT_NE(why.find("on the device"), std::string::npos) << where << ": " << why;
  }
}

// Layout acceptance without a GPU: leading dims collapse to one row stride, and a size-1
// dim's stride is skipped rather than trusted (2x1xN with strides {S0, S1, 1} steps rows by
// S0; the GLU and RMSNorm kernels once took S1).
TEST(Cuda, RowStrideCollapsesLeadingDimsAndSkipsUnitOnes) {
  using kv::collapsed_stride;
  auto desc = [](std::vector<int64_t> shape, std::vector<int64_t> strides) {
    return kv::TensorDesc{"t", DType::f32, std::move(shape), std::move(strides), 0};
  };
  EXPECT_EQ(collapsed_stride(desc({2, 1, 8}, {100, 7, 1}), 2), 100);
  EXPECT_EQ(collapsed_stride(desc({3, 4, 8}, {}), 2), 8);
  EXPECT_EQ(collapsed_stride(desc({3, 4, 8}, {40, 10, 1}), 2), 10);
  EXPECT_EQ(collapsed_stride(desc({3, 4, 8}, {41, 10, 1}), 2), std::nullopt);
  EXPECT_EQ(collapsed_stride(desc({1, 1, 8}, {5, 3, 1}), 2), 0);
  EXPECT_EQ(collapsed_stride(desc({8}, {}), 0), 0);
}
