// fork/exec with death ties to kverify (core/spawn.hpp).
#include "core/spawn.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace kv {

std::string self_exe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "kverify";
  buf[n] = 0;
  return buf;
}

namespace {

std::vector<char*> pointers(std::vector<std::string>& v) {
  std::vector<char*> p;
  for (auto& s : v) p.push_back(s.data());
  p.push_back(nullptr);
  return p;
}

/// The environment with o.env applied.
std::vector<std::string> child_env(const std::vector<std::string>& changes) {
  auto name_of = [](const std::string& s) { return s.substr(0, s.find('=')); };
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    bool replaced = false;
    for (auto& c : changes) replaced |= name_of(c) == name_of(var);
    if (!replaced) env.push_back(var);
  }
  for (auto& c : changes)
    if (c.find('=') != std::string::npos) env.push_back(c);
  return env;
}

/// The guard's life after fork (async-signal-safe calls only): it leaves kverify's fds
/// (holding a copy of a worker's stdin pipe would keep that worker from seeing EOF), waits
/// until nothing holds the lifeline's write end any more (kverify ended, or closed it to
/// stop the child), then kills the group it shares with the child, itself included.
[[noreturn]] void guard_main(int lifeline, pid_t group, int max_fd) {
  int keep = fcntl(lifeline, F_DUPFD, 10);
  if (keep < 0) keep = lifeline;
  const int null = open("/dev/null", O_RDWR);
  if (null >= 0)
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
  dup2(keep, 3);
  if (close_range(4, ~0u, 0) != 0)
    for (int fd = 4; fd < max_fd; ++fd) close(fd);
  char c;
  while (true) {
    const ssize_t n = read(3, &c, 1);
    if (n == 0 || (n < 0 && errno != EINTR)) break;
  }
  kill(-group, SIGKILL);
  _exit(0);
}

}  // namespace

Spawned spawn_child(const SpawnOptions& o) {
  if (o.argv.empty()) throw std::runtime_error("spawn: no program");
  std::vector<std::string> args = o.argv, env = child_env(o.env);
  std::vector<char*> argv = pointers(args), envp = pointers(env);
  rlimit lim{};
  const int max_fd = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < 65536 ? static_cast<int>(lim.rlim_cur) : 65536;
  const pid_t parent = getpid();
  Spawned s;
  s.pid = fork();
  if (s.pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (s.pid == 0) {
    if (o.own_group) setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // kverify ended before the tie was made
    if (o.in >= 0) dup2(o.in, 0);
    if (o.out >= 0) dup2(o.out, 1);
    if (o.err >= 0) dup2(o.err, 2);
    execve(argv[0], argv.data(), envp.data());
    _exit(127);
  }
  if (!o.own_group) return s;
  setpgid(s.pid, s.pid);  // as the child does: whichever runs first, the group exists before the guard joins
  int life[2];
  if (pipe2(life, O_CLOEXEC) != 0) {
    kill(s.pid, SIGKILL);
    waitpid(s.pid, nullptr, 0);
    throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  }
  s.guard = fork();
  if (s.guard < 0) {
    close(life[0]), close(life[1]);
    kill(s.pid, SIGKILL);
    waitpid(s.pid, nullptr, 0);
    throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  }
  if (s.guard == 0) {
    setpgid(0, s.pid);
    close(life[1]);
    guard_main(life[0], s.pid, max_fd);
  }
  setpgid(s.guard, s.pid);
  close(life[0]);
  s.lifeline = life[1];
  return s;
}

void end_group(Spawned& s) {
  if (s.lifeline >= 0) close(s.lifeline);
  s.lifeline = -1;
  if (s.guard > 0) {
    // The guard kills the group on its own once the lifeline is closed; the direct kill
    // covers a guard that has not reached its read yet.
    kill(-s.pid, SIGKILL);
    waitpid(s.guard, nullptr, 0);
  }
  s.guard = -1;
}

}  // namespace kv
