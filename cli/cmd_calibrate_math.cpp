// `kverify calibrate-math`: the GPU's math functions measured over every fp32 input (the
// ulps a cuda worker holds contracts to), written to --out and printed.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/command.hpp"
#include "cli/common.hpp"
#include "core/error.hpp"
#ifdef KV_HAVE_CUDA
#include "device/calibrate.hpp"
#endif

namespace kv {

namespace {

struct CalibrateMathArgs : CommandArgs {
  Common common;
  std::string out = "out/calibration.json";
};

}  // namespace

std::unique_ptr<CommandArgs> setup_calibrate_math(CLI::App& sub) {
  auto a = std::make_unique<CalibrateMathArgs>();
  sub.add_option("--device", a->common.device, "cuda (the default when a GPU is present)");
  sub.add_option("--out", a->out, "where to write the calibration JSON");
  return a;
}

int run_calibrate_math(CommandArgs& args, const Argv&) {
#ifdef KV_HAVE_CUDA
  const CalibrateMathArgs& a = static_cast<CalibrateMathArgs&>(args);
  RunEnv env = make_env(a.common);
  if (env.device.kind != "cuda") throw UsageError("calibrate-math needs a GPU (--device cuda)");
  MathCalibration m = calibrate_math();
  nlohmann::json j = {{"schema", 1}, {"device", env.device.to_json()}, {"build", build_info()},
                      {"max_ulps", m.max_ulps}, {"functions", m.detail}};
  std::filesystem::path p(a.out);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream(a.out) << j.dump(2) << "\n";
  std::cout << j.dump(2) << "\n";
  return 0;
#else
  (void)args;
  throw UsageError("calibrate-math needs a CUDA build (configure with -DKVERIFY_CUDA=ON)");
#endif
}

}  // namespace kv
