// The fields every result line carries (run/runner.hpp): build identity, the case and the
// device; and the line of a case that could not run.
#include "run/runner.hpp"

#include <tbb/info.h>

#include "core/digest.hpp"
#include "core/threads.hpp"
#include "kv_build_info.hpp"

namespace kv {

nlohmann::json build_info() {
  return {{"commit", KV_GIT_COMMIT}, {"dirty", KV_GIT_DIRTY != 0}, {"compiler", KV_COMPILER}, {"flags", KV_CXX_FLAGS}};
}

nlohmann::json result_skeleton(const Case& c, const RunEnv& env) {
  nlohmann::json dt = nlohmann::json::object();
  for (auto& [k, v] : c.dtypes) dt[k] = dtype_name(v);
  // The case's main dtype: x's, else the first floating-point input's.
  std::string main_dtype;
  for (auto& t : registry().op(c.op).tensors(c))
    if (t.role == Role::input && is_float(t.dtype) && (main_dtype.empty() || t.name == "x")) main_dtype = dtype_name(t.dtype);
  return {{"schema", kResultSchemaVersion},
          {"run_id", env.run_id},
          {"case", c.str()},
          {"case_id", hex64(c.case_id())},
          {"input_id", hex64(c.input_id())},
          {"op", c.op},
          {"impl", c.impl},
          {"config", c.config},
          {"dtype", main_dtype},
          {"dtypes", dt},
          {"shape", c.shape},
          {"attrs", c.attrs},
          {"dist", c.dist},
          {"seed", c.seed},
          {"device_name", env.device.name},
          {"host_threads", host_threads()},
          {"device", env.device.to_json()},
          {"build", build_info()},
          {"impl_sources", env.sources.to_json()},
          {"replay", replay_command(c.str(), env.device, env.sources, env.audited ? " --contract audited" : "")}};
}

nlohmann::json error_result(const Case& c, const RunEnv& env, const std::string& reason) {
  auto j = result_skeleton(c, env);
  j["verdict"] = "error";
  j["reason"] = reason;
  return j;
}

}  // namespace kv
