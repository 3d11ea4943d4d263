// Talking to an external worker over pipes, with a watchdog and restarts.
#include "ext/worker_client.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "core/child_io.hpp"
#include "kv_build_info.hpp"

namespace kv {

WorkerClient::WorkerClient(std::string cmd, std::string io_dir, std::string log_path, double timeout_s,
                           nlohmann::json device)
    : cmd_(std::move(cmd)), io_dir_(std::move(io_dir)), log_path_(std::move(log_path)), timeout_s_(timeout_s),
      device_(std::move(device)) {
  signal(SIGPIPE, SIG_IGN);
}

WorkerClient::~WorkerClient() {
  if (pid_ > 0) stop(false);
}

void WorkerClient::start() {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) throw ExternalError("worker: pipe failed");
  int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t pid = fork();
  if (pid < 0) throw ExternalError("worker: fork failed");
  if (pid == 0) {
    setpgid(0, 0);  // its own group: a kill reaches the shell and everything it started
    dup2(in[0], 0);
    dup2(out[1], 1);
    if (log >= 0) dup2(log, 2);
    setenv("KVERIFY_IO_DIR", io_dir_.c_str(), 1);
    execl("/bin/sh", "sh", "-c", cmd_.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  close(in[0]);
  close(out[1]);
  if (log >= 0) close(log);
  pid_ = pid;
  to_ = in[1];
  from_ = out[0];
  pending_.clear();
  if (started_once_) ++restarts_;
  started_once_ = true;
}

std::string WorkerClient::stop(bool kill_it) {
  if (pid_ <= 0) return "not running";
  if (to_ >= 0) close(to_);
  to_ = -1;
  int status = 0;
  pid_t r = 0;
  if (!kill_it)  // stdin closed: give it 5 s to exit on its own
    for (int i = 0; i < 50 && (r = waitpid(pid_, &status, WNOHANG)) == 0; ++i) usleep(100000);
  kill(-pid_, SIGKILL);  // the worker if it is still there, and stragglers of its group
  if (r == 0) waitpid(pid_, &status, 0);
  if (from_ >= 0) close(from_);
  pid_ = -1, from_ = -1;
  return exit_status_text(status);
}

std::string WorkerClient::log_tail() const {
  std::ifstream f(log_path_, std::ios::ate);
  if (!f) return "";
  auto size = static_cast<int64_t>(f.tellg());
  f.seekg(std::max<int64_t>(0, size - 400));
  std::string last = last_line(std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()));
  return last.empty() ? "" : "; last stderr line: " + last;
}

void WorkerClient::fail(const std::string& why, bool kill_it) {
  std::string how = stop(kill_it);
  throw ExternalError("worker " + why + " (" + how + "); restarted for the next case" + log_tail() + " [log: " + log_path_ + "]");
}

nlohmann::json WorkerClient::exchange(const nlohmann::json& msg, const std::string& what) {
  std::string line = msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (write(to_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) fail("died before the " + what + " was sent", true);
  const auto deadline = deadline_after(timeout_s_);
  std::string answer;
  switch (next_line(from_, pending_, deadline, answer)) {
    case LineWait::timeout: {
      std::ostringstream t;
      t << timeout_s_;
      fail("watchdog: no answer to the " + what + " within " + t.str() + " s; killed", true);
    }
    case LineWait::closed:
      fail("exited during the " + what, false);
    case LineWait::interrupted:
      stop(true);  // the run stops: the request in flight is abandoned
      throw Interrupted{stop_signal()};
    case LineWait::line:
      break;
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(answer);
  } catch (const std::exception&) {
    fail("answered malformed JSON to the " + what + ": '" + answer.substr(0, 80) + "'", true);
  }
  if (!j.is_object()) fail("answered a JSON value that is not an object to the " + what, true);
  return j;
}

const nlohmann::json& WorkerClient::hello() {
  if (pid_ > 0) return impls_;
  start();
  nlohmann::json h = {{"type", "hello"},
                      {"protocol", kWorkerProtocol},
                      {"io_dir", io_dir_},
                      {"device", device_},
                      {"kverify", {{"commit", KV_GIT_COMMIT}}}};
  nlohmann::json a = exchange(h, "hello");
  if (a.value("type", "") == "error") {
    std::string why = a.contains("error") ? a["error"].dump() : "no reason";
    stop(true);
    throw ExternalError("worker refused the hello (kverify speaks protocol " + std::to_string(kWorkerProtocol) + "): " + why);
  }
  if (a.value("type", "") != "hello" || !a.contains("protocol"))
    fail("answered the hello without a hello", true);
  if (!a["protocol"].is_number_integer() || a["protocol"].get<int>() != kWorkerProtocol) {
    stop(true);
    throw ExternalError("worker speaks protocol " + a["protocol"].dump() + ", kverify speaks protocol " +
                        std::to_string(kWorkerProtocol));
  }
  if (!a.contains("impls") || !a["impls"].is_array()) fail("hello lists no impls", true);
  if (have_impls_ && a["impls"] != impls_) {
    stop(true);
    throw ExternalError("worker offered other impls after a restart than at the start of the run");
  }
  impls_ = a["impls"];
  have_impls_ = true;
  return impls_;
}

void WorkerClient::reap_if_exited() {
  int status = 0;
  if (pid_ <= 0 || waitpid(pid_, &status, WNOHANG) != pid_) return;
  // It ended between requests (e.g. after answering a sticky CUDA error): start afresh
  // instead of failing the next, innocent case on a dead pipe.
  kill(-pid_, SIGKILL);
  if (to_ >= 0) close(to_);
  if (from_ >= 0) close(from_);
  pid_ = -1, to_ = -1, from_ = -1;
}

nlohmann::json WorkerClient::request(nlohmann::json req) {
  reap_if_exited();
  hello();
  const std::string type = req.value("type", "");
  const int64_t id = next_id_++;
  req["id"] = id;
  const std::string what = type + " request";
  nlohmann::json a = exchange(req, what);
  const std::string want = type == "run" ? "result" : type;
  if (a.value("type", "") != want || !a.contains("id") || a["id"] != id)
    fail("answered the " + what + " (id " + std::to_string(id) + ") with " + a.dump().substr(0, 120), true);
  return a;
}

}  // namespace kv
