// `kverify audit` (issue 20, deliverable 3): per reduced axis of a case, the summation
// tree an impl really uses, measured from outside by masking probes (ops/audit_probe.hpp)
// run through the impl (run_impl_on) and rebuilt by FPRev's recursion
// (check/audit_tree.hpp), then compared with the axis's declared ReductionShape: a contract
// that declares fewer roundings per term (n_eff) than measured makes the impl's verdicts
// unsound. Runs in this process: built-in impls and worker impls (through the worker's
// transport); plugin impls run only in the case-running process (not audited yet).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "check/audit_tree.hpp"
#include "core/case.hpp"
#include "core/device.hpp"
#include "core/registry.hpp"

namespace kv {

struct AuditOptions {
  uint64_t seed = 1;         // pivots, lane assignment, spot checks
  int64_t max_calls = 20000; // impl calls per axis before the audit falls back to pivot paths
};

/// One axis (and output read) of one case.
struct AxisAudit {
  std::string op, impl, config, axis, out;
  /// ok: measured n_eff <= declared; understated: declared < measured (or a lower bound);
  /// wrong_sum: units alone do not read back their count (terms dropped or doubled);
  /// nondeterministic: the same probes read differently call to call (atomics; worst-order
  /// trees not built yet); inconsistent: no single tree explains the answers (per-lane orders, value-dependent
  /// sums); lower_bound: the budget ran out, the depth of pivot leaves measured (no pass
  /// claimed); unmeasurable; declined; "nothing to audit" (the op has no reduced axis).
  std::string status;
  std::string how, note;
  ReductionShape declared;
  std::optional<MeasuredShape> measured;
  bool exact = false;  // measured is the whole tree's (else a lower bound or nothing)
  int64_t calls = 0, probes = 0;
  /// understated or wrong_sum: the impl's verdicts on this axis are unsound (exit 1).
  bool unsound() const { return status == "understated" || status == "wrong_sum"; }
  /// sound (ok), unsound, or unknown (every other status).
  std::string verdict() const;
  nlohmann::json to_json() const;
};

/// The case's config as k=v,k=v.
std::string config_str(const Case& c);

/// Every reduced axis of impl's contract for c (normalized) under profile p, in the
/// contract's order; one entry "nothing to audit" where the contract has none.
std::vector<AxisAudit> audit_case(const Case& c, const Impl& impl, const DeviceProfile& p, const AuditOptions& o);

/// An audited contract (deliverable 4, `--contract audited`): the declared contract with each
/// reduced axis the audit measured exactly (status ok or understated, every output read) set to
/// the measured shape, the others kept as declared. source: per axis "measured" or "declared
/// (<why>)"; failure: a sum that drops or doubles terms (wrong_sum), which fails the case.
struct AuditedContract {
  Contract k;
  nlohmann::json source = nlohmann::json::object();
  std::string failure;
};
/// Audits once per (impl, version, op, config, shape, dtypes, attrs, layout) in this
/// process (thread-safe) and applies the result to `declared`.
AuditedContract audited_contract(const Case& c, const Impl& impl, const DeviceProfile& p, const Contract& declared);
/// The runner's use of it: k (declared) becomes the audited contract, the result line j gets
/// contract_declared and contract_source; the reason the case fails where a sum is wrong.
std::optional<std::string> apply_audited_contract(const Case& c, const Impl& impl, const DeviceProfile& p, Contract& k,
                                                  nlohmann::json& j);

}  // namespace kv
