// The client side of the worker protocol (examples/worker/PROTOCOL.md): starts the
// external worker, says hello, sends one request at a time under a watchdog, and turns a
// worker that exits, hangs or answers malformed JSON into an ExternalError after killing
// it; the next request starts it again.
#pragma once
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "core/child_io.hpp"

namespace kv {

inline constexpr int kWorkerProtocol = 1;

/// A request the external impl could not serve (the case becomes `error` with this reason).
struct ExternalError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class WorkerClient {
 public:
  /// cmd runs under /bin/sh -c; its stderr is appended to log_path.
  WorkerClient(std::string cmd, std::string io_dir, std::string log_path, double timeout_s, nlohmann::json device);
  ~WorkerClient();
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  /// Starts the worker if it is not running and returns its hello's impls. Throws
  /// ExternalError (wrong protocol, no answer, malformed hello).
  const nlohmann::json& hello();
  /// Sends one request (an id is added) and returns the answer of the matching type.
  nlohmann::json request(nlohmann::json req);
  int restarts() const { return restarts_; }
  const std::string& io_dir() const { return io_dir_; }

 private:
  std::string cmd_, io_dir_, log_path_;
  double timeout_s_;
  nlohmann::json device_;
  nlohmann::json impls_;  // from the first hello; a restart must offer the same
  bool have_impls_ = false;
  PipedChild child_;
  int64_t next_id_ = 1;
  int restarts_ = 0;
  bool started_once_ = false;

  void start();
  /// Kills the worker's process group (or lets it exit) and says how it ended.
  std::string stop(bool kill);
  /// One answer line within the watchdog, parsed; kills the worker and throws otherwise.
  nlohmann::json exchange(const nlohmann::json& msg, const std::string& what);
  [[noreturn]] void fail(const std::string& why, bool kill);
  void reap_if_exited();
  std::string log_tail() const;
};

}  // namespace kv
