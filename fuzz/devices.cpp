// Campaign workers per device (fuzz/devices.hpp).
#include "fuzz/devices.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "check/results.hpp"
#include "run/supervisor.hpp"
#include "device/cuda_device.hpp"
#include "core/error.hpp"
#include "core/spawn.hpp"
#include "fuzz/campaign.hpp"
#include "fuzz/failure_class.hpp"
#include "fuzz/state.hpp"

namespace kv {

namespace fs = std::filesystem;

int fuzz_device_count(const std::string& devices, const std::string& device_kind) {
  // device_kind is cuda only in a build with CUDA (make_env refuses it otherwise).
  auto gpus = [](std::string* why) {
#ifdef KV_HAVE_CUDA
    return cuda_device_count(why);
#else
    if (why) *why = "built without CUDA";
    return 0;
#endif
  };
  if (devices == "all") {
    if (device_kind != "cuda") return 1;
    std::string why;
    const int n = gpus(&why);
    if (n < 1) throw UsageError("--devices all: no usable GPU (" + why + ")");
    return n;
  }
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(devices, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != devices.size() || n < 1) throw UsageError("--devices must be 'all' or a positive count, not '" + devices + "'");
  if (device_kind == "cuda") {
    const int have = gpus(nullptr);
    if (n > have) throw UsageError("--devices " + devices + ": this host has " + std::to_string(have) + " GPU(s)");
  }
  return n;
}

namespace {

/// The arguments without `--devices X`, `--jobs-per-device X`, `--out X` (either spelling)
/// and `--shard X`.
std::vector<std::string> without_own_options(const std::vector<std::string>& args) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool dropped = false;
    for (const char* o : {"--devices", "--jobs-per-device", "--out", "--shard"}) {
      if (a == o) {
        ++i, dropped = true;  // and its value
        break;
      }
      if (a.rfind(std::string(o) + "=", 0) == 0) {
        dropped = true;
        break;
      }
    }
    if (!dropped) kept.push_back(a);
  }
  return kept;
}

/// Starts argv_s with stdout and stderr appended to `log` (and CUDA_VISIBLE_DEVICES set to
/// cuda_device when that is not empty, removed otherwise); it dies with this process (core/spawn.hpp).
pid_t spawn(const std::vector<std::string>& argv_s, const std::string& log, const std::string& cuda_device,
            const std::string& threads) {
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + log);
  SpawnOptions o;
  o.argv = argv_s;
  o.env = {cuda_device.empty() ? "CUDA_VISIBLE_DEVICES" : "CUDA_VISIBLE_DEVICES=" + cuda_device};
  if (!threads.empty()) o.env.push_back("KV_THREADS=" + threads);
  o.out = o.err = fd;
  Spawned s;
  try {
    s = spawn_child(o);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return s.pid;
}

/// Each of W workers' share of the cores, for its KV_THREADS ("" where KV_THREADS is set
/// here already): W workers each on every core oversubscribe them W times over.
std::string worker_threads(int workers) {
  const char* set = std::getenv("KV_THREADS");
  if (set && *set) return "";
  return std::to_string(std::max(1u, std::thread::hardware_concurrency() / static_cast<unsigned>(std::max(workers, 1))));
}

}  // namespace

std::string visible_device(const char* visible, int n) {
  // A scheduler that hands a job GPUs 2 and 3 sets CUDA_VISIBLE_DEVICES=2,3: worker 0 must
  // get "2", not "0" (another job's GPU).
  std::vector<std::string> ids;
  std::string cur;
  for (const char* p = visible ? visible : ""; *p; ++p)
    if (*p == ',') ids.push_back(cur), cur.clear();
    else cur += *p;
  if (!cur.empty()) ids.push_back(cur);
  return n >= 0 && static_cast<size_t>(n) < ids.size() ? ids[static_cast<size_t>(n)] : std::to_string(n);
}

int run_fuzz_on_devices(const std::vector<std::string>& args, const std::string& out, int n, int jobs, bool cuda,
                        const std::string& outer_shard) {
  const Shard outer = parse_shard(outer_shard);
  fs::create_directories(out);
  const std::vector<std::string> base = without_own_options(args);
  const int workers = n * jobs;
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const auto start = std::chrono::steady_clock::now();
  const int64_t before = fs::exists(fs::path(out) / "results.jsonl")
                             ? static_cast<int64_t>(read_results((fs::path(out) / "results.jsonl").string()).size())
                             : 0;
  const std::string threads = worker_threads(workers);
  std::vector<std::string> names;
  std::vector<pid_t> pids;
  for (int w = 0; w < workers; ++w) {
    const int dev = w % n;
    names.push_back("device-" + std::to_string(dev) + (jobs > 1 ? ".job-" + std::to_string(w / n) : ""));
    const std::string dir = (fs::path(out) / names.back()).string();
    const std::string shard = Shard{outer.i + outer.n * w, outer.n * workers}.str();
    const std::string gpu = cuda ? visible_device(visible, dev) : "";
    std::vector<std::string> argv = {self_exe(), "fuzz"};
    argv.insert(argv.end(), base.begin(), base.end());
    for (const std::string& a : {std::string("--out"), dir, std::string("--shard"), shard}) argv.push_back(a);
    std::cout << names.back() << (cuda ? " (CUDA_VISIBLE_DEVICES=" + gpu + ")" : std::string(" (host)"))
              << (threads.empty() ? "" : ", KV_THREADS=" + threads) << ": shard " << shard << " into " << dir << ", log " << dir << ".log\n";
    pids.push_back(spawn(argv, dir + ".log", gpu, threads));
  }
  int worst = 0;
  install_stop_handlers();
  int forwarded = 0;  // a stop signal is passed on to every shard, which winds down and says so
  for (int w = 0; w < workers; ++w) {
    int status = 0;
    while (waitpid(pids[static_cast<size_t>(w)], &status, 0) < 0 && errno == EINTR)
      if (stop_signal() && !forwarded) {
        forwarded = stop_signal();
        for (pid_t p : pids) kill(p, forwarded);
      }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    worst = std::max(worst, code);
    // The worker's last lines (its totals) under its name.
    const std::string& name = names[static_cast<size_t>(w)];
    std::ifstream log(fs::path(out) / (name + ".log"));
    std::vector<std::string> lines;
    for (std::string l; std::getline(log, l);) lines.push_back(l);
    for (size_t k = lines.size() > 4 ? lines.size() - 4 : 0; k < lines.size(); ++k)
      std::cout << "[" << name << "] " << lines[k] << "\n";
    if (code != 0) std::cout << "[" << name << "] exit " << code << "\n";
  }
  // The joined files are rewritten from the shards each time (a resume adds to the shards).
  for (const char* file : {"results.jsonl", "failures.jsonl"}) {
    std::vector<std::string> shards;
    for (auto& name : names)
      if (auto f = fs::path(out) / name / file; fs::exists(f)) shards.push_back(f.string());
    fs::remove(fs::path(out) / file);
    if (!shards.empty()) merge_results((fs::path(out) / file).string(), shards);
  }
  std::cout << "joined " << workers << " shards into " << (fs::path(out) / "results.jsonl").string() << " and failures.jsonl\n";
  // The joined campaign's totals, and this session's rate over all workers.
  std::map<std::string, int64_t> verdicts;
  int64_t total = 0;
  if (fs::exists(fs::path(out) / "results.jsonl"))
    for (auto& j : read_results((fs::path(out) / "results.jsonl").string())) ++verdicts[j.value("verdict", "error")], ++total;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "joined: " << total << " cases";
  for (auto& [v, k] : verdicts) std::cout << ", " << k << " " << v;
  std::printf("; this session %lld new in %.1f s, %.1f cases/s over %d workers\n", static_cast<long long>(total - before),
              wall, wall > 0 ? static_cast<double>(total - before) / wall : 0.0, workers);
  std::fflush(stdout);
  // The workers' own prints of their failures went to their logs: every failure here.
  if (const auto failures = fs::path(out) / "failures.jsonl"; fs::exists(failures)) {
    print_failures_by_class(read_results(failures.string()), std::cout);
    std::cout << "failures: " << failures.string() << "\n" << std::flush;
  }
  if (stop_signal()) {
    std::cout << "interrupted by " << stop_signal_name(stop_signal()) << ": each shard kept what finished; continue with "
              << "the same command and --resume\n";
    return Interrupted{stop_signal()}.exit_code();
  }
  return worst;
}

}  // namespace kv
