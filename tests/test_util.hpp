// Helpers shared by the tests: run a case in this process, build case strings.
#pragma once
#include <nlohmann/json.hpp>
#include <cstdlib>
#include <string>

#include "run/runner.hpp"
#include "core/case.hpp"
#include "core/registry.hpp"

namespace kvtest {

/// Sets an environment variable for one scope.
struct Env {
  const char* name;
  Env(const char* n, const std::string& v) : name(n) { setenv(n, v.c_str(), 1); }
  ~Env() { unsetenv(name); }
};

inline kv::RunEnv host_env() {
  kv::RunEnv env;
  env.device = kv::host_device();
  env.run_id = "test";
  return env;
}

/// Runs a normalized case in-process (no worker) and returns its result line.
inline nlohmann::json run_in_process(kv::Case c) {
  kv::registry().normalize(c);
  kv::RefCache cache;
  return kv::run_case(c.str(), host_env(), cache);
}

/// Whether some output of a result line has no elements: such a case checked nothing and
/// must be `skip`, never `pass`.
inline bool has_empty_output(const nlohmann::json& j) {
  if (!j.contains("outputs")) return false;
  for (auto& [name, o] : j["outputs"].items())
    if (o.value("n", int64_t(-1)) == 0) return true;
  return false;
}

inline kv::Case rms_case(bool bwd, const std::string& impl, std::vector<int64_t> shape,
                         std::map<std::string, kv::DType> dtypes, std::string mode, uint64_t seed,
                         std::string dist = "normal") {
  kv::Case c;
  c.op = bwd ? "rms_norm.bwd" : "rms_norm.fwd";
  c.impl = impl;
  c.shape = std::move(shape);
  c.dtypes = std::move(dtypes);
  c.attrs["mode"] = std::move(mode);
  c.seed = seed;
  c.dist = std::move(dist);
  return c;
}

}  // namespace kvtest
