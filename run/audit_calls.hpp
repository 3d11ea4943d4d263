// The audit's calls (run/audit.hpp): lane probes (+M, -M, units) packed into the lanes of
// one impl call each, read back on the integer grid, and the LCA-size oracle built on them.
#pragma once
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "check/audit_tree.hpp"
#include "run/audit.hpp"
#include "core/registry.hpp"
#include "ops/audit_probe.hpp"

namespace kv::audit_detail {

/// One lane's probe: +M at g, -M at j (-1: none), u0 at each of units (sorted), the rest 0.
struct LaneProbe {
  int64_t g = -1, j = -1;
  std::vector<int64_t> units;
  int64_t z = -1;  // the zero slot of an indirect or dx readout
  bool empty() const { return g < 0 && j < 0 && units.empty(); }
};

/// The impl run on crafted inputs: one TensorSet, refilled and run per call (run_impl_on).
class ProbeRunner {
 public:
  ProbeRunner(const Impl& impl, const Case& c, const DeviceProfile& p, const AxisProbe& probe, ProbeScale s);
  int64_t lanes() const { return probe_.lanes(c_); }
  int64_t calls = 0;
  /// One call of any terms; per lane the sum S as read (NaN where not finite; lanes
  /// without terms are not read).
  std::vector<double> call_terms(const std::vector<LaneTerms>& t);
  /// One call; per lane the units read back, S / u0, or -1 where the readout is not on the
  /// integer grid (off by more than 1/4), not finite, or outside [0, units] (or the lane is
  /// empty).
  std::vector<int64_t> call(const std::vector<LaneProbe>& lanes);

 private:
  const Impl& impl_;
  const Case& c_;
  const DeviceProfile& p_;
  const AxisProbe& probe_;
  ProbeScale s_;
  TensorSet ts_;
  std::chrono::steady_clock::time_point last_note_ = std::chrono::steady_clock::now();
};

/// What one axis's probing shares: the runner, its scale, the axis length, the block size
/// (units per lane), the seeded generator; pin >= 0: every probe alone in that lane (a lane
/// whose order differs from the others').
struct Ctx {
  ProbeRunner& run;
  ProbeScale scale;
  int64_t n, block;
  bool zero_slot;
  std::mt19937_64 rng;
  std::string rejected;  // the first readout rejected, in words
  int64_t pin = -1;
};

/// A zero slot for p: the first position outside its units and pair (units sorted).
int64_t zero_slot_of(const LaneProbe& p, int64_t n);
/// The positions other than g and j (ascending) in blocks of at most ctx.block.
std::vector<LaneProbe> blocks_for(const Ctx& ctx, int64_t g, int64_t j);
/// Runs lane probes packed `lanes` per call in a seeded order (or one per call in lane
/// ctx.pin); per probe its readout.
std::vector<int64_t> run_packed(Ctx& ctx, const std::vector<LaneProbe>& probes);
/// The oracle: L(g, j) = 2 + sum over blocks of (|K_b| - S_b); -1 where a readout is rejected.
std::vector<int64_t> lca_sizes(Ctx& ctx, const std::vector<LeafPair>& pairs);

/// The dtype of one of c's tensors, from the op's tensor list (nothing allocated).
DType dtype_of(const Case& c, const std::string& tensor);

/// The verdict of a measured (or lower-bound) n_eff against a's declared one: ok or
/// lower_bound, else understated with the note that the impl's verdicts are unsound.
void judge(AxisAudit& a, int64_t measured, bool exact);

/// An axis whose terms are all positive (probe.positive), measured through triplets
/// (check/audit_triplets.hpp, run/audit_positive.cpp) and judged.
void measure_positive(AxisAudit& a, const Case& c, const Impl& impl, const DeviceProfile& p, const AxisProbe& probe,
                      DType acc, const AuditOptions& o);

}  // namespace kv::audit_detail
