// Batch invariance (DESIGN.md: the same row gives the same bits at any batch size): a
// case and its companion with more rows along the first dimension. Inputs are drawn per
// coordinate, so the companion's first rows hold the case's inputs; an output whose impl
// claims batch_invariant must then repeat its bits in those rows.
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/case.hpp"
#include "core/safetensors.hpp"

namespace kv {

struct GenLimits;  // fuzz/gen.hpp

/// The companion of c (normalized): its first dimension grown by extra_rows where given;
/// else, with `aim`, past the nearest rows threshold above c's rows that c's impl declares
/// under aim's profile, within aim's max_elements (fuzz/targets.hpp), so that the pair
/// straddles a dispatch threshold; else by 1 + c.shape[0] % 3, so that row counts of every
/// parity meet. None where the check does not apply: no output claims batch_invariant in
/// `result`'s contract, the case has layouts or aliases, or the companion is not a valid case.
std::optional<Case> batch_companion(const Case& c, const nlohmann::json& result, int64_t extra_rows = 0,
                                    const GenLimits* aim = nullptr);

/// Compares the claimed outputs of the case (`small`) with the first rows of the
/// companion's (`big`): {"companion", "outputs": {name: {"n_diff", "max_ulps"}},
/// "violations": [...]}.
nlohmann::json compare_batch(const Case& companion, const nlohmann::json& result,
                             const std::map<std::string, StoredTensor>& small,
                             const std::map<std::string, StoredTensor>& big);

/// The replay flags that rerun a case beside its companion (`kverify replay --batch-extra-rows`).
std::string batch_replay_flags(int64_t extra_rows);

/// Adds compare_batch's `check` (with "extra_rows") to a result line; where it has violations the
/// line becomes a fail with them as its reason and its replay line reruns the pair. True then.
bool apply_batch_check(nlohmann::json& result, const nlohmann::json& check);

}  // namespace kv
