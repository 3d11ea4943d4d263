// Talking to a child process over pipes: the next line of its output within a deadline,
// how it ended in words, and the last line of a text (a log's tail in error messages).
// Shared by kverify's own worker supervisor and the external-worker client.
#pragma once
#include <chrono>
#include <string>

namespace kv {

enum class LineWait { line, timeout, closed };

/// Now plus `seconds`, for next_line's deadline.
inline std::chrono::steady_clock::time_point deadline_after(double seconds) {
  using Clock = std::chrono::steady_clock;
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

/// The next '\n'-terminated line from fd into `line` (without the newline). Bytes read
/// past it stay in `pending` for the next call. Waits until `deadline` (timeout) or the
/// writer closes the pipe (closed).
LineWait next_line(int fd, std::string& pending, std::chrono::steady_clock::time_point deadline, std::string& line);

/// A waitpid status in words: "exit code N", "signal N (Name)".
std::string exit_status_text(int status);

/// The last non-empty line of a text, trailing newlines and spaces dropped.
std::string last_line(const std::string& text);

}  // namespace kv
