// One case, start to finish, in this process.
#include "run/runner.hpp"

#include <tbb/info.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>

#include "check/judge.hpp"
#include "run/repro.hpp"
#include "check/stream.hpp"
#include "core/row_slice.hpp"
#include "core/safetensors.hpp"
#include "core/digest.hpp"
#include "core/error.hpp"
#include "kv_build_info.hpp"

namespace kv {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

int64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t(1) << 40;
}

std::string gib(double bytes) {
  std::ostringstream o;
  o.precision(3);
  o << bytes / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return o.str();
}

}  // namespace

std::shared_ptr<RefResult> RefCache::get(uint64_t id) const {
  for (auto& [k, v] : entries_)
    if (k == id) {
      ++hits_;
      return v;
    }
  return nullptr;
}

void RefCache::put(uint64_t id, std::shared_ptr<RefResult> r) {
  if (entries_.size() >= max_) entries_.erase(entries_.begin());
  entries_.emplace_back(id, std::move(r));
}

std::shared_ptr<InputSnapshot> RefCache::inputs(uint64_t key) const {
  for (auto& [k, v] : inputs_)
    if (k == key) return v;
  return nullptr;
}

void RefCache::drop_inputs(uint64_t key) {
  for (auto it = inputs_.begin(); it != inputs_.end(); ++it)
    if (it->first == key) {
      inputs_.erase(it);
      return;
    }
}

void RefCache::put_inputs(uint64_t key, std::shared_ptr<InputSnapshot> s) {
  if (inputs_.size() >= max_) inputs_.erase(inputs_.begin());
  inputs_.emplace_back(key, std::move(s));
}

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
          {"host_threads", tbb::info::default_concurrency()},
          {"device", env.device.to_json()},
          {"build", build_info()},
          {"impl_sources", env.sources.to_json()},
          {"replay", replay_command(c.str(), env.device, env.sources)}};
}

nlohmann::json error_result(const Case& c, const RunEnv& env, const std::string& reason) {
  auto j = result_skeleton(c, env);
  j["verdict"] = "error";
  j["reason"] = reason;
  return j;
}

double case_tensor_bytes(const Case& c, const OpBinding& op) {
  double bytes = 0;
  for (auto& s : op.tensors(c)) {
    if (c.alias.count(s.name)) continue;  // written over an input's storage
    TensorDesc d{s.name, s.dtype, s.shape, {}, 0};
    if (auto it = c.layout.find(s.name); it != c.layout.end()) d.strides = it->second.strides, d.offset = it->second.offset;
    bytes += static_cast<double>(d.storage_elems()) * static_cast<double>(dtype_size(s.dtype));
  }
  return bytes;
}

TensorSet allocate_tensors(const Case& c, const OpBinding& op) {
  TensorSet ts;
  for (auto& s : op.tensors(c)) {
    TensorSlot slot;
    slot.desc = TensorDesc{s.name, s.dtype, s.shape, {}, 0};
    slot.role = s.role;
    if (auto it = c.layout.find(s.name); it != c.layout.end()) {
      slot.desc.strides = it->second.strides;
      slot.desc.offset = it->second.offset;
    }
    if (auto it = c.alias.find(s.name); it != c.alias.end()) {
      const TensorSlot& in = ts.at(it->second);
      slot.alias_of = it->second;
      slot.desc.strides = in.desc.strides;
      slot.desc.offset = in.desc.offset;
      slot.buffer = in.buffer;
      slot.buffer->set_label(in.desc.name + " (" + s.name + " written in place)");
    } else {
      slot.buffer = std::make_shared<Buffer>(static_cast<size_t>(slot.desc.storage_elems()) * dtype_size(s.dtype));
      slot.buffer->set_label(s.name);
      slot.buffer->poison(s.dtype);
    }
    ts.slots.push_back(std::move(slot));
  }
  return ts;
}

WholeRef whole_reference(const Case& c, const OpBinding& op, const Contract& k, const TensorSet& ins, RefCache& cache) {
  WholeRef w;
  auto t0 = Clock::now();
  const uint64_t iid = c.input_id();
  w.ref = cache.get(iid);
  w.cached = w.ref != nullptr;
  // The enclosure depends on the inputs and the contract's numerics only: configs that
  // declare the same numerics (e.g. per-SM partials and atomics) share it.
  RefCache::Enclosures& sc = cache.scratch();
  const uint64_t enc_key = iid * 0x9E3779B97F4A7C15ull ^ k.numerics_hash();
  w.enc_cached = sc.valid && sc.key == enc_key;
  std::vector<OutputEnclosure>& encs = sc.outputs;
  if (!w.enc_cached) sc.valid = false;  // until it is complete again
  bool enc_done = false;
  if (!w.ref) {
    w.ref = std::make_shared<RefResult>();
    if (!w.enc_cached) {  // both in one pass (the enclosure's time is counted here)
      op.evaluate(c, ins, k, *w.ref, encs);
      enc_done = true;
    } else {
      *w.ref = op.reference(c, ins);
    }
    cache.put(iid, w.ref);
  }
  w.reference_s = since(t0);
  t0 = Clock::now();
  if (!w.enc_cached) {
    if (!enc_done) op.enclose(c, ins, k, encs);
    auto out_dtype = [&](const std::string& n) { return ins.at(n).desc.dtype; };
    std::map<std::string, std::vector<int64_t>> misses;
    for (auto& e : encs) {
      auto m = ref_target_misses(w.ref->at(e.name), e, out_dtype(e.name));
      if (!m.empty()) misses[e.name] = std::move(m);
    }
    sc.refined = sc.insufficient = 0;
    if (!misses.empty()) {
      for (auto& [n, m] : misses) sc.refined += static_cast<int64_t>(m.size());
      op.refine(c, ins, *w.ref, misses);
      for (auto& e : encs) {
        for (int64_t i : ref_target_misses(w.ref->at(e.name), e, out_dtype(e.name))) {
          e.unverifiable[i] = 1;  // the reference cannot decide this element: never a pass
          ++sc.insufficient;
        }
      }
    }
    sc.key = enc_key;
    sc.valid = true;
  }
  w.enclose_s = since(t0);
  return w;
}

namespace {

nlohmann::json reference_json(const std::string& method, bool cached, bool enc_cached, int64_t refined,
                              int64_t insufficient) {
  return {{"method", method},
          {"cached", cached},
          {"enclosure_cached", enc_cached},
          {"elements_refined", refined},
          {"elements_reference_insufficient", insufficient}};
}

/// The case's tensors with each input as generated: the snapshot's buffers (an input an
/// output aliases: its pristine copy), or all generated again where the impl wrote into
/// an input that the snapshot shares.
TensorSet generated_inputs(const Case& c, const OpBinding& op, const TensorSet& ts, const InputSnapshot& snap,
                           bool inputs_modified) {
  if (inputs_modified) {
    TensorSet fresh = allocate_tensors(c, op);
    op.generate(c, fresh);
    return fresh;
  }
  TensorSet ins = ts;
  size_t k = 0;
  for (auto& s : ins.slots)
    if (s.role == Role::input) s.buffer = snap.buffers[k++];
  return ins;
}

nlohmann::json run_normalized(const Case& c, const RunEnv& env, RefCache& cache) {
  auto t_total = Clock::now();
  const Registry& reg = registry();
  const OpBinding& op = reg.op(c.op);
  const Impl& impl = reg.impl(c.op, c.impl);
  nlohmann::json j = result_skeleton(c, env);
  j["impl_version"] = impl.version();
  if (impl.device() != env.device.kind) {
    j["verdict"] = "skip";
    j["reason"] = "impl " + impl.name() + " runs on " + impl.device() + ", this run's device is " + env.device.kind;
    return j;
  }
  const DeviceProfile& prof = env.device.profile;
  if (auto why = impl.invalid_reason(c, prof)) {
    j["verdict"] = "skip";
    j["reason"] = "invalid config for this device: " + *why;
    return j;
  }
  Contract k = impl.contract(c, prof);
  j["contract"] = k.to_json();
  for (auto& [fn, ulps] : k.math_ulps)
    if (auto it = env.measured_ulps.find(fn); it != env.measured_ulps.end() && ulps < it->second)
      throw HarnessError("contract of " + impl.name() + " cites " + std::to_string(ulps) + " ulp for " + fn +
                         ", calibration measured " + std::to_string(it->second) + " on this device");

  // Memory: the case's tensors and the reference beside them, whole or a block of rows
  // at a time (check/stream.hpp).
  const StreamPlan plan = plan_stream(c, op, row_block_bytes());
  const double need = case_host_bytes(c, op, plan);
  double avail = static_cast<double>(mem_available_bytes());
  if (need > 0.8 * avail)
    throw UsageError("shape " + shape_str(c.shape) + " does not fit in host memory: the case needs about " + gib(need) +
                     ", " + gib(avail) + " available");

  auto t0 = Clock::now();
  TensorSet ts = allocate_tensors(c, op);
  const double t_alloc = since(t0);
  double t_fill = 0;
  // Inputs: generated once per input identity and layout, then copied.
  Case layout_only;
  layout_only.layout = c.layout;
  layout_only.alias = c.alias;
  const uint64_t input_key = c.input_id() ^ layout_only.case_id();
  auto snap = cache.inputs(input_key);
  auto aliased = [&](const TensorSlot& in) {
    for (auto& o : ts.slots)
      if (o.alias_of == in.desc.name) return true;
    return false;
  };
  if (snap) {
    size_t k = 0;
    for (auto& s : ts.slots) {
      if (s.role != Role::input) continue;
      const auto& b = snap->buffers[k++];
      if (aliased(s)) s.buffer->copy_from(*b);  // written in place: a private copy
      else s.buffer = b;
    }
    for (auto& s : ts.slots)  // outputs aliasing an input follow its buffer
      if (!s.alias_of.empty()) s.buffer = ts.at(s.alias_of).buffer;
  } else {
    const auto t_f = Clock::now();
    op.generate(c, ts);
    t_fill = since(t_f);
    snap = std::make_shared<InputSnapshot>();
    snap->digests = nlohmann::json::object();
    for (auto& s : ts.slots) {
      if (s.role != Role::input) continue;
      if (aliased(s)) {
        auto copy = std::make_shared<Buffer>(s.buffer->payload_bytes());
        copy->copy_from(*s.buffer);
        copy->set_label("cached copy of " + s.desc.name);
        snap->buffers.push_back(copy);
      } else {
        snap->buffers.push_back(s.buffer);
      }
      snap->digests[s.desc.name] = digest(s.view()).to_json();
      snap->raw_digests[s.desc.name] = raw_digest(s.buffer->payload(), s.buffer->payload_bytes());
    }
    cache.put_inputs(input_key, snap);
  }
  j["inputs"] = snap->digests;
  const std::map<std::string, uint64_t>& raw_before = snap->raw_digests;
  double t_generate = since(t0);

  // Reference once per input identity; enclosure under this contract. A case that streams
  // evaluates both after the run, a block of rows at a time.
  WholeRef whole;
  if (!plan.streams()) whole = whole_reference(c, op, k, ts, cache);

  // Workspaces, poisoned and canaried like tensors.
  for (auto& w : impl.workspaces(c, prof)) {
    auto b = std::make_shared<Buffer>(w.bytes);
    b->set_label("workspace " + w.name);
    b->poison(w.poison_as);
    ts.workspaces[w.name] = b;
  }

  t0 = Clock::now();
  impl.run(ts, c, prof);
  double t_impl = since(t0);

  t0 = Clock::now();
  std::vector<std::string> reasons;
  bool inputs_modified = false;
  for (auto& s : ts.slots)
    if (s.alias_of.empty())
      if (auto dmg = s.buffer->canary_damage()) {
        reasons.push_back("out-of-bounds write on " + s.desc.name + ": " + *dmg);
        if (s.role == Role::input) cache.drop_inputs(input_key), inputs_modified = true;  // shared: not pristine now
      }
  for (auto& [n, b] : ts.workspaces)
    if (auto dmg = b->canary_damage()) reasons.push_back("out-of-bounds write on workspace " + n + ": " + *dmg);
  for (auto& s : ts.slots) {
    if (s.role != Role::input) continue;
    bool written_in_place = false;
    for (auto& o : ts.slots) written_in_place |= o.alias_of == s.desc.name;
    if (!written_in_place && raw_digest(s.buffer->payload(), s.buffer->payload_bytes()) != raw_before.at(s.desc.name)) {
      reasons.push_back("input " + s.desc.name + " was modified");
      cache.drop_inputs(input_key);  // the shared copy is no longer pristine
      inputs_modified = true;
    }
  }
  const std::vector<TensorSpec> out_specs = [&] {
    std::vector<TensorSpec> o;
    for (auto& t : op.tensors(c))
      if (t.role == Role::output) o.push_back(t);
    return o;
  }();
  if (!env.outputs_dir.empty()) {
    std::map<std::string, StoredTensor> kept;
    for (auto& t : out_specs) kept[t.name] = gather(ts.at(t.name).view());
    write_safetensors((std::filesystem::path(env.outputs_dir) / (hex64(c.case_id()) + ".safetensors")).string(), kept,
                      {{"case", c.str()}});
  }

  // Verdicts per output: against the whole reference, or streamed.
  std::vector<TensorVerdict> verdicts;
  int64_t stream_blocks = 0;
  double t_judge = 0;
  std::string method;
  if (plan.streams()) {
    cache.scratch() = RefCache::Enclosures{};  // a whole case's enclosure would outlive its use here
    const TensorSet ins = generated_inputs(c, op, ts, *snap, inputs_modified);
    StreamOutcome so = check_streamed(c, op, k, plan, ins, ts);
    if (so.whole_instead) {
      whole = whole_reference(c, op, k, ins, cache);
    } else {
      verdicts = std::move(so.verdicts);
      stream_blocks = so.blocks_evaluated;
      whole.reference_s = so.reference_s, whole.enclose_s = so.refine_s, t_judge = so.judge_s;
      j["reference"] = reference_json(so.method, false, false, so.refined, so.insufficient);
    }
  }
  const RefCache::Enclosures& sc = cache.scratch();
  if (whole.ref) {
    j["reference"] = reference_json(whole.ref->method, whole.cached, whole.enc_cached, sc.refined, sc.insufficient);
    const auto t_j = Clock::now();
    for (auto& e : sc.outputs) {
      const TensorSlot& s = ts.at(e.name);
      verdicts.push_back(judge(s.view(), whole.ref->at(e.name), e, s.alias_of.empty()));
    }
    t_judge = since(t_j);
  }

  nlohmann::json outs = nlohmann::json::object();
  bool any_fail = !reasons.empty(), any_unv = false;
  std::string empty;  // outputs without elements: a case that checked nothing never passes
  if (verdicts.empty()) empty = "(the op has no outputs)";
  for (const TensorVerdict& tv : verdicts) {
    if (tv.verdict == "fail") {
      any_fail = true;
      std::string why = tv.name + ": " + std::to_string(tv.n_fail) + " of " + std::to_string(tv.n) + " elements fail";
      if (tv.n_nan_mismatch) why += " (" + std::to_string(tv.n_nan_mismatch) + " NaN)";
      if (tv.n_unwritten) why += " (" + std::to_string(tv.n_unwritten) + " unwritten)";
      if (tv.n_padding_written) why += ", " + std::to_string(tv.n_padding_written) + " padding elements written";
      if (tv.first_fail_index >= 0) why += ", first at index " + std::to_string(tv.first_fail_index);
      reasons.push_back(why);
    }
    any_unv |= tv.verdict == "unverifiable";
    if (tv.n == 0) append_sep(empty, ", ", tv.name);
    outs[tv.name] = tv.to_json();
  }
  j["outputs"] = outs;
  double t_check = since(t0);
  // generate_s = alloc_s (storage, poisoned) + fill_s (the op's inputs; 0 when cached) +
  // digests; check_s includes judge_s (every output against its enclosure) and, where the
  // case streams (stream_blocks: blocks evaluated), reference_s and enclose_s (refinement).
  j["timings"] = {{"generate_s", t_generate},       {"alloc_s", t_alloc},          {"fill_s", t_fill},
                  {"reference_s", whole.reference_s}, {"enclose_s", whole.enclose_s}, {"impl_s", t_impl},
                  {"check_s", t_check},              {"judge_s", t_judge},          {"total_s", since(t_total)}};
  if (stream_blocks) j["timings"]["stream_blocks"] = stream_blocks;
  for (auto& [k2, v] : ts.timings) j["timings"][k2] = v;
  if (any_fail) {
    j["verdict"] = "fail";
    std::string r;
    for (auto& x : reasons) append_sep(r, "; ", x);
    j["reason"] = r;
    if (!env.repro_dir.empty()) {
      try {
        // A streamed case keeps no whole reference: its bundle holds the tensors alone.
        const RefResult none{{}, j["reference"].value("method", "")};
        const std::vector<OutputEnclosure> no_encs;
        j["repro"] = whole.ref ? write_repro(env.repro_dir, c, ts, *whole.ref, sc.outputs, j)
                               : write_repro(env.repro_dir, c, ts, none, no_encs, j);
      } catch (const std::exception& e) {
        j["repro_error"] = e.what();  // the verdict stands without its bundle
      }
    }
  } else if (!empty.empty()) {
    j["verdict"] = "skip";
    j["reason"] = "nothing to check: no elements in output " + empty + " at shape " + shape_str(c.shape);
  } else if (any_unv) {
    j["verdict"] = "unverifiable";
    j["reason"] = "the contract admits no useful bound for some elements (n_eff*u >= 1, or an intermediate may overflow to ±inf, NaN then admitted) or the reference could not decide them";
  } else {
    j["verdict"] = "pass";
  }
  return j;
}

}  // namespace

nlohmann::json run_case(const std::string& case_str, const RunEnv& env, RefCache& cache) {
  Case c;
  try {
    c = Case::parse(case_str);
    registry().normalize(c);
    return run_normalized(c, env, cache);
  } catch (const UsageError& e) {
    return error_result(c, env, std::string("invalid case: ") + e.what());
  } catch (const HarnessError& e) {
    return error_result(c, env, std::string("harness error: ") + e.what());
  } catch (const DeviceError& e) {
    auto j = error_result(c, env, std::string("device error: ") + e.what() +
                                      (e.sticky ? "; the worker ends and is restarted" : ""));
    if (e.sticky) j["worker_exit"] = true;
    return j;
  } catch (const std::bad_alloc&) {
    return error_result(c, env, "out of host memory while running the case");
  } catch (const std::exception& e) {
    return error_result(c, env, e.what());
  }
}

}  // namespace kv
