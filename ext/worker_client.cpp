// Talking to an external worker over pipes, with a watchdog and restarts.
#include "ext/worker_client.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "kv_build_info.hpp"

namespace kv {

WorkerClient::WorkerClient(std::string cmd, std::string io_dir, std::string log_path, double timeout_s,
                           nlohmann::json device)
    : cmd_(std::move(cmd)), io_dir_(std::move(io_dir)), log_path_(std::move(log_path)), timeout_s_(timeout_s),
      device_(std::move(device)) {
  signal(SIGPIPE, SIG_IGN);
}

WorkerClient::~WorkerClient() { stop(false); }

void WorkerClient::start() {
  const int log = open(log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", cmd_};
  o.env = {"KVERIFY_IO_DIR=" + io_dir_};
  o.err = log;
  o.own_group = true;  // a kill reaches the shell and everything it started, and so does kverify's end
  try {
    child_.start(o);
  } catch (const std::exception& e) {
    if (log >= 0) close(log);
    throw ExternalError(std::string("worker: ") + e.what());
  }
  if (log >= 0) close(log);
  if (started_once_) ++restarts_;
  started_once_ = true;
}

// stdin closed: unless killed, it gets 5 s to exit on its own; then its group goes.
std::string WorkerClient::stop(bool kill_it) { return child_.stop(kill_it ? 0 : 5); }

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
  if (!child_.write(msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"))
    fail("died before the " + what + " was sent", true);
  const auto deadline = deadline_after(timeout_s_);
  std::string answer;
  switch (child_.read_line(deadline, answer)) {
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
  if (child_.running()) return impls_;
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
  // It ended between requests (e.g. after answering a sticky CUDA error): start afresh
  // instead of failing the next, innocent case on a dead pipe.
  child_.reap_if_exited();
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
