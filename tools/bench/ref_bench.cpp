// Reference benchmark: the time to compute every output element's reference value (with
// its error bound) and its enclosure under a contract, for the three cases, on
// all host threads, in one pass (OpBinding::evaluate). Prints a markdown table: the first
// run (fresh output buffers) and the median of the later ones (buffers reused); input
// generation and tensor allocation are not timed.
#include <tbb/info.h>

#include <tbb/parallel_for.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "run/runner.hpp"
#include "core/registry.hpp"
#include "reference/gemm.hpp"
#include "kv_build_info.hpp"

namespace {

struct Bench {
  std::string label;
  std::vector<std::string> cases;  // fwd and bwd
};

/// Output storage of one case, kept across repeats: the first run pays the page faults
/// of fresh buffers (cold), later runs reuse them as a harness run reuses its buffers.
struct Buffers {
  kv::RefResult ref;
  std::vector<kv::OutputEnclosure> enc;
};

double seconds_for(const std::string& s, Buffers& buf) {
  kv::Case c = kv::Case::parse(s);
  kv::registry().normalize(c);
  const auto& op = kv::registry().op(c.op);
  kv::TensorSet ts = kv::allocate_tensors(c, op);
  op.generate(c, ts);
  kv::Contract k = kv::registry().impl(c.op, c.impl).contract(c, kv::host_device().profile);
  auto t0 = std::chrono::steady_clock::now();
  op.evaluate(c, ts, k, buf.ref, buf.enc);
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(t1 - t0).count();
}

/// GFLOP/s of one dense product C(m x n) = op(A) B with k terms, on one thread and
/// repeated on every thread at once (independent copies: the aggregate rate).
template <class S>
void gemm_rate(const char* label, kv::GemmOp op, int64_t m, int64_t n, int64_t k) {
  const auto& g = kv::gemm_table();
  const int threads = tbb::info::default_concurrency();
  auto once = [&](std::vector<S>& a, std::vector<S>& b, std::vector<S>& c) {
    const int64_t lda = op == kv::GemmOp::tn ? m : k, ldb = op == kv::GemmOp::nt ? k : n;
    if constexpr (std::is_same_v<S, double>) g.d(op, m, n, k, a.data(), lda, b.data(), ldb, c.data(), n, false);
    else g.s(op, m, n, k, a.data(), lda, b.data(), ldb, c.data(), n, false);
  };
  auto bufs = [&] {
    return std::array<std::vector<S>, 3>{std::vector<S>(static_cast<size_t>(m * k), S(0.5)),
                                         std::vector<S>(static_cast<size_t>(k * n), S(0.25)),
                                         std::vector<S>(static_cast<size_t>(m * n))};
  };
  auto one = bufs();
  once(one[0], one[1], one[2]);
  auto t0 = std::chrono::steady_clock::now();
  once(one[0], one[1], one[2]);
  double s1 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<std::array<std::vector<S>, 3>> all(static_cast<size_t>(threads));
  tbb::parallel_for(0, threads, [&](int i) { all[i] = bufs(); once(all[i][0], all[i][1], all[i][2]); });
  t0 = std::chrono::steady_clock::now();
  tbb::parallel_for(0, threads, [&](int i) { once(all[i][0], all[i][1], all[i][2]); });
  double sn = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double fl = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) * 1e-9;
  std::printf("| %s %s %lldx%lldx%lld | %.1f | %.1f |\n", label, sizeof(S) == 8 ? "double" : "float",
              static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), fl / s1,
              fl * threads / sn);
}

void gemm_report() {
  int64_t l1, l2, l3;
  kv::gemm_table().caches(0, 0, 0, &l1, &l2, &l3);
  std::printf("eigen-%s blocking caches: l1 %lld KiB, l2 %lld KiB, l3 %lld KiB\n\n", kv::gemm_table().isa,
              static_cast<long long>(l1 / 1024), static_cast<long long>(l2 / 1024), static_cast<long long>(l3 / 1024));
  std::printf("| product | GFLOP/s one thread | GFLOP/s all threads (aggregate) |\n|---|---|---|\n");
  gemm_rate<double>("square nn", kv::GemmOp::nn, 1024, 1024, 1024);
  gemm_rate<float>("square nn", kv::GemmOp::nn, 1024, 1024, 1024);
  gemm_rate<double>("flce dx tile nn", kv::GemmOp::nn, 256, 256, 32768);
  gemm_rate<float>("flce dx tile nn", kv::GemmOp::nn, 256, 256, 32768);
  gemm_rate<double>("flce dW tile tn", kv::GemmOp::tn, 512, 2048, 512);
  gemm_rate<float>("flce dW tile tn", kv::GemmOp::tn, 512, 2048, 512);
  gemm_rate<double>("flce logits tile nt", kv::GemmOp::nt, 512, 1024, 2048);
  std::printf("\n");
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app("kverify reference benchmark");
  int repeat = 3;
  std::string flce = "4096x2048x128256";  // the [references] target (about 20 GB)
  app.add_option("--repeat", repeat, "runs per case, at least 2 (the first cold, the median of the rest)");
  std::string only;
  app.add_option("--flce", flce, "FLCE shape BTxHxV");
  app.add_option("--only", only, "run only the cases whose label contains this text");
  bool gemm = false;
  app.add_flag("--gemm", gemm, "first report the dense products' rates (one thread, all threads)");
  CLI11_PARSE(app, argc, argv);
  const int runs_per_case = std::max(repeat, 2);
  kv::register_builtin();
  const std::vector<Bench> benches = {
      {"3D RoPE fwd+bwd, q and k, bf16, 1x32760x12x128 (grid 21x30x52)",
       {"kv1 op=rope.fwd impl=host shape=1x32760x12x128 dtypes=x:bf16 attrs=positions:3d,layout:interleaved,grid:21x30x52 dist=normal seed=1 gen=1",
        "kv1 op=rope.bwd impl=host shape=1x32760x12x128 dtypes=x:bf16 attrs=positions:3d,layout:interleaved,grid:21x30x52 dist=normal seed=1 gen=1"}},
      {"RMSNorm fwd+bwd, bf16, 32760x1536 (llama)",
       {"kv1 op=rms_norm.fwd impl=host shape=32760x1536 dtypes=x:bf16 dist=normal seed=1 gen=1",
        "kv1 op=rms_norm.bwd impl=host shape=32760x1536 dtypes=x:bf16 dist=normal seed=1 gen=1"}},
      {"FLCE fwd+bwd, bf16, " + flce,
       {"kv1 op=fused_linear_cross_entropy.fwd impl=host shape=" + flce + " dtypes=x:bf16 dist=normal seed=1 gen=1",
        "kv1 op=fused_linear_cross_entropy.bwd impl=host shape=" + flce + " dtypes=x:bf16 dist=normal seed=1 gen=1"}}};
  std::printf("CPU: %s, %d threads (oneTBB); dense products: eigen-%s; commit %s%s\n\n", cpu_model().c_str(),
              tbb::info::default_concurrency(), kv::gemm_table().isa, KV_GIT_COMMIT, KV_GIT_DIRTY ? " (dirty)" : "");
  if (gemm) gemm_report();
  std::printf("| case | cold s (first run, fresh buffers) | median s (runs 2..%d, buffers reused) | runs |\n|---|---|---|---|\n",
              runs_per_case);
  for (auto& b : benches) {
    if (b.label.find(only) == std::string::npos) continue;
    std::vector<double> t;
    std::vector<Buffers> bufs(b.cases.size());
    for (int r = 0; r < runs_per_case; ++r) {
      double s = 0;
      for (size_t i = 0; i < b.cases.size(); ++i) s += seconds_for(b.cases[i], bufs[i]);
      t.push_back(s);
    }
    std::string runs;
    for (double v : t) runs += (runs.empty() ? "" : ", ") + std::to_string(v);
    std::vector<double> warm(t.begin() + 1, t.end());
    std::sort(warm.begin(), warm.end());
    std::printf("| %s | %.3f | %.3f | %s |\n", b.label.c_str(), t[0], warm[warm.size() / 2], runs.c_str());
    std::fflush(stdout);
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kverify-refbench: error: %s\n", e.what());
    return 2;
  }
}
