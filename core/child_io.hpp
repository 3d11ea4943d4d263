// Talking to a child process over pipes: the next line of its output within a deadline,
// how it ended in words, and the last line of a text (a log's tail in error messages).
// Shared by kverify's own worker supervisor and the external-worker client.
#pragma once
#include <chrono>
#include <string>

namespace kv {

enum class LineWait { line, timeout, closed, interrupted };

/// SIGINT or SIGTERM asks the run to stop: the handlers only record the signal; loops that
/// wait (next_line, the case loops) look at it and wind down, writing what finished.
void install_stop_handlers();
/// The stop signal received (SIGINT, SIGTERM), or 0.
int stop_signal();
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

}  // namespace kv
