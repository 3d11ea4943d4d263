#include "capi/callback_transport.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace kv {

nlohmann::json CallbackTransport::request(const nlohmann::json& req) {
  const std::string type = req.value("type", "");
  if (type != "contract") throw ExternalError("an in-process impl got a '" + type + "' request");
  if (!contract_) throw ExternalError("the impl declared no contract and no contract function");
  std::string out(1 << 20, '\0');
  const int rc = contract_(user_, req.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), out.data(),
                           out.size());
  out.resize(std::strlen(out.c_str()));
  if (rc != 0) return {{"error", out.empty() ? std::string("the contract function failed") : out}};
  try {
    return nlohmann::json::parse(out);
  } catch (const std::exception& e) {
    throw ExternalError(std::string("the contract function answered no JSON: ") + e.what());
  }
}

bool CallbackTransport::run_in_place(const nlohmann::json& req, TensorSet& ts) {
  const size_t n = ts.slots.size();
  std::vector<std::vector<int64_t>> strides(n);
  std::vector<std::string> dtypes(n);
  std::vector<kvc_tensor> t(n);
  for (size_t i = 0; i < n; ++i) {
    const TensorSlot& s = ts.slots[i];
    const TensorView v = s.view();
    strides[i] = v.desc.effective_strides();
    dtypes[i] = std::string(dtype_name(v.desc.dtype));
    t[i].name = s.desc.name.c_str();
    t[i].role = s.role == Role::input ? 0 : 1;
    t[i].dtype = dtypes[i].c_str();
    t[i].ndim = static_cast<int>(s.desc.shape.size());
    t[i].shape = s.desc.shape.data();  // the slot's (v is this iteration's copy)
    t[i].strides = strides[i].data();
    t[i].data = v.base + v.desc.offset * static_cast<int64_t>(dtype_size(v.desc.dtype));
  }
  char err[4096] = {0};
  const int rc = run_(user_, req.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str(), t.data(),
                      static_cast<int>(n), err, sizeof err);
  err[sizeof err - 1] = 0;
  if (rc != 0) throw ExternalError(std::string("the impl failed: ") + (err[0] ? err : "no reason given"));
  return true;
}

}  // namespace kv
