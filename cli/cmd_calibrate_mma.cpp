// `kverify calibrate-mma`: how the GPU's tensor-core products (cuBLAS bf16 -> fp32) round
// and block their sums, and a check of the contract FLCE's GPU products declare
// (device/calibrate_mma.hpp), written to --out and printed.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/command.hpp"
#include "cli/common.hpp"
#include "core/error.hpp"
#ifdef KV_HAVE_CUDA
#include "device/calibrate_mma.hpp"
#endif

namespace kv {

namespace {

struct CalibrateMmaArgs : CommandArgs {
  Common common;
  std::string out = "out/calibration-mma.json";
};

}  // namespace

std::unique_ptr<CommandArgs> setup_calibrate_mma(CLI::App& sub) {
  auto a = std::make_unique<CalibrateMmaArgs>();
  sub.add_option("--device", a->common.device, "cuda (the default when a GPU is present)");
  sub.add_option("--out", a->out, "where to write the probe JSON");
  return a;
}

int run_calibrate_mma(CommandArgs& args, const Argv&) {
#ifdef KV_HAVE_CUDA
  const CalibrateMmaArgs& a = static_cast<CalibrateMmaArgs&>(args);
  RunEnv env = make_env(a.common);
  if (env.device.kind != "cuda") throw UsageError("calibrate-mma needs a GPU (--device cuda)");
  nlohmann::json j = {{"schema", 1}, {"device", env.device.to_json()}, {"build", build_info()}, {"probe", calibrate_mma()}};
  std::filesystem::path p(a.out);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream(a.out) << j.dump(2) << "\n";
  std::cout << j.dump(2) << "\n";
  return 0;
#else
  (void)args;
  throw UsageError("calibrate-mma needs a CUDA build (configure with -DKVERIFY_CUDA=ON)");
#endif
}

}  // namespace kv
