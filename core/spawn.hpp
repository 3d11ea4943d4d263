// Starting child processes that never outlive kverify, however it ends (SIGKILL included).
// Every child kverify starts goes through spawn_child: case workers, plugin probes, the
// external worker's shell, sanitizer wrappers, fuzz campaign workers.
//  - The child gets PR_SET_PDEATHSIG = SIGKILL (checked against the parent's pid right
//    after, so a parent that died between fork and prctl is noticed too).
//  - With own_group, the child also leads a process group of its own and a guard process
//    (forked, never exec'd) sits in that group watching a pipe only kverify holds: when
//    kverify ends, the pipe closes and the guard kills the whole group. That reaches what
//    PDEATHSIG cannot: the grandchildren of `sh -c CMD`, the target of compute-sanitizer.
// kverify's parent may have threads (TBB, the CUDA runtime): everything the children need
// is prepared before fork, and between fork and exec they call only async-signal-safe
// functions.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace kv {

/// This executable's path (/proc/self/exe), or "kverify".
std::string self_exe();

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is the program's path (no PATH search)
  /// "NAME=value" sets NAME, a bare "NAME" removes it; the rest is inherited.
  std::vector<std::string> env;
  int in = -1, out = -1, err = -1;  // duplicated onto 0, 1, 2 when >= 0; inherited otherwise
  bool own_group = false;           // a process group of its own, killed whole when kverify ends
};

struct Spawned {
  pid_t pid = -1;
  pid_t guard = -1;   // own_group: the guard process, a member of the child's group
  int lifeline = -1;  // own_group: the pipe end whose closing makes the guard kill the group
};

/// Forks and execs; throws std::runtime_error when fork or pipe fails. A failed exec
/// ends the child with exit code 127.
Spawned spawn_child(const SpawnOptions& o);

/// own_group: kills whatever is left of the child's group (the guard does it) and reaps
/// the guard. The child itself is reaped by the caller (before or after). No-op otherwise.
void end_group(Spawned& s);

}  // namespace kv
