// Reading lines from a child with a deadline; describing how it ended.
#include "core/child_io.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>

#include <algorithm>
#include <cstring>

namespace kv {

namespace {
volatile sig_atomic_t g_stop = 0;
extern "C" void on_stop_signal(int sig) { g_stop = sig; }
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking poll or read returns EINTR and looks again
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int stop_signal() { return g_stop; }

void clear_stop_signal() { g_stop = 0; }

std::string stop_signal_name(int sig) { return sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "signal " + std::to_string(sig); }

LineWait next_line(int fd, std::string& pending, std::chrono::steady_clock::time_point deadline, std::string& line) {
  using Clock = std::chrono::steady_clock;
  char buf[65536];
  while (true) {
    if (stop_signal()) return LineWait::interrupted;
    size_t nl = pending.find('\n');
    if (nl != std::string::npos) {
      line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      return LineWait::line;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return LineWait::timeout;
    pollfd p{fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r <= 0) continue;  // EINTR or the poll slice ended: look at the deadline again
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      pending.append(buf, static_cast<size_t>(n));
      continue;
    }
    return LineWait::closed;
  }
}

std::string exit_status_text(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "exit code " + std::to_string(WEXITSTATUS(status));
  return "unknown status";
}

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  auto nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

void PipedChild::start(SpawnOptions o) {
  stop(0);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]), close(in[1]);
    throw std::runtime_error("pipe failed");
  }
  o.in = in[0], o.out = out[1];
  try {
    s_ = spawn_child(o);
  } catch (...) {
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    throw;
  }
  close(in[0]);
  close(out[1]);
  to_ = in[1], from_ = out[0];
  pending_.clear();
}

bool PipedChild::write(const std::string& text) {
  size_t done = 0;
  while (to_ >= 0 && done < text.size()) {
    const ssize_t n = ::write(to_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return to_ >= 0;
}

LineWait PipedChild::read_line(std::chrono::steady_clock::time_point deadline, std::string& line) {
  if (from_ < 0) return LineWait::closed;
  return next_line(from_, pending_, deadline, line);
}

void PipedChild::close_pipes() {
  if (to_ >= 0) close(to_);
  if (from_ >= 0) close(from_);
  to_ = -1, from_ = -1;
}

std::string PipedChild::stop(double grace_s) {
  if (s_.pid <= 0) return "not running";
  if (to_ >= 0) close(to_);  // end of input: a well-behaved child exits
  to_ = -1;
  int status = 0;
  pid_t r = 0;
  if (grace_s < 0) {
    r = waitpid(s_.pid, &status, 0);
  } else {
    for (int i = 0; i < static_cast<int>(grace_s * 10) && (r = waitpid(s_.pid, &status, WNOHANG)) == 0; ++i)
      usleep(100000);
  }
  if (r != s_.pid) {
    if (s_.guard > 0) end_group(s_);  // the child with everything it started
    else kill(s_.pid, SIGKILL);
    waitpid(s_.pid, &status, 0);
  }
  end_group(s_);  // stragglers of its group
  close_pipes();
  s_ = Spawned{};
  return exit_status_text(status);
}

bool PipedChild::reap_if_exited() {
  int status = 0;
  if (s_.pid <= 0 || waitpid(s_.pid, &status, WNOHANG) != s_.pid) return false;
  end_group(s_);
  close_pipes();
  s_ = Spawned{};
  return true;
}

}  // namespace kv
