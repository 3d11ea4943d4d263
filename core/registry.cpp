// Registry lookups and config normalization.
#include "core/registry.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace kv {

const OutputRef& RefResult::at(const std::string& name) const {
  for (auto& o : outputs)
    if (o.name == name) return o;
  throw HarnessError("reference has no output '" + name + "'");
}

OutputRef& RefResult::at(const std::string& name) {
  return const_cast<OutputRef&>(static_cast<const RefResult&>(*this).at(name));
}

void OpBinding::evaluate_only(const Case& c, const TensorSet& ts, const Contract& k, const std::set<std::string>& want,
                              RefResult& ref, std::vector<OutputEnclosure>& out) const {
  evaluate(c, ts, k, ref, out);
  for (auto& o : ref.outputs)
    if (!want.count(o.name)) DoubleBuf().swap(o.v), DoubleBuf().swap(o.err);
  for (auto& e : out)
    if (!want.count(e.name)) DoubleBuf().swap(e.lo), DoubleBuf().swap(e.hi), ByteBuf().swap(e.unverifiable), ByteBuf().swap(e.may_nan);
}

Threshold rows_threshold(const Case& c, std::vector<int64_t> values, std::string what) {
  const int rank = static_cast<int>(c.shape.size());
  return Threshold{0, std::max(rank - 1, 0), std::move(values), std::move(what), true};
}

Threshold row_threshold(const Case& c, std::vector<int64_t> values, std::string what) {
  const int rank = static_cast<int>(c.shape.size());
  return Threshold{std::max(rank - 1, 0), rank, std::move(values), std::move(what), false};
}

void Registry::add(std::unique_ptr<OpBinding> op) { ops_.push_back(std::move(op)); }
void Registry::add(std::unique_ptr<Impl> impl) { impls_.push_back(std::move(impl)); }

bool Registry::remove_impl(const std::string& op, const std::string& name) {
  const auto n = impls_.size();
  std::erase_if(impls_, [&](const std::unique_ptr<Impl>& i) { return i->op() == op && i->name() == name; });
  return impls_.size() != n;
}

const OpBinding& Registry::op(const std::string& name) const {
  std::vector<std::string> known;
  for (auto& o : ops_) {
    if (o->name() == name) return *o;
    known.push_back(o->name());
  }
  throw UsageError(unknown_name("op", name, known));
}

const Impl& Registry::impl(const std::string& op, const std::string& name) const {
  std::vector<std::string> known;
  for (auto& i : impls_) {
    if (i->op() != op) continue;
    if (i->name() == name) return *i;
    if (!i->test_only()) known.push_back(i->name());
  }
  throw UsageError(unknown_name("impl", name, known, " for op " + op));
}

std::vector<const OpBinding*> Registry::ops() const {
  std::vector<const OpBinding*> out;
  for (auto& o : ops_) out.push_back(o.get());
  return out;
}

std::vector<const Impl*> Registry::impls(const std::string& op) const {
  std::vector<const Impl*> out;
  for (auto& i : impls_)
    if (i->op() == op) out.push_back(i.get());
  return out;
}

void Registry::normalize(Case& c) const {
  const OpBinding& b = op(c.op);
  check_shape_size(c.shape);
  const Impl& im = impl(c.op, c.impl);
  auto knobs = im.knobs();
  for (auto& [k, v] : c.config) {
    auto it = std::find_if(knobs.begin(), knobs.end(), [&](auto& kn) { return kn.name == k; });
    if (it == knobs.end()) {
      std::vector<std::string> names;
      for (auto& kn : knobs) names.push_back(kn.name);
      throw UsageError("invalid config: " + unknown_name("knob", k, names, " for impl " + c.impl));
    }
    if (std::find(it->values.begin(), it->values.end(), v) == it->values.end()) {
      std::string vals;
      for (auto& x : it->values) append_sep(vals, "|", x);
      throw UsageError("invalid config: " + k + "=" + v + " for impl " + c.impl + " (allowed: " + vals + ")");
    }
  }
  for (auto& kn : knobs)
    if (!c.config.count(kn.name)) c.config[kn.name] = kn.values.front();
  b.normalize(c);
  // Every tensor's storage in bytes, with its layout, fits (checked arithmetic throws).
  for (auto& s : b.tensors(c)) {
    TensorDesc d{s.name, s.dtype, s.shape, {}, 0};
    if (auto it = c.layout.find(s.name); it != c.layout.end()) d.strides = it->second.strides, d.offset = it->second.offset;
    d.storage_bytes();
  }
}

Registry& registry() {
  static Registry r;
  return r;
}

DeterminismClaims with_batch_claim(const Case& c, const std::string& out, DeterminismClaims base) {
  if (registry().op(c.op).row_local(c, out)) base.push_back("batch_invariant");
  return base;
}

std::optional<std::string> Impl::refusal(const Case& c, const DeviceProfile& p) const {
  if (auto why = declines(c, p)) return "declined by " + name() + ": " + *why;
  if (auto why = invalid_reason(c, p)) return "invalid on this device: " + *why;
  return std::nullopt;
}

}  // namespace kv
