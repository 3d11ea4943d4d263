// The audit's calls (run/audit_calls.hpp).
#include "run/audit_calls.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/error.hpp"
#include "run/runner.hpp"

namespace kv::audit_detail {

ProbeRunner::ProbeRunner(const Impl& impl, const Case& c, const DeviceProfile& p, const AxisProbe& probe, ProbeScale s)
    : impl_(impl), c_(c), p_(p), probe_(probe), s_(s), ts_(allocate_tensors(c, registry().op(c.op))) {
  probe_.fill_fixed(ts_, c_);
}

std::vector<double> ProbeRunner::call_terms(const std::vector<LaneTerms>& t) {
  if (!c_.alias.empty()) probe_.fill_fixed(ts_, c_);  // an output written over an input
  probe_.fill(ts_, c_, t);
  run_impl_on(impl_, ts_, c_, p_);
  ++calls;
  // A long audit says where it is on stderr, every 10 s (a large case can take minutes).
  if (const auto now = std::chrono::steady_clock::now(); now - last_note_ > std::chrono::seconds(10)) {
    if (calls > 1)
      std::fprintf(stderr, "audit: %s %s axis %s (%s): %lld calls so far\n", c_.op.c_str(), impl_.name().c_str(),
                   probe_.axis.c_str(), probe_.out.c_str(), static_cast<long long>(calls));
    last_note_ = now;
  }
  std::vector<double> v(t.size(), std::nan(""));
  for (size_t l = 0; l < t.size(); ++l)
    if (!t[l].terms.empty()) v[l] = probe_.read(ts_, c_, static_cast<int64_t>(l), t[l]);
  return v;
}

std::vector<int64_t> ProbeRunner::call(const std::vector<LaneProbe>& lanes) {
  std::vector<LaneTerms> t(lanes.size());
  for (size_t l = 0; l < lanes.size(); ++l) {
    if (lanes[l].g >= 0) t[l].terms.push_back({lanes[l].g, s_.M});
    if (lanes[l].j >= 0) t[l].terms.push_back({lanes[l].j, -s_.M});
    for (int64_t k : lanes[l].units) t[l].terms.push_back({k, s_.u0});
    t[l].zero_slot = lanes[l].z;
  }
  const std::vector<double> v = call_terms(t);
  std::vector<int64_t> got(lanes.size(), -1);
  for (size_t l = 0; l < lanes.size(); ++l) {
    const double q = v[l] / s_.u0;
    const double k = std::nearbyint(q);
    if (std::isfinite(q) && std::fabs(q - k) <= 0.25 && k >= 0 && k <= static_cast<double>(lanes[l].units.size()))
      got[l] = static_cast<int64_t>(k);
  }
  return got;
}

DType dtype_of(const Case& c, const std::string& tensor) {
  for (const TensorSpec& t : registry().op(c.op).tensors(c))
    if (t.name == tensor) return t.dtype;
  throw HarnessError("audit: " + c.op + " has no tensor '" + tensor + "'");
}

/// A zero slot for p: the first position outside its units and pair (units sorted).
int64_t zero_slot_of(const LaneProbe& p, int64_t n) {
  for (int64_t z = 0; z < n; ++z)
    if (z != p.g && z != p.j && !std::binary_search(p.units.begin(), p.units.end(), z)) return z;
  return -1;
}

/// The positions other than g and j (ascending) in blocks of at most ctx.block.
std::vector<LaneProbe> blocks_for(const Ctx& ctx, int64_t g, int64_t j) {
  std::vector<LaneProbe> out;
  LaneProbe cur{g, j, {}, -1};
  for (int64_t k = 0; k < ctx.n; ++k) {
    if (k == g || k == j) continue;
    cur.units.push_back(k);
    if (static_cast<int64_t>(cur.units.size()) == ctx.block) out.push_back(cur), cur.units.clear();
  }
  if (!cur.units.empty() || out.empty()) out.push_back(cur);
  if (ctx.zero_slot)
    for (auto& p : out) p.z = zero_slot_of(p, ctx.n);
  return out;
}

/// Runs lane probes packed `lanes` per call in a seeded order; per probe its readout.
std::vector<int64_t> run_packed(Ctx& ctx, const std::vector<LaneProbe>& probes) {
  std::vector<size_t> order(probes.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::shuffle(order.begin(), order.end(), ctx.rng);
  std::vector<int64_t> got(probes.size(), -1);
  if (ctx.pin >= 0) {  // one probe per call, in lane pin (the lanes before it empty)
    std::vector<LaneProbe> call(static_cast<size_t>(ctx.pin) + 1);
    for (size_t i = 0; i < probes.size(); ++i) call.back() = probes[i], got[i] = ctx.run.call(call).back();
    return got;
  }
  const size_t lanes = static_cast<size_t>(std::max<int64_t>(ctx.run.lanes(), 1));
  for (size_t b = 0; b < order.size(); b += lanes) {
    std::vector<LaneProbe> call;
    for (size_t i = b; i < std::min(order.size(), b + lanes); ++i) call.push_back(probes[order[i]]);
    const std::vector<int64_t> r = ctx.run.call(call);
    for (size_t i = 0; i < r.size(); ++i) got[order[b + i]] = r[i];
  }
  return got;
}

/// The oracle: L(g, j) = 2 + sum over blocks of (|K_b| - S_b); -1 where a readout is rejected.
std::vector<int64_t> lca_sizes(Ctx& ctx, const std::vector<LeafPair>& pairs) {
  std::vector<LaneProbe> probes;
  std::vector<size_t> owner;
  for (size_t i = 0; i < pairs.size(); ++i)
    for (auto& p : blocks_for(ctx, pairs[i].first, pairs[i].second)) probes.push_back(std::move(p)), owner.push_back(i);
  const std::vector<int64_t> got = run_packed(ctx, probes);
  std::vector<int64_t> L(pairs.size(), 2);
  for (size_t k = 0; k < probes.size(); ++k) {
    int64_t& l = L[owner[k]];
    if (got[k] < 0 && ctx.rejected.empty())
      ctx.rejected = "readout off the grid for pair (" + std::to_string(probes[k].g) + ", " + std::to_string(probes[k].j) + ")";
    l = got[k] < 0 || l < 0 ? -1 : l + static_cast<int64_t>(probes[k].units.size()) - got[k];
  }
  return L;
}

}  // namespace kv::audit_detail
