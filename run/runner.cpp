// One case, start to finish, in this process, phase by phase: validate (device, config,
// contract, host memory), inputs, reference and enclosure, run, integrity checks (canaries,
// inputs untouched), judge, verdict. CaseRun carries what the phases hand each other.
#include "run/runner.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>

#include "check/judge.hpp"
#include "check/stream.hpp"
#include "core/digest.hpp"
#include "core/error.hpp"
#include "core/inputs.hpp"
#include "core/row_slice.hpp"
#include "core/safetensors.hpp"
#include "core/sites.hpp"
#include "run/audit.hpp"
#include "run/progress.hpp"
#include "run/repro.hpp"

namespace kv {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string gib(double bytes) {
  std::ostringstream o;
  o.precision(3);
  o << bytes / (1024.0 * 1024.0 * 1024.0) << " GiB";
  return o.str();
}

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

/// What the phases of one case hand each other: the result line as it grows, and the
/// case's state from its tensors to its verdicts.
struct CaseRun {
  const Case& c;
  const RunEnv& env;
  RefCache& cache;
  const OpBinding& op;
  const Impl& impl;
  const DeviceProfile& prof;
  Clock::time_point t_total = Clock::now();
  nlohmann::json j;
  Contract k;
  StreamPlan plan;
  TensorSet ts;
  uint64_t input_key = 0;  // the input identity and layout: the snapshot's key
  std::shared_ptr<InputSnapshot> snap;
  WholeRef whole;  // empty where the case streams (and its reference was not taken whole)
  std::vector<std::string> reasons;  // why the case fails, so far
  bool inputs_modified = false;
  std::vector<TensorVerdict> verdicts;
  int64_t stream_blocks = 0;
  Clock::time_point t_check;  // the integrity checks and the judging start
  double t_alloc = 0, t_fill = 0, t_generate = 0, t_impl = 0, t_judge = 0;

  CaseRun(const Case& c_, const RunEnv& env_, RefCache& cache_)
      : c(c_),
        env(env_),
        cache(cache_),
        op(registry().op(c_.op)),
        impl(registry().impl(c_.op, c_.impl)),
        prof(env_.device.profile),
        j(result_skeleton(c_, env_)) {}
};

/// Whether the case runs here: a skip (j complete) where the impl runs on another device
/// or its config is invalid for this one. Takes the contract, holds it to the measured
/// ulps, and plans the reference's memory (a HarnessError or UsageError otherwise).
bool validate(CaseRun& r) {
  r.j["impl_version"] = r.impl.version();
  if (r.impl.device() != r.env.device.kind) {
    r.j["verdict"] = "skip";
    r.j["reason"] = "impl " + r.impl.name() + " runs on " + r.impl.device() + ", this run's device is " + r.env.device.kind;
    return false;
  }
  if (auto why = r.impl.refusal(r.c, r.prof)) {
    r.j["verdict"] = "skip";
    r.j["reason"] = *why;
    return false;
  }
  r.k = r.impl.contract(r.c, r.prof);
  if (r.env.audited)
    if (auto why = apply_audited_contract(r.c, r.impl, r.prof, r.k, r.j)) r.reasons.push_back(*why);
  r.j["contract"] = r.k.to_json();
  check_contract(r.op, r.c, r.k, r.impl.name(), r.env.measured_ulps);

  // Memory: the case's tensors and the reference beside them, whole or a block of rows
  // at a time (check/stream.hpp).
  r.plan = plan_stream(r.c, r.op, row_block_bytes());
  const double need = case_host_bytes(r.c, r.op, r.plan);
  double avail = static_cast<double>(mem_available_bytes());
  if (need > 0.8 * avail)
    throw UsageError("shape " + shape_str(r.c.shape) + " does not fit in host memory: the case needs about " + gib(need) +
                     ", " + gib(avail) + " available");
  return true;
}

/// Whether an output of ts is written over this input.
bool aliased(const TensorSet& ts, const TensorSlot& in) {
  for (auto& o : ts.slots)
    if (o.alias_of == in.desc.name) return true;
  return false;
}

/// Generates the inputs (once per input identity and layout) and snapshots them with
/// their digests, the snapshot holding a copy of an input written in place.
void generate_inputs(CaseRun& r) {
  const auto t_f = Clock::now();
  r.op.generate(r.c, r.ts);
  r.t_fill = since(t_f);
  r.snap = std::make_shared<InputSnapshot>();
  r.snap->digests = nlohmann::json::object();
  for (auto& s : r.ts.slots) {
    if (s.role != Role::input) continue;
    if (aliased(r.ts, s)) {
      auto copy = std::make_shared<Buffer>(s.buffer->payload_bytes());
      copy->copy_from(*s.buffer);
      copy->set_label("cached copy of " + s.desc.name);
      r.snap->buffers.push_back(copy);
    } else {
      r.snap->buffers.push_back(s.buffer);
    }
    r.snap->digests[s.desc.name] = digest(s.view()).to_json();
    r.snap->raw_digests[s.desc.name] = raw_digest(s.buffer->payload(), s.buffer->payload_bytes());
  }
  r.cache.put_inputs(r.input_key, r.snap);
}

/// The case's tensors, poisoned and canaried, with the inputs generated or taken from the
/// cache's snapshot (shared; a private copy where an output is written over the input).
void prepare_inputs(CaseRun& r) {
  auto t0 = Clock::now();
  r.ts = allocate_tensors(r.c, r.op);
  r.t_alloc = since(t0);
  Case layout_only;
  layout_only.layout = r.c.layout;
  layout_only.alias = r.c.alias;
  r.input_key = r.c.input_id() ^ layout_only.case_id();
  r.snap = r.cache.inputs(r.input_key);
  if (r.snap) {
    size_t k = 0;
    for (auto& s : r.ts.slots) {
      if (s.role != Role::input) continue;
      const auto& b = r.snap->buffers[k++];
      if (aliased(r.ts, s)) s.buffer->copy_from(*b);  // written in place: a private copy
      else s.buffer = b;
    }
    for (auto& s : r.ts.slots)  // outputs aliasing an input follow its buffer
      if (!s.alias_of.empty()) s.buffer = r.ts.at(s.alias_of).buffer;
  } else {
    generate_inputs(r);
  }
  r.j["inputs"] = r.snap->digests;
  r.t_generate = since(t0);
}

/// Reference once per input identity; enclosure under this contract. A case that streams
/// evaluates both after the run, a block of rows at a time.
void reference_and_enclosure(CaseRun& r) {
  if (!r.plan.streams()) r.whole = whole_reference(r.c, r.op, r.k, r.ts, r.cache);
}

/// The impl's run (run_impl_on), timed.
void run_impl(CaseRun& r) {
  const auto t0 = Clock::now();
  run_impl_on(r.impl, r.ts, r.c, r.prof);
  r.t_impl = since(t0);
}

/// Canaries intact and inputs unmodified (else a reason, and the shared snapshot dropped);
/// the outputs kept where the run keeps them (drift analysis).
void integrity_checks(CaseRun& r) {
  r.t_check = Clock::now();
  for (auto& s : r.ts.slots)
    if (s.alias_of.empty())
      if (auto dmg = s.buffer->canary_damage()) {
        r.reasons.push_back("out-of-bounds write on " + s.desc.name + ": " + *dmg);
        if (s.role == Role::input) r.cache.drop_inputs(r.input_key), r.inputs_modified = true;  // shared: not pristine now
      }
  for (auto& [n, b] : r.ts.workspaces)
    if (auto dmg = b->canary_damage()) r.reasons.push_back("out-of-bounds write on workspace " + n + ": " + *dmg);
  const std::map<std::string, uint64_t>& raw_before = r.snap->raw_digests;
  for (auto& s : r.ts.slots) {
    if (s.role != Role::input) continue;
    bool written_in_place = false;
    for (auto& o : r.ts.slots) written_in_place |= o.alias_of == s.desc.name;
    if (!written_in_place && raw_digest(s.buffer->payload(), s.buffer->payload_bytes()) != raw_before.at(s.desc.name)) {
      r.reasons.push_back("input " + s.desc.name + " was modified");
      r.cache.drop_inputs(r.input_key);  // the shared copy is no longer pristine
      r.inputs_modified = true;
    }
  }
  if (!r.env.outputs_dir.empty()) {
    std::map<std::string, StoredTensor> kept;
    for (auto& t : r.op.tensors(r.c))
      if (t.role == Role::output) kept[t.name] = gather(r.ts.at(t.name).view());
    write_safetensors((std::filesystem::path(r.env.outputs_dir) / (hex64(r.c.case_id()) + ".safetensors")).string(),
                      kept, {{"case", r.c.str()}});
  }
}

/// Verdicts per output: against the whole reference, or streamed.
void judge_outputs(CaseRun& r) {
  if (r.plan.streams()) {
    r.cache.scratch() = RefCache::Enclosures{};  // a whole case's enclosure would outlive its use here
    const TensorSet ins = generated_inputs(r.c, r.op, r.ts, *r.snap, r.inputs_modified);
    StreamOutcome so = check_streamed(r.c, r.op, r.k, r.plan, ins, r.ts);
    if (so.whole_instead) {
      r.whole = whole_reference(r.c, r.op, r.k, ins, r.cache);
    } else {
      for (auto& v : so.verdicts)
        if (!r.k.not_produced.count(v.name)) r.verdicts.push_back(std::move(v));
      r.stream_blocks = so.blocks_evaluated;
      r.whole.reference_s = so.reference_s, r.whole.enclose_s = so.refine_s, r.t_judge = so.judge_s;
      r.j["reference"] = reference_json(so.method, false, false, so.refined, so.insufficient);
    }
  }
  const RefCache::Enclosures& sc = r.cache.scratch();
  if (r.whole.ref) {
    r.j["reference"] = reference_json(r.whole.ref->method, r.whole.cached, r.whole.enc_cached, sc.refined, sc.insufficient);
    const auto t_j = Clock::now();
    for (auto& e : sc.outputs) {
      if (r.k.not_produced.count(e.name)) continue;  // listed in the result line instead
      const TensorSlot& s = r.ts.at(e.name);
      r.verdicts.push_back(judge(s.view(), r.whole.ref->at(e.name), e, s.alias_of.empty()));
    }
    r.t_judge = since(t_j);
  }
}

/// What the outputs' verdicts add up to.
struct OutputsSummary {
  bool any_fail = false, any_unv = false;
  std::string empty;  // outputs without elements: a case that checked nothing never passes
};

/// The result line's outputs, and a reason for each failing one.
OutputsSummary record_outputs(CaseRun& r) {
  OutputsSummary s;
  nlohmann::json outs = nlohmann::json::object();
  s.any_fail = !r.reasons.empty();
  if (r.verdicts.empty()) s.empty = r.k.not_produced.empty() ? "(the op has no outputs)" : "(the impl produces none)";
  if (!r.k.not_produced.empty()) r.j["not_produced"] = r.k.not_produced;
  for (const TensorVerdict& tv : r.verdicts) {
    if (tv.verdict == "fail") {
      s.any_fail = true;
      std::string why = tv.name + ": " + std::to_string(tv.n_fail) + " of " + std::to_string(tv.n) + " elements fail";
      if (tv.n_nan_mismatch) why += " (" + std::to_string(tv.n_nan_mismatch) + " NaN)";
      if (tv.n_unwritten) why += " (" + std::to_string(tv.n_unwritten) + " unwritten)";
      if (tv.n_padding_written) why += ", " + std::to_string(tv.n_padding_written) + " padding elements written";
      if (tv.first_fail_index >= 0) why += ", first at index " + std::to_string(tv.first_fail_index);
      r.reasons.push_back(why);
    }
    s.any_unv |= tv.verdict == "unverifiable";
    if (tv.n == 0) append_sep(s.empty, ", ", tv.name);
    outs[tv.name] = tv.to_json();
  }
  r.j["outputs"] = outs;
  return s;
}

void record_timings(CaseRun& r) {
  double t_check = since(r.t_check);
  // generate_s = alloc_s (storage, poisoned) + fill_s (the op's inputs; 0 when cached) +
  // digests; check_s includes judge_s (every output against its enclosure) and, where the
  // case streams (stream_blocks: blocks evaluated), reference_s and enclose_s (refinement).
  r.j["timings"] = {{"generate_s", r.t_generate},       {"alloc_s", r.t_alloc},          {"fill_s", r.t_fill},
                    {"reference_s", r.whole.reference_s}, {"enclose_s", r.whole.enclose_s}, {"impl_s", r.t_impl},
                    {"check_s", t_check},                {"judge_s", r.t_judge},          {"total_s", since(r.t_total)}};
  if (r.stream_blocks) r.j["timings"]["stream_blocks"] = r.stream_blocks;
  for (auto& [k2, v] : r.ts.timings) r.j["timings"][k2] = v;
}

/// fail (with a reproducer bundle where the run keeps them), skip, unverifiable or pass.
void decide_verdict(CaseRun& r, const OutputsSummary& s) {
  nlohmann::json& j = r.j;
  if (s.any_fail) {
    j["verdict"] = "fail";
    std::string reason;
    for (auto& x : r.reasons) append_sep(reason, "; ", x);
    j["reason"] = reason;
    if (!r.env.repro_dir.empty()) {
      try {
        // A streamed case keeps no whole reference: its bundle holds the tensors alone.
        const RefResult none{{}, j["reference"].value("method", "")};
        const std::vector<OutputEnclosure> no_encs;
        j["repro"] = r.whole.ref ? write_repro(r.env.repro_dir, r.c, r.ts, *r.whole.ref, r.cache.scratch().outputs, j)
                                 : write_repro(r.env.repro_dir, r.c, r.ts, none, no_encs, j);
      } catch (const std::exception& e) {
        j["repro_error"] = e.what();  // the verdict stands without its bundle
      }
    }
  } else if (!s.empty.empty()) {
    j["verdict"] = "skip";
    j["reason"] = "nothing to check: no elements in output " + s.empty + " at shape " + shape_str(r.c.shape);
  } else if (s.any_unv) {
    j["verdict"] = "unverifiable";
    j["reason"] = "the contract admits no useful bound for some elements (n_eff*u >= 1, or an intermediate may overflow to ±inf, NaN then admitted) or the reference could not decide them";
  } else {
    j["verdict"] = "pass";
  }
}

nlohmann::json run_normalized(const Case& c, const RunEnv& env, RefCache& cache) {
  CaseProgress progress(c.op + " " + c.impl + " " + shape_str(c.shape));
  CaseRun r(c, env, cache);
  if (!validate(r)) return r.j;
  progress.phase("inputs");
  allow_gpu_fill(env.device.kind == "cuda");  // large inputs generated on the GPU, bit for bit the host's
  prepare_inputs(r);
  progress.phase("reference and enclosure");
  reference_and_enclosure(r);
  progress.phase("kernel");
  run_impl(r);
  progress.phase("integrity checks");
  integrity_checks(r);
  progress.phase("judge");
  judge_outputs(r);
  const OutputsSummary s = record_outputs(r);
  record_timings(r);
  decide_verdict(r, s);
  return r.j;
}

}  // namespace

void run_impl_on(const Impl& impl, TensorSet& ts, const Case& c, const DeviceProfile& p) {
  for (auto& w : impl.workspaces(c, p)) {
    auto b = std::make_shared<Buffer>(w.bytes);
    b->set_label("workspace " + w.name);
    b->poison(w.poison_as);
    ts.workspaces[w.name] = b;
  }
  impl.run(ts, c, p);
}

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
