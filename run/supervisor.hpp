// The process model: cases run in a worker process; the parent owns the results file.
// A crash, a malformed answer or a watchdog timeout becomes `error` for that case, the
// worker is restarted, and the run goes on.
#pragma once
#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/runner.hpp"
#include "core/child_io.hpp"
#include "core/spawn.hpp"

namespace kv {

class Supervisor {
 public:
  /// worker_args: arguments after the executable (e.g. {"__worker", "--device", "host"}).
  Supervisor(std::vector<std::string> worker_args, double timeout_s);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Runs one normalized case in the worker; throws only Interrupted (a stop signal: the
  /// case is abandoned and the worker killed).
  nlohmann::json run(const Case& c, const RunEnv& env);
  int restarts() const { return restarts_; }
  /// Answers `{"external": req}` lines the worker writes while a case runs (requests to
  /// an external worker the parent owns); the watchdog does not count their time.
  void set_relay(std::function<nlohmann::json(const nlohmann::json&)> f) { relay_ = std::move(f); }
  /// A command the worker runs under (e.g. compute-sanitizer and its options), found on PATH.
  void set_wrapper(std::vector<std::string> w) { wrapper_ = std::move(w); }

 private:
  std::vector<std::string> wrapper_;
  std::function<nlohmann::json(const nlohmann::json&)> relay_;
  std::vector<std::string> args_;
  double timeout_s_;
  PipedChild child_;
  std::string crash_note_;  // what the worker said about its own crash (a guard page hit)
  int restarts_ = 0;
  bool started_once_ = false;

  void start();
  /// Kills (if asked) and reaps the worker; returns how it ended, in words.
  std::string stop(bool kill);
};

/// The worker side: reads case lines on stdin, answers one JSON line each on the
/// original stdout (stdout itself is pointed at stderr so stray prints cannot corrupt
/// the protocol).
/// `setup` runs once the protocol stream exists (it loads plugins and the relay).
int worker_main(const RunEnv& env, const std::function<void(FILE* to_parent)>& setup = {});

}  // namespace kv
