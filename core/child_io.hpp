// Talking to a child process over pipes: the next line of its output within a deadline,
// how it ended in words, and the last line of a text (a log's tail in error messages).
// Shared by kverify's own worker supervisor, the plugin probes and the external-worker
// client.
#pragma once
#include <chrono>
#include <string>

#include "core/spawn.hpp"

namespace kv {

enum class LineWait { line, timeout, closed, interrupted };

/// SIGINT or SIGTERM asks the run to stop: the handlers only record the signal; loops that
/// wait (next_line, the case loops) look at it and wind down, writing what finished.
void install_stop_handlers();
/// The stop signal received (SIGINT, SIGTERM), or 0.
int stop_signal();
/// Forgets a recorded stop signal (a library caller's next campaign starts afresh).
void clear_stop_signal();
/// Thrown where a stop request abandons the case in flight; caught where the finished
/// results are summarized. Exit code 128 + signal (130 for SIGINT, 143 for SIGTERM).
struct Interrupted {
  int signal;
  int exit_code() const { return 128 + signal; }
};
/// "interrupted by SIGINT" / "SIGTERM".
std::string stop_signal_name(int sig);

/// Now plus `seconds`, for next_line's deadline.
inline std::chrono::steady_clock::time_point deadline_after(double seconds) {
  using Clock = std::chrono::steady_clock;
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

/// The next '\n'-terminated line from fd into `line` (without the newline). Bytes read
/// past it stay in `pending` for the next call. Waits until `deadline` (timeout), the
/// writer closes the pipe (closed) or a stop signal arrives (interrupted).
LineWait next_line(int fd, std::string& pending, std::chrono::steady_clock::time_point deadline, std::string& line);

/// A waitpid status in words: "exit code N", "signal N (Name)".
std::string exit_status_text(int status);

/// The last non-empty line of a text, trailing newlines and spaces dropped.
std::string last_line(const std::string& text);

/// A child whose stdin and stdout are pipes to this process (core/spawn.hpp ties its life
/// to kverify's). Killed and reaped when destroyed.
class PipedChild {
 public:
  PipedChild() = default;
  ~PipedChild() { stop(0); }
  PipedChild(const PipedChild&) = delete;
  PipedChild& operator=(const PipedChild&) = delete;

  /// Starts o.argv (o.in and o.out are the pipes); throws std::runtime_error.
  void start(SpawnOptions o);
  bool running() const { return s_.pid > 0; }
  /// Writes all of text; false when the child cannot take it (it has gone).
  bool write(const std::string& text);
  /// The next line of its stdout (next_line on the pipe).
  LineWait read_line(std::chrono::steady_clock::time_point deadline, std::string& line);
  /// Closes its stdin, gives it grace_s seconds to exit (forever when negative, none when
  /// 0), kills it (its whole group when it has one) and reaps it: how it ended, in words.
  std::string stop(double grace_s);
  /// Reaps it (and ends its group) if it has exited on its own; true then.
  bool reap_if_exited();

 private:
  Spawned s_;
  int to_ = -1, from_ = -1;
  std::string pending_;
  void close_pipes();
};

}  // namespace kv
