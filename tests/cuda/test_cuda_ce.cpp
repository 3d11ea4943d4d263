// CUDA cross-entropy and fused-linear-cross-entropy impls through the runner: they pass
// across dtypes, attributes and configs, refuse what they cannot run before launching,
// and keep their determinism claims. Skipped, saying why, without a GPU.
#include <gtest/gtest.h>

#include "ce_cases.hpp"
#include "cuda/cuda_test_util.hpp"
#include "op_cases.hpp"

namespace {

using kvtest::expect_pass;
using kvtest::run_cuda;
using Attrs = std::map<std::string, std::string>;

kv::Case cuda_case(const std::string& op, std::vector<int64_t> shape, const std::string& x, Attrs attrs,
                   std::map<std::string, std::string> config, const std::string& dist = "normal", uint64_t seed = 3) {
  kv::Case c = kvtest::op_case(op, std::move(shape), x, std::move(attrs), dist, seed);
  c.impl = "cuda";
  c.config = std::move(config);
  return c;
}

/// The reason the impl gives for not running the case (empty: it runs).
std::string reason(kv::Case c, const std::string& profile = "") {
  kv::registry().normalize(c);
  kv::DeviceProfile p;
  p.sm_count = 132;
  p.smem_per_block = 227 * 1024;
  p.apply_overrides(profile);
  return kv::registry().impl(c.op, c.impl).invalid_reason(c, p).value_or("");
}

const std::vector<Attrs> kCeAttrs = {
    {},
    {{"reduction", "none"}, {"label_smoothing", "0.1"}, {"z_loss", "1e-4"}},
    {{"reduction", "sum"}, {"softcap", "30"}, {"weights", "class"}, {"label_smoothing", "0.2"}},
    {{"weights", "class"}, {"ignore_index", "3"}, {"z_loss", "0.01"}}};

}  // namespace

// Rows of one block (113: element accesses), of three blocks in a cluster (5000 at
// block_v=2048, a partial last block) and the whole row in one block (row), every dtype,
// every attribute family, one to thirty-two warps.
TEST(Cuda, CrossEntropyPassesAcrossDtypesAttributesAndConfigs) {
  REQUIRE_GPU();
  for (const char* op : {"cross_entropy.fwd", "cross_entropy.bwd"})
    for (const char* x : {"fp32", "fp16", "bf16"})
      for (size_t i = 0; i < kCeAttrs.size(); ++i) {
        const char* dist = i % 2 ? "large" : "normal";
        expect_pass(cuda_case(op, {9, 113}, x, kCeAttrs[i], {{"num_warps", "1"}}, dist));
        expect_pass(cuda_case(op, {6, 5000}, x, kCeAttrs[i], {{"num_warps", "4"}, {"block_v", "2048"}}, dist));
        expect_pass(cuda_case(op, {3, 2, 5000}, x, kCeAttrs[i], {{"num_warps", "32"}, {"block_v", "row"}}, dist));
      }
}

// The gradient written over the logits (one block and a cluster), padded and misaligned
// logits, a row too long for the shared-memory cache (read again), Llama 3's vocabulary,
// every row ignored under mean (the loss NaN or 0 as empty_mean names it, the gradient 0),
// and NaN/inf logits in ignored rows under either ignored_grad (NaN or an exact 0 there).
TEST(Cuda, CrossEntropyHandlesInPlaceLayoutsLongRowsAndAllIgnored) {
  REQUIRE_GPU();
  for (const char* bv : {"row", "auto"}) {
    kv::Case c = cuda_case("cross_entropy.bwd", {4, 30000}, "bf16", {{"label_smoothing", "0.1"}}, {{"block_v", bv}});
    c.alias["dlogits"] = "logits";
    expect_pass(c);
  }
  kv::Case m = cuda_case("cross_entropy.fwd", {3, 1000}, "fp16", {{"softcap", "15"}}, {{"num_warps", "2"}});
  m.layout["logits"] = {1, {}};
  expect_pass(m);
  kv::Case s = cuda_case("cross_entropy.bwd", {3, 1000}, "fp32", {{"reduction", "sum"}}, {{"block_v", "2048"}});
  s.layout["logits"] = {0, {1008, 1}};
  s.layout["dlogits"] = {4, {1012, 1}};
  expect_pass(s);
  expect_pass(cuda_case("cross_entropy.bwd", {2, 100000}, "fp32", {{"z_loss", "1e-4"}}, {{"block_v", "row"}}, "large"));
  expect_pass(cuda_case("cross_entropy.fwd", {2, 128256}, "bf16", {{"label_smoothing", "0.1"}}, {}, "large"));
  // One row, and a seed whose row is ignored: mean over no rows.
  const uint64_t seed = kvtest::seed_ignoring_every_row(cuda_case("cross_entropy.fwd", {1, 50}, "bf16", {}, {}));
  ASSERT_LT(seed, 500u) << "no seed below 500 ignores the row";
  for (const char* o : {"cross_entropy.fwd", "cross_entropy.bwd"})
    for (const char* em : {"nan", "zero"})
      expect_pass(cuda_case(o, {1, 50}, "bf16", {{"empty_mean", em}}, {}, "normal", seed));
  for (const char* ig : {"propagate", "zero"})
    for (const char* dist : {"nan_inject", "inf_inject"}) {
      expect_pass(cuda_case("cross_entropy.bwd", {64, 300}, "fp32", {{"ignored_grad", ig}}, {}, dist));
      expect_pass(cuda_case("cross_entropy.bwd", {16, 5000}, "bf16", {{"ignored_grad", ig}, {"softcap", "30"}},
                            {{"block_v", "2048"}}, dist));
      expect_pass(cuda_case("fused_linear_cross_entropy.bwd", {64, 32, 100}, "fp32", {{"ignored_grad", ig}}, {}, dist));
    }
}

// Refused before launch with the reason: more blocks per row than a cluster holds, two
// dtypes for logits and gradient, a warp of 64 making num_warps=32 2048 threads.
TEST(Cuda, CrossEntropyRejectsWhatItCannotRun) {
  EXPECT_NE(reason(cuda_case("cross_entropy.fwd", {2, 128256}, "bf16", {}, {{"block_v", "2048"}})).find("at most 8"),
            std::string::npos);
  kv::Case d = cuda_case("cross_entropy.bwd", {2, 300}, "bf16", {}, {});
  d.dtypes["dlogits"] = kv::DType::f32;
  EXPECT_NE(reason(d).find("one dtype"), std::string::npos) << reason(d);
  EXPECT_NE(reason(cuda_case("cross_entropy.fwd", {1, (int64_t(1) << 24) + 1}, "fp32", {}, {})).find("2^24"),
            std::string::npos);
  REQUIRE_GPU();  // the thread limit asks the kernel
  for (const char* op : {"cross_entropy.fwd", "cross_entropy.bwd"}) {
    kv::Case w = cuda_case(op, {4, 256}, "bf16", {}, {{"num_warps", "32"}});
    EXPECT_NE(reason(w, "warp_size=64").find("2048 threads"), std::string::npos) << reason(w, "warp_size=64");
    EXPECT_EQ(reason(w), "") << op;
  }
}

// fwd and bwd, every dtype (bf16/fp16 products take G in x's dtype), bias, smoothing, z-loss
// and softcap, ignored rows, one chunk and several (300 rows in chunks of 256), one to
// thirty-two warps, and the shapes of Liger's tests scaled to the host reference.
TEST(Cuda, FlcePassesAcrossDtypesAttributesAndConfigs) {
  REQUIRE_GPU();
  const std::vector<Attrs> attrs = {
      {},
      {{"bias", "true"}, {"label_smoothing", "0.1"}, {"z_loss", "1e-4"}, {"softcap", "30"}, {"reduction", "sum"}},
      {{"reduction", "none"}, {"ignore_index", "2"}}};
  for (const char* op : {"fused_linear_cross_entropy.fwd", "fused_linear_cross_entropy.bwd"})
    for (const char* x : {"fp32", "fp16", "bf16"})
      for (auto a : attrs) {
        a["grad_rounding"] = "x_dtype";
        expect_pass(cuda_case(op, {8, 512, 512}, x, a, {{"num_warps", "1"}}));
        expect_pass(cuda_case(op, {300, 64, 257}, x, a, {{"chunk", "256"}, {"num_warps", "32"}, {"block_v", "row"}}));
      }
  // fp32 operands compute either G rounding.
  expect_pass(cuda_case("fused_linear_cross_entropy.bwd", {33, 128, 1000}, "fp32", {{"bias", "true"}}, {{"chunk", "256"}}));
}

// dx, dweight and dbias written over x, weight and bias (each accumulator is rounded into
// its output after the last product read the input), and a chunk past the rows.
TEST(Cuda, FlceWritesGradientsOverItsInputs) {
  REQUIRE_GPU();
  kv::Case c = cuda_case("fused_linear_cross_entropy.bwd", {70, 64, 300}, "bf16",
                         {{"bias", "true"}, {"grad_rounding", "x_dtype"}}, {{"chunk", "256"}});
  c.alias["dx"] = "x";
  c.alias["dweight"] = "weight";
  c.alias["dbias"] = "bias";
  expect_pass(c);
}

// Accumulating dW in bf16 (the upstream trap) declares its bf16 roundings and passes; over
// 16 chunks its dweight errs visibly more than the fp32 accumulator's (max ulps).
TEST(Cuda, FlceBf16AccumulationPassesWithItsCostVisible) {
  REQUIRE_GPU();
  double ulps[2];
  int i = 0;
  for (const char* acc : {"fp32", "bf16"}) {
    kv::Case c = cuda_case("fused_linear_cross_entropy.bwd", {4096, 64, 500}, "bf16", {{"grad_rounding", "x_dtype"}},
                           {{"chunk", "256"}, {"dw_acc", acc}});
    auto j = run_cuda(c);
    EXPECT_EQ(j["verdict"], "pass") << j["case"] << ": " << j.value("reason", "");
    ulps[i++] = j["outputs"]["dweight"]["max_ulps"].get<double>();
  }
  EXPECT_GT(ulps[1], ulps[0]);
}

// Refused before launch: bf16 products cannot take G in fp32; bf16 accumulation needs bf16
// operands; x's rows misaligned for the products; a warp of 64.
TEST(Cuda, FlceRejectsWhatItCannotRun) {
  const std::string bwd = "fused_linear_cross_entropy.bwd";
  EXPECT_NE(reason(cuda_case(bwd, {8, 64, 100}, "bf16", {}, {})).find("grad_rounding=x_dtype"), std::string::npos);
  EXPECT_NE(reason(cuda_case(bwd, {8, 64, 100}, "fp32", {}, {{"dw_acc", "bf16"}})).find("bf16 inputs only"),
            std::string::npos);
  kv::Case m = cuda_case(bwd, {8, 64, 100}, "bf16", {{"grad_rounding", "x_dtype"}}, {});
  m.layout["x"] = {1, {}};
  EXPECT_NE(reason(m).find("16-byte aligned"), std::string::npos) << reason(m);
  REQUIRE_GPU();
  kv::Case w = cuda_case(bwd, {8, 64, 100}, "bf16", {{"grad_rounding", "x_dtype"}}, {{"num_warps", "32"}});
  EXPECT_NE(reason(w, "warp_size=64").find("2048 threads"), std::string::npos) << reason(w, "warp_size=64");
  EXPECT_EQ(reason(w), "");
}

// run_to_run, as claimed: FLCE's gradients and CE's gradient repeat their bits; CE's two
// kernels (pipelined for aligned rows, staged for the rest) give the same bits.
TEST(Cuda, CrossEntropyAndFlceRepeatTheirBits) {
  REQUIRE_GPU();
  auto digest = [](const nlohmann::json& j, const char* t) { return j["outputs"][t]["digest"]["xxh64"]; };
  kv::Case f = cuda_case("fused_linear_cross_entropy.bwd", {600, 256, 3000}, "bf16",
                         {{"bias", "true"}, {"grad_rounding", "x_dtype"}}, {{"chunk", "256"}});
  auto a = run_cuda(f), b = run_cuda(f);
  for (const char* t : {"dx", "dweight", "dbias"}) EXPECT_EQ(digest(a, t), digest(b, t)) << t;
  kv::Case c = cuda_case("cross_entropy.bwd", {64, 30000}, "bf16", {}, {});
  const auto bits = digest(run_cuda(c), "dlogits");
  EXPECT_EQ(digest(run_cuda(c), "dlogits"), bits);
  // Misaligned rows take the staged kernel, aligned ones the pipelined: the same bits.
  c.layout["logits"] = {1, {}};
  EXPECT_EQ(digest(run_cuda(c), "dlogits"), bits);
}
