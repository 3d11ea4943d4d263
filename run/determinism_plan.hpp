// What `kverify audit` runs to hold an impl to its determinism claims (Contract::determinism,
// issue 20 deliverable 3): the case under the impl's other configs (config_invariant), the
// first dims of its batch companions (batch_invariant: row counts that straddle the places
// where a kernel's path changes), and a bit-for-bit comparison of two outputs. The runs
// themselves go through workers (cli/audit_determinism.hpp).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/case.hpp"
#include "core/device.hpp"
#include "core/registry.hpp"
#include "core/safetensors.hpp"

namespace kv {

/// The claims, in the order the audit reports them.
inline const std::vector<std::string>& determinism_claims() {
  static const std::vector<std::string> k = {"run_to_run", "config_invariant", "batch_invariant", "gpu_invariant"};
  return k;
}

struct DeterminismLimits {
  size_t max_configs = 8;
  size_t max_companions = 10;
  /// Elements of one companion: at most the larger of this and twice the case's.
  int64_t companion_elements = int64_t(1) << 20;
  /// Elements of all companions together: at most the larger of this and 4x the case's.
  int64_t total_elements = int64_t(1) << 22;
};

/// c (normalized) under other configs of impl, each valid under p, nearest first: every
/// one-knob change (knobs and values in the impl's order), then two-knob changes, ...; at
/// most max. Deterministic.
std::vector<Case> other_configs(const Case& c, const Impl& impl, const DeviceProfile& p, size_t max);

/// A batch companion's first dim, and why that row count.
struct CompanionDim {
  int64_t d0;
  std::string why;
};

/// First dims above c's for batch companions, ascending, in row counts (the product of every
/// dim but the last): one more row; v - 1, v, v + 1 for each rows threshold impl declares
/// (Impl::thresholds with `rows`: the hook for an impl's own batch thresholds); sm_count - 1,
/// sm_count, sm_count + 1 and 2 sm_count - 1, 2 sm_count, 2 sm_count + 1; 2^k - 1, 2^k and
/// 2^k + 1 for the two powers of two above c's rows. Chosen in that order of priority
/// within the limits' count and sizes. Empty where c has fewer than two dims.
std::vector<CompanionDim> companion_dims(const Case& c, const Impl& impl, const DeviceProfile& p,
                                         const DeterminismLimits& l);

struct BitDiff {
  int64_t n_diff = 0;  // elements whose bits differ
  int64_t first = -1;  // the first of them (flat index), -1: none
};

/// a against b bit for bit: the same dtype and trailing dims, b with as many or more leading
/// rows (then a is compared with b's first rows). None where they do not line up.
std::optional<BitDiff> bit_diff(const StoredTensor& a, const StoredTensor& b);

}  // namespace kv
