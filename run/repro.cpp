// Writing reproducer bundles.
#include "run/repro.hpp"

#include <filesystem>
#include <fstream>

#include "check/replay.hpp"
#include "core/safetensors.hpp"

namespace kv {

namespace {

/// case.json: the result line, its replay command (check/replay.hpp) and what the tensors hold.
void write_case_json(const std::filesystem::path& d, const nlohmann::json& result, const std::string& tensors) {
  nlohmann::json j = result;
  j["replay"] = replay_command(result);
  j["tensors"] = tensors;
  std::ofstream((d / "case.json").string()) << j.dump(2) << "\n";
}

}  // namespace

std::string write_repro(const std::string& dir, const Case& c, const TensorSet& ts, const RefResult& ref,
                        const std::vector<OutputEnclosure>& encs, const nlohmann::json& result) {
  const std::filesystem::path d = std::filesystem::path(dir) / hex64(c.case_id());
  std::filesystem::create_directories(d);
  std::map<std::string, StoredTensor> t;
  for (auto& s : ts.slots) t[s.desc.name] = gather(s.view());
  for (auto& e : encs) {
    const std::vector<int64_t>& shape = ts.at(e.name).desc.shape;
    const OutputRef& r = ref.at(e.name);
    t["ref." + e.name] = f64_tensor(shape, r.v.data(), r.v.size());
    t["ref_err." + e.name] = f64_tensor(shape, r.err.data(), r.err.size());
    t["lo." + e.name] = f64_tensor(shape, e.lo.data(), e.lo.size());
    t["hi." + e.name] = f64_tensor(shape, e.hi.data(), e.hi.size());
  }
  write_safetensors((d / "tensors.safetensors").string(), t, {{"case", c.str()}, {"reference", ref.method}});
  write_case_json(d, result,
                  encs.empty() ? "tensors.safetensors: inputs and outputs by name (the reference was evaluated a block "
                                 "of rows at a time and not kept: the replay computes it again)"
                               : "tensors.safetensors: inputs and outputs by name; ref.<out>, ref_err.<out>, lo.<out>, "
                                 "hi.<out> in F64");
  return d.string();
}

std::string write_batch_repro(const std::string& dir, const Case& c, const nlohmann::json& result,
                              const std::map<std::string, StoredTensor>& outputs,
                              const std::map<std::string, StoredTensor>& companion_outputs) {
  const std::filesystem::path d = std::filesystem::path(dir) / hex64(c.case_id());
  std::filesystem::create_directories(d);
  const std::string companion = result.contains("batch_invariance") ? result["batch_invariance"].value("companion", "") : "";
  write_safetensors((d / "outputs.safetensors").string(), outputs, {{"case", c.str()}});
  write_safetensors((d / "companion.safetensors").string(), companion_outputs, {{"case", companion}});
  write_case_json(d, result, "outputs.safetensors: the case's outputs; companion.safetensors: the companion's (the same "
                             "rows first, then the rows it adds), by name");
  return d.string();
}

}  // namespace kv
