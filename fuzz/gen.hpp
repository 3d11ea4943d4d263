// RapidCheck generators of kverify cases for any (op, impl) of the registry, and the
// shrinking that takes a failing case toward smaller shapes, default dtypes, configs and
// attributes and the normal distribution.
#pragma once
#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <vector>

#include "core/case.hpp"
#include "core/device.hpp"
#include "fuzz/space.hpp"

namespace kv {

struct GenLimits {
  /// Cap on the product of the shape's dims (the elements of the main tensor; for FLCE,
  /// BT*H*V, the work of its product). The seed shapes need about 5e7.
  int64_t max_elements = int64_t(1) << 20;
  /// The profile whose thresholds shapes aim at (Impl::thresholds, k * sm_count rows): the
  /// campaign's, kept in its campaign.json so a resume draws the same cases.
  DeviceProfile profile = host_profile();
  /// false: shapes stay as drawn (the same random draws otherwise, for comparisons).
  bool aim = true;
};

/// The sizes shapes are drawn from besides random ones: warp and block edges, powers of
/// two +-1, primes, odd sizes (113, 239, 799) and sizes of real models, ascending.
const std::vector<int64_t>& special_sizes();

/// Draws one case of the space (RapidCheck's size, 0..100, scales the shape; in about two
/// draws in five one or two of its dim ranges moved to a threshold of the impl or a
/// multiple of the SM count, or beside it (fuzz/targets.hpp); now and then in-place
/// outputs and offset or padded layouts) without normalizing it: the op may still refuse
/// the combination. Dtypes, attribute values and layouts stay inside what the impl
/// declares it accepts (CaseSpace); an impl may still decline a case for other reasons.
Case draw_case(const CaseSpace& s, rc::Random r, int size, const GenLimits& lim);

/// Candidates as a campaign runs them: normalized with their shrinks when the op accepts
/// the draw; otherwise the draw as it is, unnormalized and without shrinks (a campaign
/// counts it as rejected, never launched).
rc::Gen<Case> candidate_gen(const CaseSpace& s, const GenLimits& lim = {});

/// Only normalized cases: a draw the op refuses is drawn again.
rc::Gen<Case> case_gen(const CaseSpace& s, const GenLimits& lim = {});

/// One-step simplifications of a normalized case, each normalized and different from it:
/// each dim toward 1 (RapidCheck's integral shrink: 1 first, then ever closer), then the
/// dtypes (no per-tensor mix, then fp32), each knob and attribute set to its default, the
/// distribution set to normal, layouts and aliases dropped. Each step makes the shape
/// smaller, or keeps it and makes nondefault_count() smaller.
rc::Seq<Case> shrink_case(const Case& c);

/// c with its shrinks, recursively (a RapidCheck Shrinkable).
rc::Shrinkable<Case> shrinkable_case(const Case& c);

/// How RapidCheck shows a case: its replay string.
inline void showValue(const Case& c, std::ostream& os) { os << c.str(); }

/// The product of the dims.
int64_t shape_elements(const std::vector<int64_t>& shape);

}  // namespace kv
