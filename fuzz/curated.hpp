// The curated tier: worst cases, each with a note on where it came from, replayed at the
// start of every campaign (fuzz/curated.json, embedded in the binary).
#pragma once
#include <string>
#include <vector>

#include "core/case.hpp"

namespace kv {

struct CuratedCase {
  Case c;  // without impl: the campaign runs it for each impl of the op it fuzzes
  std::string note;
};

/// "builtin" (fuzz/curated.json as built in), "none", or a file of the same form;
/// throws UsageError naming the file and the entry that is malformed.
std::vector<CuratedCase> load_curated(const std::string& which);
/// The same from a file's text; `where` names it in errors.
std::vector<CuratedCase> parse_curated(const std::string& text, const std::string& where);

}  // namespace kv
