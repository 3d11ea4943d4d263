// Audited contracts (run/audit.hpp, issue 20 deliverable 4): the measured reduction shapes
// put in place of the declared ones, per axis, cached per impl version and case geometry.
#include <map>
#include <mutex>

#include "run/audit.hpp"

namespace kv {

namespace {

/// What decides the measured shapes: the impl (and its build), the case without its values.
std::string audit_key(const Case& c, const Impl& impl) {
  Case g = c;
  g.seed = 0, g.dist = "normal";
  return impl.name() + "@" + impl.version() + " " + g.str();
}

/// The audit rows of one case, measured once per key.
std::vector<AxisAudit> cached_audit(const Case& c, const Impl& impl, const DeviceProfile& p) {
  static std::mutex mu;
  static std::map<std::string, std::vector<AxisAudit>> cache;
  const std::string key = audit_key(c, impl);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  std::vector<AxisAudit> rows = audit_case(c, impl, p, AuditOptions{});
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(key, std::move(rows)).first->second;
}

}  // namespace

AuditedContract audited_contract(const Case& c, const Impl& impl, const DeviceProfile& p, const Contract& declared) {
  AuditedContract r;
  r.k = declared;
  if (declared.reductions.empty()) return r;
  const std::vector<AxisAudit> rows = cached_audit(c, impl, p);
  for (auto& [axis, shape] : r.k.reductions) {
    // Every read of the axis (layer_norm.bwd rows: dw and db) must be measured exactly;
    // the deepest one is the axis's shape.
    std::optional<MeasuredShape> worst;
    std::string why;
    for (const AxisAudit& a : rows) {
      if (a.axis != axis) continue;
      if (a.status == "wrong_sum") r.failure += (r.failure.empty() ? "" : "; ") + axis + ": " + a.note;
      const bool exact = a.exact && a.measured && (a.status == "ok" || a.status == "understated");
      if (!exact) {
        why = a.status + (a.note.empty() ? "" : ": " + a.note);
        continue;
      }
      if (!worst || a.measured->n_eff > worst->n_eff) worst = a.measured;
    }
    if (!why.empty() || !worst) {
      r.source[axis] = "declared (audit: " + (why.empty() ? std::string("no audit row") : why) + ")";
      continue;
    }
    shape.serial = worst->shape.serial, shape.depth = worst->shape.depth, shape.partials = worst->shape.partials;
    if (shape.n_eff() < worst->n_eff) shape.depth += worst->n_eff - shape.n_eff();  // fan-in nodes
    r.source[axis] = "measured";
  }
  return r;
}

std::optional<std::string> apply_audited_contract(const Case& c, const Impl& impl, const DeviceProfile& p, Contract& k,
                                                  nlohmann::json& j) {
  AuditedContract a = audited_contract(c, impl, p, k);
  j["contract_declared"] = k.to_json();
  j["contract_source"] = a.source;
  k = std::move(a.k);
  if (a.failure.empty()) return std::nullopt;
  return "audit: the impl's sums drop or double terms: " + a.failure;
}

}  // namespace kv
