// Runs one case in this process: allocate (canaries, poison), generate, reference (once
// per input identity), enclosure under the impl's contract, run, judge, one result line.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "check/replay.hpp"
#include "core/case.hpp"
#include "core/device.hpp"
#include "core/registry.hpp"

namespace kv {

inline constexpr int kResultSchemaVersion = 1;

struct RunEnv {
  DeviceInfo device;
  std::string run_id;
  /// Measured max ulp error per math function on this device (calibrate-math); a
  /// contract citing fewer ulps is a harness error. Empty on the host.
  std::map<std::string, double> measured_ulps;
  /// Where failing cases leave reproducer bundles (run/repro.hpp); empty: nowhere.
  std::string repro_dir;
  /// Where every judged case leaves its outputs as <case_id>.safetensors (drift analysis
  /// compares them bit by bit); empty: nowhere.
  std::string outputs_dir;
  /// Plugins and worker the run loaded: every result line's replay command names them.
  ImplSources sources;
  /// --contract audited: each case's reduction shapes are measured by `kverify audit`
  /// (run/audit.hpp audited_contract) in place of the declared ones, where the audit can.
  bool audited = false;
};

/// Generated inputs of one input identity and layout: the input buffers as generation
/// left them (canaries and poisoned padding included) and their digests. Cases share
/// these buffers (impls must not write inputs, which every case checks); an input that
/// an output aliases is copied instead.
struct InputSnapshot {
  std::vector<std::shared_ptr<Buffer>> buffers;  // per input slot, in slot order
  nlohmann::json digests;
  std::map<std::string, uint64_t> raw_digests;
};

/// Reference results by input identity, reused by every impl and config sharing it, and
/// generated inputs by input identity and layout. Bounded: the oldest entries go first.
class RefCache {
 public:
  explicit RefCache(size_t max_entries = 2) : max_(max_entries) {}
  std::shared_ptr<RefResult> get(uint64_t input_id) const;
  void put(uint64_t input_id, std::shared_ptr<RefResult> r);
  std::shared_ptr<InputSnapshot> inputs(uint64_t key) const;
  void put_inputs(uint64_t key, std::shared_ptr<InputSnapshot> s);
  void drop_inputs(uint64_t key);
  size_t hits() const { return hits_; }
  /// The last enclosure computed, with its key (input identity and contract numerics):
  /// a case with the same key reuses it, a new key overwrites it (storage reused).
  struct Enclosures {
    uint64_t key = 0;
    bool valid = false;
    std::vector<OutputEnclosure> outputs;
    int64_t refined = 0, insufficient = 0;
  };
  Enclosures& scratch() { return scratch_; }

 private:
  Enclosures scratch_;
  size_t max_;
  mutable size_t hits_ = 0;
  std::vector<std::pair<uint64_t, std::shared_ptr<RefResult>>> entries_;
  std::vector<std::pair<uint64_t, std::shared_ptr<InputSnapshot>>> inputs_;
};

/// Build identity compiled into the binary.
nlohmann::json build_info();

/// The fields every result line carries, from the case alone (also used by the parent
/// when the worker dies before answering).
nlohmann::json result_skeleton(const Case& c, const RunEnv& env);
/// An `error` result line with a reason.
nlohmann::json error_result(const Case& c, const RunEnv& env, const std::string& reason);

/// Bytes of the case's tensors as laid out (storage, padding included; aliased outputs
/// share their input's storage). An impl's own workspace is not counted.
double case_tensor_bytes(const Case& c, const OpBinding& op);

/// The host's available memory (/proc/meminfo MemAvailable), in bytes.
int64_t mem_available_bytes();

/// The case's tensors with their layouts and aliases: every buffer poisoned, canaried.
TensorSet allocate_tensors(const Case& c, const OpBinding& op);

/// The whole-tensor reference of c under k from the generated inputs in `ins`: the value
/// once per input identity (cache), the enclosure (cache.scratch(), kept while its key
/// holds), the elements that missed the reference target refined and those still missing
/// marked unverifiable. A case that streams goes through check/stream.hpp instead.
struct WholeRef {
  std::shared_ptr<RefResult> ref;
  bool cached = false, enc_cached = false;
  double reference_s = 0, enclose_s = 0;
};
WholeRef whole_reference(const Case& c, const OpBinding& op, const Contract& k, const TensorSet& ins, RefCache& cache);

/// The impl's run on ts: its workspaces allocated into ts.workspaces, poisoned and
/// canaried like tensors (a fresh set each call), then impl.run. The case runner and the
/// audit's probe calls (run/audit.hpp) both run impls through it.
void run_impl_on(const Impl& impl, TensorSet& ts, const Case& c, const DeviceProfile& p);

/// Parses, normalizes and runs one case; never throws (errors become verdict `error`).
nlohmann::json run_case(const std::string& case_str, const RunEnv& env, RefCache& cache);

}  // namespace kv
