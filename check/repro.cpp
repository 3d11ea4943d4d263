// Writing reproducer bundles.
#include "check/repro.hpp"

#include <filesystem>
#include <fstream>

#include "core/safetensors.hpp"

namespace kv {

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
  nlohmann::json j = result;
  j["replay"] = "kverify replay '" + c.str() + "'";
  j["tensors"] = "tensors.safetensors: inputs and outputs by name; ref.<out>, ref_err.<out>, lo.<out>, hi.<out> in F64";
  std::ofstream((d / "case.json").string()) << j.dump(2) << "\n";
  return d.string();
}

}  // namespace kv
