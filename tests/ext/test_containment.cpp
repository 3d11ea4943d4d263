// Crash containment, end to end through the kverify binaries:
//  - a plugin that crashes or hangs in registration or in contract() costs only its own
//    cases (`error` with the reason; `list` says it is unusable; exit 1, never a signal),
//    and a contract() crash inside the case-running worker is an `error` for that case;
//  - no process kverify started outlives it, whether it is killed (SIGKILL), interrupted
//    (SIGINT to it, or to its process group as Ctrl-C does) while a case hangs in its
//    worker, in an external worker behind `sh -c`, or in fuzz campaign workers;
//  - an impl writing outside an output on the host never passes: one element, 256 bytes,
//    1200 bytes or 4 KiB past the end, 1200 bytes or 4 KiB before the start; the honest
//    host impl passes in the same run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "check/results.hpp"
#include "cli_util.hpp"
#include "test_impls.hpp"

namespace {

using kvtest::Out;
using kvtest::sh;

std::string plugin(const std::string& how) { return std::string(KV_MISBEHAVING_PLUGIN_DIR) + "/misbehaving_" + how + ".so"; }

std::vector<nlohmann::json> results(const std::string& dir) { return kv::read_results(dir + "/results.jsonl", ""); }

const nlohmann::json* result_of(const std::vector<nlohmann::json>& rs, const std::string& impl) {
  for (auto& r : rs)
    if (r["impl"] == impl) return &r;
  return nullptr;
}

/// `run` with the plugin beside the host impl: the plugin's case is `error` naming
/// `needle`, the host case passes, kverify exits 1; `list` with the plugin exits 1 saying
/// it is unusable and why.
void expect_contained(const std::string& how, const std::string& needle, const std::string& extra = "") {
  const std::string out = kvtest::tmpdir("contain_" + how);
  Out o = sh(KV_BIN, "run --plugin " + plugin(how) + extra +
                         " --op rms_norm.fwd --impl host --impl misbehaving --dtype fp32 --shape 4x64 --out " + out);
  EXPECT_EQ(o.code, 1) << o.text;
  auto rs = results(out);
  ASSERT_EQ(rs.size(), 2u) << o.text;
  const nlohmann::json* host = result_of(rs, "host");
  ASSERT_NE(host, nullptr);
  EXPECT_EQ((*host)["verdict"], "pass") << host->dump();
  const nlohmann::json* bad = result_of(rs, "misbehaving");
  ASSERT_NE(bad, nullptr) << o.text;
  EXPECT_EQ((*bad)["verdict"], "error") << bad->dump();
  EXPECT_NE(bad->value("reason", "").find(needle), std::string::npos) << bad->dump();

  Out l = sh(KV_BIN, "list --plugin " + plugin(how) + extra);
  EXPECT_EQ(l.code, 1) << l.text;
  EXPECT_NE(l.text.find("plugin:misbehaving_" + how + " unusable"), std::string::npos) << l.text;
  EXPECT_NE(l.text.find(needle), std::string::npos) << l.text;
  EXPECT_NE(l.text.find("impl host (host)"), std::string::npos) << l.text;  // the rest is listed
}

}  // namespace

TEST(Containment, PluginCrashingInRegistrationCostsOnlyItsCases) {
  expect_contained("crash_register", "crashed while loading and registering (signal 11");
}

TEST(Containment, PluginHangingInRegistrationCostsOnlyItsCases) {
  expect_contained("hang_register", "no answer within 2 s while loading and registering", " --plugin-timeout 2");
}

TEST(Containment, PluginCrashingInContractCostsOnlyItsCases) {
  expect_contained("crash_contract", "crashed in contract() of impl misbehaving");
  expect_contained("crash_contract", "(signal 11");
}

TEST(Containment, PluginHangingInContractCostsOnlyItsCases) {
  expect_contained("hang_contract", "no answer within 2 s in contract() of impl misbehaving", " --plugin-timeout 2");
}

// The parent's probe is content; the worker's own contract() call crashes: the worker's
// crash is that case's `error`, and the run goes on.
TEST(Containment, ContractCrashingInTheWorkerIsAnErrorForItsCase) {
  const std::string out = kvtest::tmpdir("contain_in_worker");
  Out o = sh(KV_BIN, "run --plugin " + plugin("crash_contract_in_worker") +
                         " --op rms_norm.fwd --impl misbehaving --impl host --dtype fp32 --shape 4x64 --seed 1 --seed 2 --out " + out);
  EXPECT_EQ(o.code, 1) << o.text;
  auto rs = results(out);
  ASSERT_EQ(rs.size(), 4u) << o.text;
  for (auto& r : rs) {
    if (r["impl"] == "host") {
      EXPECT_EQ(r["verdict"], "pass") << r.dump();
    }
    if (r["impl"] != "misbehaving") continue;
    EXPECT_EQ(r["verdict"], "error") << r.dump();
    EXPECT_NE(r.value("reason", "").find("worker crashed (signal 11"), std::string::npos) << r.dump();
  }
}

// ---- no orphans ----

namespace {

struct Proc {
  pid_t pid;
  unsigned long long start;  // start time: a reused pid is another process
  std::string cmd;
};

/// pid -> (ppid, state, start time) from /proc/<pid>/stat.
struct Stat {
  pid_t ppid = 0;
  char state = '?';
  unsigned long long start = 0;
};
bool read_stat(pid_t pid, Stat& s) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(text.substr(close + 2));
  in >> s.state >> s.ppid;
  std::string field;
  for (int i = 0; i < 17 && in >> field; ++i) {
  }
  in >> s.start;  // field 22
  return static_cast<bool>(in);
}

std::string cmdline(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (auto& c : s)
    if (!c) c = ' ';
  return s;
}

/// Every live descendant of root.
std::vector<Proc> descendants(pid_t root) {
  std::map<pid_t, Stat> all;
  for (auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    Stat s;
    if (read_stat(std::stoi(n), s)) all[std::stoi(n)] = s;
  }
  std::vector<Proc> out;
  std::set<pid_t> tree = {root};
  for (bool grew = true; grew;) {
    grew = false;
    for (auto& [pid, s] : all)
      if (tree.count(s.ppid) && !tree.count(pid)) tree.insert(pid), grew = true;
  }
  for (pid_t p : tree)
    if (p != root && all[p].state != 'Z') out.push_back({p, all[p].start, cmdline(p)});
  return out;
}

bool alive(const Proc& p) {
  Stat s;
  return read_stat(p.pid, s) && s.state != 'Z' && s.start == p.start;
}

/// Starts `args` (kverify-testbin) in a process group of its own, as a shell would.
pid_t start_kverify(const std::string& args, const std::string& log) {
  const std::string cmd = std::string("exec ") + KV_TESTBIN + " " + args + " > " + log + " 2>&1";
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    signal(SIGINT, SIG_DFL);  // as from an interactive shell, even where the tests run with it ignored
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

/// Waits until `ready` holds for kverify's descendants (up to 60 s), then a moment more
/// so the hang is under way; returns them.
std::vector<Proc> wait_for(pid_t kv, const std::function<bool(const std::vector<Proc>&)>& ready) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < until) {
    if (ready(descendants(kv))) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      return descendants(kv);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return {};
}

size_t count_with(const std::vector<Proc>& ps, const std::string& needle) {
  size_t n = 0;
  for (auto& p : ps) n += p.cmd.find(needle) != std::string::npos;
  return n;
}

/// Starts kverify, waits for its children to be `ready`, ends it with `how`, and expects
/// every descendant it had to be gone within 5 s.
void expect_no_orphans(const std::string& name, const std::string& args,
                       const std::function<bool(const std::vector<Proc>&)>& ready) {
  for (const char* how : {"SIGKILL", "SIGINT", "Ctrl-C"}) {
    SCOPED_TRACE(name + " ended by " + how);
    const std::string dir = kvtest::tmpdir("orphans_" + name);
    const pid_t kv = start_kverify(args + " --out " + dir, dir + "/log");
    const std::vector<Proc> kids = wait_for(kv, ready);
    ASSERT_FALSE(kids.empty()) << "kverify's children never got ready; log:\n"
                               << std::ifstream(dir + "/log").rdbuf();
    if (std::string(how) == "SIGKILL") kill(kv, SIGKILL);
    else if (std::string(how) == "SIGINT") kill(kv, SIGINT);
    else kill(-kv, SIGINT);  // the terminal's Ctrl-C: the foreground process group
    int status = 0;
    waitpid(kv, &status, 0);
    // SIGKILL kills it; SIGINT stops the run cleanly (results written, exit 130).
    EXPECT_TRUE(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) == 130)) << "kverify went on after " << how;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    std::vector<Proc> left;
    do {
      left.clear();
      for (auto& p : kids)
        if (alive(p)) left.push_back(p);
      if (left.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } while (std::chrono::steady_clock::now() < until);
    for (auto& p : left) {
      ADD_FAILURE() << "pid " << p.pid << " outlived kverify by 5 s: " << p.cmd;
      kill(p.pid, SIGKILL);
    }
  }
}

}  // namespace

TEST(Containment, NoCaseWorkerOutlivesKverify) {
  expect_no_orphans("case_worker", "run --op rms_norm.fwd --impl test.hang --dtype fp32 --shape 4x64 --timeout 600",
                    [](const std::vector<Proc>& ps) { return count_with(ps, "__worker") >= 1; });
}

// `sh -c 'python3 ...; true'` keeps the shell as the worker's parent: the worker itself is
// a grandchild, which PR_SET_PDEATHSIG alone would not reach.
TEST(Containment, NoExternalWorkerOutlivesKverify) {
  const std::string worker = "--worker 'python3 " KV_SOURCE_DIR
                             "/examples/worker/kv_worker.py --impl py=pure_impls:rms_norm_fwd --hang-on-run 1; true'";
  expect_no_orphans("external", "run " + worker + " --worker-timeout 600 --op rms_norm.fwd --impl py --dtype bf16 --shape 4x64",
                    [](const std::vector<Proc>& ps) { return count_with(ps, "kv_worker.py") >= 2 && count_with(ps, "__worker") >= 1; });
}

// A fixed seed and room for many draws: each shard must draw a case the op admits, or it
// ends at once with one worker fewer (seed 8 with 4 cases gives shard 1/2 only two eps=0
// draws, both rejected) and the test waits for a second worker that never comes.
TEST(Containment, NoFuzzWorkerOutlivesKverify) {
  expect_no_orphans("fuzz", "fuzz --op rms_norm.fwd --impl test.hang --devices 2 --budget-cases 40 --curated none --timeout 600 --seed 1",
                    [](const std::vector<Proc>& ps) { return count_with(ps, "__worker") >= 2; });
}

// ---- out-of-bounds writes on the host ----

TEST(Containment, OutOfBoundsWritesOnTheHostNeverPass) {
  std::string impls = " --impl host --impl host.bug.write_past_end";
  for (auto& [name, at] : kvtest::out_of_bounds_writes()) impls += " --impl " + name;
  for (const char* shape : {"4x64", "3x123"}) {
    SCOPED_TRACE(shape);
    const std::string out = kvtest::tmpdir("oob");
    Out o = sh(KV_TESTBIN, "run --op rms_norm.fwd" + impls + " --dtype fp32 --dtype bf16 --shape " + std::string(shape) +
                               " --out " + out);
    EXPECT_EQ(o.code, 1) << o.text;
    auto rs = results(out);
    ASSERT_EQ(rs.size(), 2 * (2 + kvtest::out_of_bounds_writes().size())) << o.text;
    for (auto& r : rs) {
      const std::string impl = r["impl"], verdict = r["verdict"], why = r.value("reason", "");
      if (impl == "host") {
        EXPECT_EQ(verdict, "pass") << r.dump();
        continue;
      }
      EXPECT_TRUE(verdict == "fail" || verdict == "error") << impl << ": " << verdict << " " << why;
      EXPECT_NE(why.find("out-of-bounds write"), std::string::npos) << impl << ": " << why;
      if (impl.find("after") != std::string::npos || impl == "host.bug.write_past_end") {  // a guard page, at once
        EXPECT_NE(why.find("past the end of y"), std::string::npos) << impl << ": " << why;
      }
    }
  }
}
