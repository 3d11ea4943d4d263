// Sizes where bugs hide (issue 18): the dispatch thresholds an impl declares
// (Impl::thresholds) and multiples of the device profile's SM count on the rows. The fuzz
// generator moves drawn shapes to them and beside them; a batch-invariance companion can
// take its row count from them, so a case and its companion straddle one.
#pragma once
#include <rapidcheck.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "core/case.hpp"
#include "core/device.hpp"
#include "core/registry.hpp"

namespace kv {

/// Multiples k * sm_count (k = 1..kSmMultiples) of the rows: per-SM partials with one row
/// each, a full wave of one-row blocks, the next wave's first row.
inline constexpr int64_t kSmMultiples = 4;

/// The targets of a normalized case: its impl's thresholds, then k * sm_count on its rows
/// (the dims of the first threshold that names the rows; every dim but the last where none
/// does). Ranges outside the case's rank and values below 1 are dropped.
std::vector<Threshold> size_targets(const Case& c, const DeviceProfile& p);

/// Moves c's shape to a target or beside it (t - 1, t, t + 1; t - 2, t, t + 2 on a dim that
/// only takes even sizes): the product of the target's dims becomes that size (the last of
/// them takes it, the others 1) and the other dims shrink until the shape is under `cap`.
/// c must normalize (its thresholds are read from its normalized form); `even` says which
/// dims are even-only. Draws from r only; false (c unchanged) where no target fits.
bool move_to_target(Case& c, rc::Random& r, int64_t cap, const std::vector<bool>& even, const DeviceProfile& p,
                    int avoid_begin = 0, int avoid_end = 0, std::pair<int, int>* moved = nullptr);

/// A first dim for a batch-invariance companion of c that puts its rows past the nearest
/// rows target above c's (rows: the product of the target's dims, which must start at dim
/// 0): c runs below or at the threshold, the companion above it. None where no such target
/// exists within `cap` elements.
std::optional<int64_t> straddling_first_dim(const Case& c, const DeviceProfile& p, int64_t cap);

}  // namespace kv
