// The campaign's one-line progress display on stderr: redrawn in place on a terminal,
// an occasional plain line otherwise (logs, CI).
#pragma once
#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace kv {

struct Tally {
  std::map<std::string, int64_t> verdicts;  // pass, fail, error, unverifiable, skip
  int64_t run = 0;                          // cases run by this process
  int64_t rejected = 0;                     // refused by normalize or the device: never launched
  int64_t curated = 0;                      // curated cases among the verdicts
  int64_t shrink_runs = 0;
  int64_t failures = 0;                     // failures shrunk
  int64_t total() const;
  int64_t failing() const;
};

class Progress {
 public:
  /// planned: the cases the campaign means to run (-1: bounded by time only).
  explicit Progress(int64_t planned);
  void set_planned(int64_t planned) { planned_ = planned; }
  /// Redraws when due (force: now). `what` says what is going on (e.g. "shrinking #12").
  void update(const Tally& t, const std::string& what = "", bool force = false);
  /// Erases the in-place line so other output starts on a clean line (terminals only).
  void clear();
  /// Ends the in-place line.
  void finish(const Tally& t);

 private:
  using Clock = std::chrono::steady_clock;
  std::string line(const Tally& t, const std::string& what) const;
  int64_t planned_;
  bool tty_;
  Clock::time_point start_, last_;
  int64_t last_total_ = 0;
};

}  // namespace kv
