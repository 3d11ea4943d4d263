// Progress inside a long case ([report]): on a terminal, a case that runs longer than 2 s
// gets one line on stderr naming its phase (inputs, reference, kernel, judge) and the
// elapsed time, redrawn every second and erased when the case ends. Where stderr is no
// terminal (logs, CI) or KV_PROGRESS=0, nothing is written.
#pragma once
#include <string>

namespace kv {

class CaseProgress {
 public:
  explicit CaseProgress(std::string what);  // the case starts (what: op and shape)
  ~CaseProgress();                          // the case ends: the line is erased
  CaseProgress(const CaseProgress&) = delete;
  CaseProgress& operator=(const CaseProgress&) = delete;
  void phase(const char* name);  // a string literal
};

}  // namespace kv
