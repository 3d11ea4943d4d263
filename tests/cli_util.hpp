// Helpers for tests that drive the kverify binary: run a command (or one as kverify prints
// it), a fresh temp directory.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

namespace kvtest {

struct Out {
  int code;
  std::string text;  // stdout and stderr together
};

inline Out sh(const std::string& bin, const std::string& args) {
  std::string cmd = bin + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, text};
}

/// Runs a command line as kverify prints it (`kverify replay ...`, `kverify drift ...`),
/// verbatim, from directory dir (created; its output lands in dir/out) with `kverify` on
/// PATH being bin.
inline Out sh_as_printed(const std::string& line, const std::string& dir, const std::string& bin) {
  std::filesystem::create_directories(dir + "/bin");
  std::filesystem::remove(dir + "/bin/kverify");
  std::filesystem::create_symlink(bin, dir + "/bin/kverify");
  return sh("cd '" + dir + "' && PATH='" + dir + "/bin':\"$PATH\"", line);
}

/// kverify with these arguments exits 2 with one line, the reason, which contains needle.
inline void expect_usage_error(const std::string& args, const std::string& needle) {
  Out o = sh(KV_BIN, args);
  EXPECT_EQ(o.code, 2) << args << "\n" << o.text;
  EXPECT_NE(o.text.find(needle), std::string::npos) << args << "\n" << o.text;
  EXPECT_EQ(std::count(o.text.begin(), o.text.end(), '\n'), 1) << o.text;
}

inline std::string tmpdir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("kv_cli_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

}  // namespace kvtest
