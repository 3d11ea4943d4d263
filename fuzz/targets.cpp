// Threshold targets of the fuzz generator (fuzz/targets.hpp).
#include "fuzz/targets.hpp"

#include <algorithm>
#include <limits>

#include "core/error.hpp"

namespace kv {

namespace {

uint64_t pick(rc::Random& r, uint64_t n) { return n == 0 ? 0 : r.next() % n; }

/// The product of the dims, saturating (a moved dim and the others' old sizes may exceed
/// int64 together before the others shrink).
int64_t product(const std::vector<int64_t>& shape, int begin = 0, int end = -1) {
  if (end < 0) end = static_cast<int>(shape.size());
  int64_t n = 1;
  for (int i = begin; i < end; ++i) {
    const int64_t d = std::max<int64_t>(shape[static_cast<size_t>(i)], 1);
    if (n > std::numeric_limits<int64_t>::max() / d) return std::numeric_limits<int64_t>::max();
    n *= d;
  }
  return n;
}

bool normalizes(const Case& c) {
  Case n = c;
  try {
    registry().normalize(n);
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

}  // namespace

std::vector<Threshold> size_targets(const Case& c, const DeviceProfile& p) {
  const int rank = static_cast<int>(c.shape.size());
  std::vector<Threshold> out;
  int rows_begin = 0, rows_end = rank - 1;  // a row op's rows unless the impl names them
  bool named = false;
  for (Threshold t : registry().impl(c.op, c.impl).thresholds(c, p)) {
    if (t.begin < 0 || t.end > rank || t.begin >= t.end) continue;
    t.values.erase(std::remove_if(t.values.begin(), t.values.end(), [](int64_t v) { return v < 1; }), t.values.end());
    if (t.values.empty()) continue;
    if (t.rows && !named) rows_begin = t.begin, rows_end = t.end, named = true;
    out.push_back(std::move(t));
  }
  if (rows_begin < rows_end && p.sm_count > 0) {
    Threshold s{rows_begin, rows_end, {}, "k * sm_count rows (sm_count " + std::to_string(p.sm_count) + ")", true};
    for (int64_t k = 1; k <= kSmMultiples; ++k) s.values.push_back(k * p.sm_count);
    out.push_back(std::move(s));
  }
  return out;
}

bool move_to_target(Case& c, rc::Random& r, int64_t cap, const std::vector<bool>& even, const DeviceProfile& p,
                    int avoid_begin, int avoid_end, std::pair<int, int>* moved) {
  Case n = c;
  std::vector<Threshold> targets;
  try {
    registry().normalize(n);
    targets = size_targets(n, p);
  } catch (const UsageError&) {
    return false;  // an invalid draw: the op refuses it whatever its size
  }
  // A threshold first (each equally likely, so a long list of one kind does not crowd out
  // the others), then one of its values that fits under the cap with its neighbours.
  std::vector<const Threshold*> fit;
  for (auto& t : targets) {
    if (t.begin < avoid_end && avoid_begin < t.end) continue;
    if (std::any_of(t.values.begin(), t.values.end(), [&](int64_t v) { return v + 2 <= cap; })) fit.push_back(&t);
  }
  if (fit.empty()) return false;
  const Threshold& t = *fit[pick(r, fit.size())];
  std::vector<int64_t> values;
  for (int64_t v : t.values)
    if (v + 2 <= cap) values.push_back(v);
  int64_t v = values[pick(r, values.size())];
  // The dim that takes the size: the last of the range that takes any size; on an even-only
  // dim the neighbours of an even size are two away.
  int d = t.end - 1;
  while (d > t.begin && even[static_cast<size_t>(d)]) --d;
  const bool ev = even[static_cast<size_t>(d)];
  const int64_t step = ev ? 2 : 1;
  if (ev) v += v & 1;
  const int64_t size = std::max<int64_t>(step, v + step * (static_cast<int64_t>(pick(r, 3)) - 1));
  std::vector<int64_t> shape = c.shape;
  for (int i = t.begin; i < t.end; ++i) shape[static_cast<size_t>(i)] = i == d ? size : even[static_cast<size_t>(i)] ? 2 : 1;
  // Under the cap: the largest other dim shrinks (dims of an earlier move are kept).
  for (int64_t total = product(shape); total > cap; total = product(shape)) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
      if ((i >= t.begin && i < t.end) || (i >= avoid_begin && i < avoid_end)) continue;
      const int64_t lo = even[static_cast<size_t>(i)] ? 2 : 1;
      if (shape[static_cast<size_t>(i)] > lo && (best < 0 || shape[static_cast<size_t>(i)] > shape[static_cast<size_t>(best)]))
        best = i;
    }
    if (best < 0) return false;
    int64_t& s = shape[static_cast<size_t>(best)];
    const int64_t over = (total - 1) / cap + 1;  // ceil(total / cap)
    s = std::max<int64_t>(s / over, 1);
    if (even[static_cast<size_t>(best)]) s = std::max<int64_t>(s & ~int64_t(1), 2);
  }
  Case m = c;
  m.shape = std::move(shape);
  // A size some attribute drawn for the old shape no longer fits (a 3D grid, an mrope
  // section) keeps the old shape.
  if (!normalizes(m)) return false;
  c = std::move(m);
  if (moved) *moved = {t.begin, t.end};
  return true;
}

std::optional<int64_t> straddling_first_dim(const Case& c, const DeviceProfile& p, int64_t cap) {
  const int rank = static_cast<int>(c.shape.size());
  if (rank < 2 || c.shape[0] < 1) return std::nullopt;
  std::optional<int64_t> best_t, best_d0;
  for (auto& t : size_targets(c, p)) {
    if (t.begin != 0 || t.end >= rank) continue;  // rows that start at the first dim, not the row
    const int64_t rest = product(c.shape, 1, t.end), outer = product(c.shape, t.end);
    const int64_t rows = product(c.shape, 0, t.end);
    for (int64_t v : t.values) {
      if (v < rows || (best_t && v >= *best_t)) continue;
      const int64_t d0 = v / rest + 1;  // d0 * rest > v >= rows
      if (product({d0, rest, outer}) > cap) continue;
      best_t = v, best_d0 = d0;
    }
  }
  return best_d0;
}

}  // namespace kv
