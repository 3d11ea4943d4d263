// Worker processes: spawn, talk over pipes, watchdog, restart.
#include "cli/supervisor.hpp"

#include "core/child_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <iostream>

namespace kv {

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "kverify";
  buf[n] = 0;
  return buf;
}

Supervisor::Supervisor(std::vector<std::string> worker_args, double timeout_s)
    : args_(std::move(worker_args)), timeout_s_(timeout_s) {
  signal(SIGPIPE, SIG_IGN);
}

Supervisor::~Supervisor() {
  if (pid_ > 0) stop(false);
}

void Supervisor::start() {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  std::string exe = self_exe();
  std::vector<std::string> argv_s = wrapper_;
  argv_s.push_back(exe);
  argv_s.insert(argv_s.end(), args_.begin(), args_.end());
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    if (wrapper_.empty()) execv(exe.c_str(), argv.data());
    else execvp(argv[0], argv.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  pid_ = pid;
  to_child_ = in[1];
  from_child_ = out[0];
  pending_.clear();
  if (started_once_) ++restarts_;
  started_once_ = true;
}

std::string Supervisor::stop(bool kill_it) {
  if (pid_ <= 0) return "not running";
  if (to_child_ >= 0) close(to_child_);
  if (kill_it) kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  if (from_child_ >= 0) close(from_child_);
  pid_ = -1, to_child_ = -1, from_child_ = -1;
  return exit_status_text(status);
}

nlohmann::json Supervisor::run(const Case& c, const RunEnv& env) {
  try {
    if (pid_ <= 0) start();
  } catch (const std::exception& e) {
    return error_result(c, env, std::string("cannot start worker: ") + e.what());
  }
  std::string line = c.str() + "\n";
  if (write(to_child_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    std::string how = stop(true);
    return error_result(c, env, "worker died before the case was sent (" + how + "); restarted");
  }
  using Clock = std::chrono::steady_clock;
  auto deadline = deadline_after(timeout_s_);
  std::string answer;
  while (true) {
    const LineWait got = next_line(from_child_, pending_, deadline, answer);
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
      std::string back = a.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      if (write(to_child_, back.data(), back.size()) != static_cast<ssize_t>(back.size())) {
        std::string how = stop(true);
        return error_result(c, env, "worker died during the case (" + how + "); restarted");
      }
      deadline += Clock::now() - t0;
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
  return error_result(c, env, "worker crashed (" + how + "); restarted");
}

int worker_main(const RunEnv& env, const std::function<void(FILE*)>& setup) {
  int proto = dup(1);
  dup2(2, 1);
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
