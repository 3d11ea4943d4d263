// Progress display (fuzz/progress.hpp).
#include "fuzz/progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>

namespace kv {

int64_t Tally::total() const {
  int64_t n = 0;
  for (auto& [k, v] : verdicts) n += v;
  return n;
}

int64_t Tally::failing() const {
  auto get = [&](const char* k) {
    auto it = verdicts.find(k);
    return it == verdicts.end() ? int64_t(0) : it->second;
  };
  return get("fail") + get("error");
}

Progress::Progress(int64_t planned)
    : planned_(planned), tty_(isatty(2) != 0), start_(Clock::now()), last_(Clock::now()) {}

std::string Progress::line(const Tally& t, const std::string& what) const {
  const double s = std::chrono::duration<double>(Clock::now() - start_).count();
  char buf[256];
  std::string done = std::to_string(t.total());
  if (planned_ >= 0) (done += '/') += std::to_string(planned_);
  std::snprintf(buf, sizeof buf, "fuzz: %s cases, %lld failures, %lld rejected, %.1f cases/s", done.c_str(),
                static_cast<long long>(t.failing()), static_cast<long long>(t.rejected), s > 0 ? t.run / s : 0.0);
  std::string out = buf;
  if (!what.empty()) out += " | " + what;
  return out;
}

void Progress::update(const Tally& t, const std::string& what, bool force) {
  const auto now = Clock::now();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (tty_) {
    if (!force && since < 0.1) return;
    std::fprintf(stderr, "\r\033[K%s", line(t, what).c_str());
  } else {
    // A line every 30 s or every tenth of the plan, whichever comes first.
    const int64_t step = planned_ > 0 ? std::max<int64_t>(planned_ / 10, 1) : INT64_MAX;
    if (!force && since < 30 && t.total() - last_total_ < step) return;
    std::fprintf(stderr, "%s\n", line(t, what).c_str());
    last_total_ = t.total();
  }
  std::fflush(stderr);
  last_ = now;
}

void Progress::clear() {
  if (!tty_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

void Progress::finish(const Tally& t) {
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s\n", line(t, "").c_str());
  } else if (t.total() != last_total_) {
    std::fprintf(stderr, "%s\n", line(t, "").c_str());
  }
  std::fflush(stderr);
}

}  // namespace kv
