// Plugin loading and the host-side plugin impl.
#include "ext/plugin.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <deque>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "ext/plugin_call.hpp"

namespace kv {

PluginCall::PluginCall(const PluginDesc& d, const Case& c, const DeviceProfile& p)
    : d_(d), case_str_(c.str()), shape_(c.shape), prof_(p) {
  for (auto& [k, v] : c.config) config_.push_back({k.c_str(), v.c_str()});
  for (auto& [k, v] : c.attrs) attrs_.push_back({k.c_str(), v.c_str()});
}

void PluginCall::add_tensor(const TensorDesc& t, void* payload, bool output) {
  strides_.push_back(t.effective_strides());
  auto* first = payload ? static_cast<uint8_t*>(payload) + t.offset * static_cast<int64_t>(dtype_size(t.dtype)) : nullptr;
  tensors_.push_back({t.name.c_str(), first, static_cast<kv_dtype>(static_cast<int>(t.dtype)),
                      static_cast<int32_t>(t.shape.size()), t.shape.data(), strides_.back().data(), output ? 1 : 0});
}

kv_call* PluginCall::get(void* stream) {
  static_assert(static_cast<int>(DType::f32) == KV_F32 && static_cast<int>(DType::f16) == KV_F16 &&
                static_cast<int>(DType::bf16) == KV_BF16 && static_cast<int>(DType::i32) == KV_I32);
  call_ = kv_call{sizeof(kv_call),
                  d_.op.c_str(), d_.impl.c_str(), case_str_.c_str(),
                  static_cast<int32_t>(config_.size()), config_.data(),
                  static_cast<int32_t>(attrs_.size()), attrs_.data(),
                  static_cast<int32_t>(tensors_.size()), tensors_.data(),
                  shape_.data(), static_cast<int32_t>(shape_.size()),
                  stream, msg_.data(), msg_.size(),
                  static_cast<int32_t>(prof_.warp_size), static_cast<int32_t>(prof_.sm_count),
                  static_cast<int32_t>(prof_.max_threads_per_block), prof_.smem_per_block};
  msg_[0] = '\0';
  return &call_;
}

PluginContract plugin_contract(const PluginDesc& d, const Case& c, const DeviceProfile& p) {
  PluginCall call(d, c, p);
  // The tensors without data: dtypes, shapes and layouts for the plugin's checks.
  std::deque<TensorDesc> descs;
  for (auto& s : plugin_tensor_order(c)) {
    TensorDesc t{s.name, s.dtype, s.shape, {}, 0};
    if (auto it = c.layout.find(s.name); it != c.layout.end()) t.strides = it->second.strides, t.offset = it->second.offset;
    if (auto it = c.alias.find(s.name); it != c.alias.end())
      if (auto in = c.layout.find(it->second); in != c.layout.end()) t.strides = in->second.strides, t.offset = in->second.offset;
    descs.push_back(t);
    call.add_tensor(descs.back(), nullptr, s.role == Role::output);
  }
  int rc = d.contract(call.get(nullptr));
  const std::string who = "plugin impl " + d.impl + " (" + d.lib + ")";
  PluginContract out;
  if (rc == KV_UNSUPPORTED) {
    out.unsupported = call.message();
    return out;
  }
  if (rc != KV_OK) throw HarnessError(who + " could not state its contract: " + call.message());
  try {
    out.contract = Contract::from_json(nlohmann::json::parse(call.message()));
  } catch (const std::exception& e) {
    throw HarnessError(who + " declared an unusable contract: " + e.what());
  }
  return out;
}

const PluginDesc* plugin_desc(const Impl& impl) {
  auto* h = dynamic_cast<const PluginDescHolder*>(&impl);
  return h ? &h->desc() : nullptr;
}

std::vector<TensorSpec> plugin_tensor_order(const Case& c) {
  auto specs = registry().op(c.op).tensors(c);
  std::stable_partition(specs.begin(), specs.end(), [](const TensorSpec& s) { return s.role == Role::input; });
  return specs;
}

namespace {

class PluginHostImpl : public PluginImplBase<Impl> {
 public:
  using PluginImplBase::PluginImplBase;
  std::string device() const override { return d_.device; }
  void run(TensorSet& ts, const Case& c, const DeviceProfile& p) const override {
    if (d_.device != "host")
      throw HarnessError("plugin impl " + d_.impl + " runs on " + d_.device + ", which this kverify build cannot drive");
    PluginCall call(d_, c, p);
    for (auto& s : plugin_tensor_order(c)) {
      TensorSlot& slot = ts.at(s.name);
      call.add_tensor(slot.desc, slot.buffer->payload(), s.role == Role::output);
    }
    if (d_.launch(call.get(nullptr)) != KV_OK)
      throw std::runtime_error("plugin impl " + d_.impl + " failed: " + call.message());
  }
};

std::vector<ConfigKnob> parse_knobs(const std::string& s, const std::string& who) {
  std::vector<ConfigKnob> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (item.empty()) continue;
    auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UsageError(who + ": malformed knob '" + item + "' (expected name=v1|v2)");
    ConfigKnob k{item.substr(0, eq), {}};
    std::stringstream vs(item.substr(eq + 1));
    std::string v;
    while (std::getline(vs, v, '|'))
      if (!v.empty()) k.values.push_back(v);
    out.push_back(k);
  }
  return out;
}

struct Registrar {
  Registry* reg;
  std::string lib;
  std::string error;
  int added = 0;
};

int add_impl(void* ctx, const kv_impl_desc* d) {
  auto* r = static_cast<Registrar*>(ctx);
  try {
    // `accepts` was appended within ABI version 1: a descriptor may end before it.
    constexpr size_t v1_size = offsetof(kv_impl_desc, accepts);
    if (!d || d->struct_size < v1_size)
      throw UsageError("a kv_impl_desc with struct_size " + std::to_string(d ? d->struct_size : 0) + " (expected " +
                       std::to_string(sizeof(kv_impl_desc)) + ", or " + std::to_string(v1_size) + " without accepts)");
    if (!d->op || !d->impl || !d->device || !d->contract || !d->launch)
      throw UsageError("a kv_impl_desc without op, impl, device, contract or launch");
    PluginDesc p;
    p.lib = r->lib;
    p.op = d->op, p.impl = d->impl, p.device = d->device;
    p.version = d->version ? d->version : "";
    const std::string who = "impl " + p.impl + " of " + p.op;
    if (p.device != "host" && p.device != "cuda") throw UsageError(who + ": device must be host or cuda, not " + p.device);
    r->reg->op(p.op);  // throws naming the known ops
    for (auto* im : r->reg->impls(p.op))
      if (im->name() == p.impl) throw UsageError(who + " is already registered");
    p.knobs = parse_knobs(d->knobs ? d->knobs : "", who);
    p.contract = d->contract, p.launch = d->launch;
    if (d->struct_size >= v1_size + sizeof(d->accepts) && d->accepts) {
      try {
        p.accepts = parse_accepts(std::string(d->accepts), p.op, "");
      } catch (const UsageError& e) {
        // That impl alone is unusable: its cases are errors with the reason.
        p.unusable = "plugin impl " + p.impl + " of " + p.op + " (" + r->lib + "): " + e.what();
      }
    }
#ifdef KV_HAVE_CUDA
    if (p.device == "cuda") r->reg->add(make_plugin_cuda_impl(std::move(p)));
    else r->reg->add(std::make_unique<PluginHostImpl>(std::move(p)));
#else
    r->reg->add(std::make_unique<PluginHostImpl>(std::move(p)));
#endif
    ++r->added;
    return KV_OK;
  } catch (const std::exception& e) {
    if (r->error.empty()) r->error = e.what();
    return KV_ERROR;
  }
}

}  // namespace

int load_plugin(Registry& reg, const std::string& path) {
  const std::string abs = std::filesystem::absolute(path).string();
  const std::string who = "plugin " + path;
  if (!std::filesystem::exists(abs)) throw UsageError(who + ": no such file");
  // Never closed: impls keep pointers into it for the rest of the process.
  void* h = dlopen(abs.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw UsageError(who + ": cannot load: " + dlerror());
  auto ver = reinterpret_cast<kv_plugin_abi_version_fn>(dlsym(h, "kverify_plugin_abi_version"));
  auto reg_fn = reinterpret_cast<kv_plugin_register_fn>(dlsym(h, "kverify_plugin_register"));
  if (!ver || !reg_fn)
    throw UsageError(who + ": not a kverify plugin (it must export kverify_plugin_abi_version and kverify_plugin_register)");
  const uint32_t v = ver();
  if (v != KV_PLUGIN_ABI_VERSION)
    throw UsageError(who + ": built for plugin ABI version " + std::to_string(v) + ", this kverify speaks version " +
                     std::to_string(KV_PLUGIN_ABI_VERSION) + "; rebuild it against this kverify's include/kverify/plugin.h");
  Registrar r{&reg, path, "", 0};
  kv_registrar api{KV_PLUGIN_ABI_VERSION, sizeof(kv_registrar), &r, &add_impl};
  int rc = reg_fn(&api);
  if (!r.error.empty()) throw UsageError(who + ": " + r.error);
  if (rc != KV_OK) throw UsageError(who + ": kverify_plugin_register returned " + std::to_string(rc));
  if (r.added == 0) throw UsageError(who + ": registered no impls");
  return r.added;
}

}  // namespace kv
