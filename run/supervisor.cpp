// Worker processes: spawn, talk over pipes, watchdog, restart.
#include "run/supervisor.hpp"

#include "core/guard_pages.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

namespace kv {

Supervisor::Supervisor(std::vector<std::string> worker_args, double timeout_s)
    : args_(std::move(worker_args)), timeout_s_(timeout_s) {
  signal(SIGPIPE, SIG_IGN);
}

Supervisor::~Supervisor() { stop(false); }

void Supervisor::start() {
  SpawnOptions o;
  o.argv = wrapper_;
  o.argv.push_back(self_exe());
  o.argv.insert(o.argv.end(), args_.begin(), args_.end());
  // A wrapper (compute-sanitizer) starts the worker as its own child: the whole group
  // must go when kverify does.
  o.own_group = !wrapper_.empty();
  child_.start(o);
  crash_note_.clear();
  if (started_once_) ++restarts_;
  started_once_ = true;
}

std::string Supervisor::stop(bool kill_it) { return child_.stop(kill_it ? 0 : -1); }

nlohmann::json Supervisor::run(const Case& c, const RunEnv& env) {
  try {
    if (!child_.running()) start();
  } catch (const std::exception& e) {
    return error_result(c, env, std::string("cannot start worker: ") + e.what());
  }
  if (!child_.write(c.str() + "\n")) {
    std::string how = stop(true);
    return error_result(c, env, "worker died before the case was sent (" + how + "); restarted");
  }
  using Clock = std::chrono::steady_clock;
  auto deadline = deadline_after(timeout_s_);
  std::string answer;
  while (true) {
    const LineWait got = child_.read_line(deadline, answer);
    if (got == LineWait::interrupted || (got == LineWait::closed && stop_signal())) {
      stop(true);  // a stop request abandons the case in flight (a worker the signal reached too is not a crash)
      throw Interrupted{stop_signal()};
    }
    if (got == LineWait::timeout) {
      stop(true);
      return error_result(c, env, "watchdog: no answer within " + std::to_string(timeout_s_) +
                                      " s; worker killed and restarted");
    }
    if (got == LineWait::closed) break;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(answer);
    } catch (const std::exception&) {
      j = nullptr;
    }
    if (j.is_object() && j.contains("external")) {  // the case asks the external worker
      auto t0 = Clock::now();
      nlohmann::json a;
      try {
        a = relay_ ? relay_(j["external"]) : nlohmann::json{{"external_error", "this run has no worker"}};
      } catch (const Interrupted&) {
        stop(true);
        throw;
      }
      if (!child_.write(a.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n")) {
        std::string how = stop(true);
        return error_result(c, env, "worker died during the case (" + how + "); restarted");
      }
      deadline += Clock::now() - t0;
      continue;
    }
    if (j.is_object() && j.contains("crash")) {  // its last words (core/guard_fault.hpp), the exit follows
      crash_note_ = j["crash"].is_string() ? j["crash"].get<std::string>() : j["crash"].dump();
      continue;
    }
    try {
      if (!j.is_object() || !j.contains("verdict")) throw std::runtime_error("no verdict");
      if (j.value("worker_exit", false)) stop(false);  // it exits after a sticky error
      return j;
    } catch (const std::exception&) {
      stop(true);
      return error_result(c, env, "worker answered malformed JSON (" + answer.substr(0, 80) + "); restarted");
    }
  }
  std::string how = stop(false);
  return error_result(c, env, "worker crashed (" + how + (crash_note_.empty() ? "" : ": " + crash_note_) + "); restarted");
}

int worker_main(const RunEnv& env, const std::function<void(FILE*)>& setup) {
  int proto = dup(1);
  dup2(2, 1);
  // An impl that writes into a buffer's guard page dies here; the parent learns which
  // buffer from this line before it sees the crash.
  install_guard_fault_report(proto);
  FILE* out = fdopen(proto, "w");
  if (setup) setup(out);
  RefCache cache;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    auto j = run_case(line, env, cache);
    std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(s.data(), 1, s.size(), out);
    std::fflush(out);
    if (j.value("worker_exit", false)) return 3;  // sticky device error: start afresh
  }
  return 0;
}

}  // namespace kv
