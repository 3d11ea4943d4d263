// The GPU input generator (device/gpu_fill.cu) against the host loop, bit for bit: every
// distribution, fp32/fp16/bf16, ranks 1 to 6 (dims past the third folded into one counter
// word), rows that split blocks unevenly. And the runner's switch: a case on the CUDA device
// records the same input digests with the GPU generator as with KV_INPUTS=host.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/inputs.hpp"
#include "core/tensor.hpp"
#include "device/gpu_fill.hpp"
#include "cuda/cuda_test_util.hpp"

namespace {

/// The host loop's bits for (dist, dtype, shape): fill_tensor with the GPU not allowed.
std::vector<uint8_t> host_bits(const std::string& dist, kv::DType dt, const std::vector<int64_t>& shape, double shift,
                               double scale) {
  kv::allow_gpu_fill(false);
  kv::TensorDesc desc{"x", dt, shape, {}, 0};
  kv::Buffer b(static_cast<size_t>(desc.storage_bytes()));
  kv::TensorView v{desc, b.payload()};
  kv::fill_tensor(v, dist, 7, shift, scale);
  return std::vector<uint8_t>(b.payload(), b.payload() + desc.storage_bytes());
}

std::vector<uint8_t> gpu_bits(const std::string& dist, kv::DType dt, const std::vector<int64_t>& shape, double shift,
                              double scale) {
  kv::TensorDesc desc{"x", dt, shape, {}, 0};
  std::vector<uint8_t> out(static_cast<size_t>(desc.storage_bytes()), 0xAB);
  const kv::ValueDrawer dr(dist, dt, 7, "x", shift, scale);
  EXPECT_TRUE(kv::gpu_fill(dr.spec(), shape, out.data()));
  return out;
}

TEST(GpuFill, BitForBitTheHostLoop) {
  REQUIRE_GPU();
  const std::vector<std::vector<int64_t>> shapes = {{1000003}, {3, 700, 129}, {2, 3, 5, 7, 11, 13}, {64, 4097}};
  for (const std::string& dist : kv::known_dists())
    for (kv::DType dt : {kv::DType::f32, kv::DType::f16, kv::DType::bf16})
      for (const auto& shape : shapes) {
        const auto h = host_bits(dist, dt, shape, 0.5, 2.0), g = gpu_bits(dist, dt, shape, 0.5, 2.0);
        ASSERT_EQ(h.size(), g.size());
        size_t first = 0;
        while (first < h.size() && h[first] == g[first]) ++first;
        EXPECT_EQ(first, h.size()) << dist << " " << kv::dtype_name(dt) << " rank " << shape.size()
                                   << ": first differing byte " << first;
      }
}

TEST(GpuFill, ADifferentGeneratorIsCaught) {
  // Negative control: a scale 2^-20 off (a few fp32 ulps) must show in the comparison, in
  // most elements.
  REQUIRE_GPU();
  const std::vector<int64_t> shape = {512, 1024};
  const auto h = host_bits("normal", kv::DType::f32, shape, 0.5, 2.0);
  const auto g = gpu_bits("normal", kv::DType::f32, shape, 0.5, 2.0 + 0x1p-20);
  ASSERT_EQ(h.size(), g.size());
  size_t differ = 0;
  for (size_t i = 0; i < h.size(); i += 4) differ += std::memcmp(&h[i], &g[i], 4) != 0;
  EXPECT_GT(differ, h.size() / 4 / 2);
}

TEST(GpuFill, RunnerRecordsTheSameInputsEitherWay) {
  REQUIRE_GPU();
  kv::Case c;
  c.op = "rope.fwd", c.impl = "cuda", c.shape = {1, 2048, 12, 128}, c.dtypes = {{"x", kv::DType::bf16}}, c.seed = 3;
  c.attrs["positions"] = "3d";
  const auto gpu = kvtest::run_cuda(c);
  setenv("KV_INPUTS", "host", 1);
  const auto host = kvtest::run_cuda(c);
  unsetenv("KV_INPUTS");
  EXPECT_EQ(gpu["verdict"], "pass") << gpu.value("reason", "");
  EXPECT_EQ(gpu["inputs"], host["inputs"]);
  EXPECT_EQ(gpu["outputs"], host["outputs"]);
}

}  // namespace
