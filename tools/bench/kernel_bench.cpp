// Kernel benchmark: the time of a CUDA impl's launch alone (CUDA events around each of
// `--reps` launches queued back to back after warm-up launches; inputs generated and
// mirrored once, no reference), as bandwidth over the bytes the op's tensors hold (each
// read or written once), beside a device-to-device copy of the main input measured the
// same way; for FLCE the products' rate (2 BT H V flops each: one forward, three
// backward); and the device memory the launch holds beyond the op's tensors (workspaces,
// cuBLAS's own, measured with cudaMemGetInfo). Prints a markdown table with the GPU's name.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "run/runner.hpp"
#include "device/cuda_check.hpp"
#include "device/cuda_device.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "kernels/cuda_impl.hpp"

namespace {

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Milliseconds of a device-to-device copy of `bytes` (median of reps, after warm-up).
float copy_ms(size_t bytes, int reps) {
  void *a = nullptr, *b = nullptr;
  KV_CUDA(cudaMalloc(&a, bytes));
  KV_CUDA(cudaMalloc(&b, bytes));
  KV_CUDA(cudaMemset(a, 0, bytes));
  cudaEvent_t e0, e1;
  KV_CUDA(cudaEventCreate(&e0));
  KV_CUDA(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < reps + 3; ++i) {
    KV_CUDA(cudaEventRecord(e0));
    KV_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    KV_CUDA(cudaEventRecord(e1));
    KV_CUDA(cudaEventSynchronize(e1));
    float t = 0;
    KV_CUDA(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(a);
  cudaFree(b);
  return median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("kverify kernel benchmark: CUDA impls' launch times (CUDA events) against a device copy");
  std::vector<std::string> ops = {"softmax.fwd", "softmax.bwd", "layer_norm.fwd", "layer_norm.bwd"};
  std::vector<std::string> dtypes = {"bf16"}, configs;
  std::string shape = "32760x1536", impl = "cuda", attrs, alias;
  int reps = 20;
  app.add_option("--op", ops, "ops (repeatable; default: softmax and layer_norm, fwd and bwd)");
  app.add_option("--dtype", dtypes, "x's dtype (repeatable; default bf16)");
  app.add_option("--shape", shape, "shape (default 32760x1536)");
  app.add_option("--config", configs, "num_warps=8,dw=per_sm (repeatable; default: the impl's defaults)");
  app.add_option("--impl", impl, "impl (default cuda)");
  app.add_option("--attrs", attrs, "op attributes, e.g. grad_rounding=x_dtype (default: the op's)");
  app.add_option("--alias", alias, "outputs written over inputs, e.g. q_out=q,k_out=k (rope in place)");
  app.add_option("--reps", reps, "timed launches per row (median; default 20)")->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  if (configs.empty()) configs.push_back("");
  try {
    kv::register_builtin();
    const kv::DeviceInfo dev = kv::cuda_device(0);
    std::printf("GPU: %s; %d timed launches per row after 3 warm-up launches; median\n\n", dev.name.c_str(), reps);
    std::printf("| op | dtype | shape | config | us | GB/s | copy GB/s | of copy | TFLOP/s | extra MiB |\n"
                "|---|---|---|---|---|---|---|---|---|---|\n");
    std::replace(attrs.begin(), attrs.end(), '=', ':');
    std::replace(alias.begin(), alias.end(), '=', ':');
    for (auto& dt : dtypes)
      for (auto& op : ops)
        for (auto cfg : configs) {
          std::replace(cfg.begin(), cfg.end(), '=', ':');
          kv::Case c = kv::Case::parse("kv1 op=" + op + " impl=" + impl + " config=" + cfg + " shape=" + shape +
                                       " dtypes=x:" + dt + " attrs=" + attrs + " dist=normal seed=1 gen=1" +
                                       (alias.empty() ? "" : " alias=" + alias));
          try {
            kv::registry().normalize(c);
          } catch (const kv::UsageError& e) {
            std::printf("| %s | %s | %s | %s | skipped: %s |||||\n", op.c_str(), dt.c_str(), shape.c_str(), cfg.c_str(), e.what());
            continue;
          }
          const auto* ci = dynamic_cast<const kv::CudaImpl*>(&kv::registry().impl(c.op, c.impl));
          if (!ci) throw kv::UsageError("impl " + impl + " of " + op + " is not a CUDA impl");
          if (auto why = ci->invalid_reason(c, dev.profile)) {
            std::printf("| %s | %s | %s | %s | invalid: %s |||||\n", op.c_str(), dt.c_str(), shape.c_str(), cfg.c_str(), why->c_str());
            continue;
          }
          const auto& binding = kv::registry().op(c.op);
          kv::TensorSet ts = kv::allocate_tensors(c, binding);
          binding.generate(c, ts);
          for (auto& w : ci->workspaces(c, dev.profile)) ts.workspaces[w.name] = std::make_shared<kv::Buffer>(w.bytes);
          double bytes = 0, main_bytes = 0, held = 0;
          std::set<const kv::Buffer*> buffers;
          const auto canaries = kv::device_canary_bytes(ts);
          for (auto& s : ts.slots) {
            const double b = static_cast<double>(kv::numel(s.desc.shape)) * kv::dtype_size(s.desc.dtype);
            bytes += b;
            main_bytes = std::max(main_bytes, b);
            if (buffers.insert(s.buffer.get()).second)
              held += static_cast<double>(s.buffer->payload_bytes() + 2 * canaries.at(s.buffer.get()));
          }
          size_t free_before = 0, free_after = 0, total = 0;
          KV_CUDA(cudaMemGetInfo(&free_before, &total));
          const float ms = median(ci->time_launches(ts, c, dev.profile, 3, reps, &free_after));
          const double extra_mib = (static_cast<double>(free_before) - static_cast<double>(free_after) - held) / (1 << 20);
          std::string tflops = "-";
          if (op.rfind("fused_linear_cross_entropy", 0) == 0) {
            const double f = (op.find(".bwd") != std::string::npos ? 6.0 : 2.0) * static_cast<double>(kv::numel(c.shape));
            tflops = std::to_string(f / (ms * 1e-3) / 1e12).substr(0, 5);
          }
          const float cms = copy_ms(static_cast<size_t>(main_bytes), reps);
          const double gbs = bytes / (ms * 1e-3) / 1e9, cgbs = 2 * main_bytes / (cms * 1e-3) / 1e9;
          std::string conf;
          for (auto& [k, v] : c.config) conf += (conf.empty() ? "" : ",") + k + "=" + v;
          std::printf("| %s | %s | %s | %s | %.1f | %.0f | %.0f | %.0f%% | %s | %.0f |\n", op.c_str(), dt.c_str(),
                      shape.c_str(), conf.c_str(), ms * 1e3, gbs, cgbs, 100 * gbs / cgbs, tflops.c_str(), extra_mib);
          std::fflush(stdout);
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kverify-kernelbench: %s\n", e.what());
    return 2;
  }
  return 0;
}
