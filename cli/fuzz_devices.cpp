// One campaign worker per device (cli/fuzz_devices.hpp).
#include "cli/fuzz_devices.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "cli/supervisor.hpp"
#include "core/cuda/cuda_device.hpp"
#include "core/error.hpp"
#include "fuzz/campaign.hpp"

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

/// The arguments without `--devices X`, `--out X` (either spelling) and `--shard X`.
std::vector<std::string> without_own_options(const std::vector<std::string>& args) {
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    bool dropped = false;
    for (const char* o : {"--devices", "--out", "--shard"}) {
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

/// Starts argv_s with stdout and stderr appended to `log` (and CUDA_VISIBLE_DEVICES set when
/// cuda_device >= 0). Everything the child needs is prepared before fork: between fork and
/// exec it only calls async-signal-safe functions.
pid_t spawn(const std::vector<std::string>& argv_s, const std::string& log, int cuda_device) {
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0) env_s.emplace_back(*e);
  if (cuda_device >= 0) env_s.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(cuda_device));
  auto pointers = [](std::vector<std::string>& v) {
    std::vector<char*> p;
    for (auto& s : v) p.push_back(s.data());
    p.push_back(nullptr);
    return p;
  };
  std::vector<std::string> args = argv_s;
  std::vector<char*> argv = pointers(args), envp = pointers(env_s);
  const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot open " + log);
  pid_t pid = fork();
  if (pid < 0) {
    close(fd);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    dup2(fd, 1), dup2(fd, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  close(fd);
  return pid;
}

}  // namespace

int run_fuzz_on_devices(const std::vector<std::string>& args, const std::string& out, int n, bool cuda) {
  fs::create_directories(out);
  const std::vector<std::string> base = without_own_options(args);
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const std::string dir = (fs::path(out) / ("device-" + std::to_string(i))).string();
    std::vector<std::string> argv = {self_exe(), "fuzz"};
    argv.insert(argv.end(), base.begin(), base.end());
    for (const std::string& a : {std::string("--out"), dir, std::string("--shard"), std::to_string(i) + "/" + std::to_string(n)})
      argv.push_back(a);
    std::cout << "device " << i << (cuda ? " (CUDA_VISIBLE_DEVICES=" + std::to_string(i) + ")" : std::string(" (host)"))
              << ": shard " << i << "/" << n << " into " << dir << ", log " << dir << ".log\n";
    pids.push_back(spawn(argv, dir + ".log", cuda ? i : -1));
  }
  int worst = 0;
  for (int i = 0; i < n; ++i) {
    int status = 0;
    waitpid(pids[static_cast<size_t>(i)], &status, 0);
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    worst = std::max(worst, code);
    // The worker's last lines (its totals) under its device number.
    std::ifstream log(fs::path(out) / ("device-" + std::to_string(i) + ".log"));
    std::vector<std::string> lines;
    for (std::string l; std::getline(log, l);) lines.push_back(l);
    for (size_t k = lines.size() > 4 ? lines.size() - 4 : 0; k < lines.size(); ++k)
      std::cout << "[device " << i << "] " << lines[k] << "\n";
    if (code != 0) std::cout << "[device " << i << "] exit " << code << "\n";
  }
  // The joined files are rewritten from the shards each time (a resume adds to the shards).
  for (const char* name : {"results.jsonl", "failures.jsonl"}) {
    std::vector<std::string> shards;
    for (int i = 0; i < n; ++i)
      if (auto f = fs::path(out) / ("device-" + std::to_string(i)) / name; fs::exists(f)) shards.push_back(f.string());
    fs::remove(fs::path(out) / name);
    if (!shards.empty()) merge_results((fs::path(out) / name).string(), shards);
  }
  std::cout << "joined " << n << " shards into " << (fs::path(out) / "results.jsonl").string() << " and failures.jsonl\n";
  return worst;
}

}  // namespace kv
