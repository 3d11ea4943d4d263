// Progress lines inside a long case (run/progress.hpp): one ticker thread per process,
// started by the first case on a terminal.
#include "run/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace kv {

namespace {

using Clock = std::chrono::steady_clock;

struct Ticker {
  std::mutex m;
  std::condition_variable cv;
  bool running = false, shown = false;
  std::string what;
  const char* phase = "";
  Clock::time_point start;

  static bool enabled() {
    static const bool on = isatty(STDERR_FILENO) && !(std::getenv("KV_PROGRESS") && std::string(std::getenv("KV_PROGRESS")) == "0");
    return on;
  }
  static Ticker& get() {
    static Ticker* t = [] {
      auto* x = new Ticker;  // never destroyed: the thread outlives static destruction
      std::thread([x] { x->loop(); }).detach();
      return x;
    }();
    return *t;
  }
  void loop() {
    std::unique_lock<std::mutex> l(m);
    for (;;) {
      cv.wait_for(l, std::chrono::seconds(1));
      if (!running) continue;
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      if (s < 2) continue;
      std::fprintf(stderr, "\r\033[K  %s: %s, %.0f s", what.c_str(), phase, s);
      std::fflush(stderr);
      shown = true;
    }
  }
};

}  // namespace

CaseProgress::CaseProgress(std::string what) {
  if (!Ticker::enabled()) return;
  Ticker& t = Ticker::get();
  std::lock_guard<std::mutex> l(t.m);
  t.running = true, t.shown = false, t.what = std::move(what), t.phase = "starting", t.start = Clock::now();
}

CaseProgress::~CaseProgress() {
  if (!Ticker::enabled()) return;
  Ticker& t = Ticker::get();
  std::lock_guard<std::mutex> l(t.m);
  t.running = false;
  if (t.shown) std::fprintf(stderr, "\r\033[K"), std::fflush(stderr);
  t.shown = false;
}

void CaseProgress::phase(const char* name) {
  if (!Ticker::enabled()) return;
  Ticker& t = Ticker::get();
  std::lock_guard<std::mutex> l(t.m);
  t.phase = name;
}

}  // namespace kv
