// The determinism audit's plan (run/determinism_plan.hpp).
#include "run/determinism_plan.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace kv {

std::vector<Case> other_configs(const Case& c, const Impl& impl, const DeviceProfile& p, size_t max) {
  const std::vector<ConfigKnob> knobs = impl.knobs();
  // Every combination (odometer over the knobs' values), with its distance from c's config.
  constexpr size_t kMaxCombos = 1 << 16;
  std::vector<std::pair<int, std::map<std::string, std::string>>> combos;
  std::vector<size_t> at(knobs.size(), 0);
  for (bool more = !knobs.empty(); more && combos.size() < kMaxCombos;) {
    std::map<std::string, std::string> cfg = c.config;
    int dist = 0;
    for (size_t i = 0; i < knobs.size(); ++i) {
      if (knobs[i].values.empty()) continue;
      const std::string& v = knobs[i].values[at[i]];
      auto it = c.config.find(knobs[i].name);
      dist += it == c.config.end() || it->second != v;
      cfg[knobs[i].name] = v;
    }
    if (dist > 0) combos.emplace_back(dist, std::move(cfg));
    more = false;
    for (size_t i = knobs.size(); i-- > 0;) {
      if (++at[i] < knobs[i].values.size()) {
        more = true;
        break;
      }
      at[i] = 0;
    }
  }
  std::stable_sort(combos.begin(), combos.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::vector<Case> out;
  for (auto& [dist, cfg] : combos) {
    if (out.size() >= max) break;
    Case v = c;
    v.config = cfg;
    try {
      registry().normalize(v);
    } catch (const UsageError&) {
      continue;
    }
    if (!impl.refusal(v, p)) out.push_back(std::move(v));
  }
  return out;
}

std::vector<CompanionDim> companion_dims(const Case& c, const Impl& impl, const DeviceProfile& p,
                                         const DeterminismLimits& l) {
  const int rank = static_cast<int>(c.shape.size());
  if (rank < 2 || c.shape[0] < 1) return {};
  int64_t rest = 1;  // rows per unit of the first dim
  for (int d = 1; d + 1 < rank; ++d) rest *= std::max<int64_t>(c.shape[static_cast<size_t>(d)], 1);
  const int64_t rows = c.shape[0] * rest, per_d0 = numel(c.shape) / c.shape[0];
  std::vector<std::pair<int64_t, std::string>> want;  // row counts, by priority
  want.emplace_back(rows + 1, "one more row");
  for (const Threshold& t : impl.thresholds(c, p))
    if (t.rows && t.begin == 0)
      for (int64_t v : t.values)
        for (int64_t d : {-1, 0, 1}) want.emplace_back(v + d, "declared: " + t.what);
  if (p.sm_count > 0)
    for (int64_t k : {1, 2})
      for (int64_t d : {-1, 0, 1})
        want.emplace_back(k * p.sm_count + d, (k == 1 ? "" : "2 ") + std::string("sm_count (") +
                                                  std::to_string(p.sm_count) + ")" + (d ? d > 0 ? " + 1" : " - 1" : ""));
  int64_t pow = 1;
  while (pow <= rows) pow *= 2;
  for (int64_t k = 0; k < 2; ++k, pow *= 2)
    for (int64_t d : {-1, 0, 1})
      want.emplace_back(pow + d, "2^" + std::to_string(__builtin_ctzll(static_cast<unsigned long long>(pow))) +
                                     (d ? d > 0 ? " + 1" : " - 1" : ""));
  const int64_t case_elems = numel(c.shape);
  const int64_t per_cap = std::max(l.companion_elements, 2 * case_elems);
  int64_t total = std::max(l.total_elements, 4 * case_elems);
  std::set<int64_t> seen;
  std::vector<CompanionDim> out;
  for (auto& [r, why] : want) {
    if (out.size() >= l.max_companions) break;
    const int64_t d0 = (r + rest - 1) / rest;
    if (r <= rows || d0 <= c.shape[0] || seen.count(d0)) continue;
    const int64_t elems = d0 * per_d0;
    if (elems > per_cap || elems > total) continue;
    seen.insert(d0);
    total -= elems;
    out.push_back({d0, why});
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.d0 < b.d0; });
  return out;
}

std::optional<BitDiff> bit_diff(const StoredTensor& a, const StoredTensor& b) {
  if (a.dtype != b.dtype || a.f64 != b.f64 || a.shape.size() != b.shape.size()) return std::nullopt;
  if (!a.shape.empty() && (a.shape[0] > b.shape[0] || !std::equal(a.shape.begin() + 1, a.shape.end(), b.shape.begin() + 1)))
    return std::nullopt;
  if (a.shape.empty() && a.bytes.size() != b.bytes.size()) return std::nullopt;
  const int64_t n = numel(a.shape);
  if (n == 0) return BitDiff{};
  const size_t w = a.bytes.size() / static_cast<size_t>(n);
  if (w == 0 || b.bytes.size() < a.bytes.size()) return std::nullopt;
  BitDiff d;
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(a.bytes.data() + static_cast<size_t>(i) * w, b.bytes.data() + static_cast<size_t>(i) * w, w) != 0) {
      if (d.first < 0) d.first = i;
      ++d.n_diff;
    }
  return d;
}

}  // namespace kv
