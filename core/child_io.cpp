// Reading lines from a child with a deadline; describing how it ended.
#include "core/child_io.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

}  // namespace kv
