// Verdicts that cannot be vacuous, inputs that are read strictly, results that survive
// an interrupted run (issue 18 [soundness], deliverables 1, 2 and 6).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "check/results.hpp"
#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "test_util.hpp"

namespace {

using kvtest::Out;
using kvtest::sh;
using kvtest::expect_usage_error;
using kvtest::tmpdir;

/// Every op's example case with `dim` in place of its first dimension.
std::vector<kv::Case> every_op_with_first_dim(int64_t dim) {
  std::vector<kv::Case> out;
  for (auto* op : kv::registry().ops()) {
    kv::Case c;
    c.op = op->name();
    c.impl = "host";
    c.shape = op->example_shape();
    c.shape[0] = dim;
    c.dtypes["x"] = kv::DType::f32;
    out.push_back(c);
  }
  return out;
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

}  // namespace

// A shape whose element count wraps 64 bits described a tensor of 0 elements, and every
// op passed it (issue 18). Now the count is checked before anything is allocated.
TEST(Strict, ShapesWhoseSizeOverflowsAreUsageErrorsForEveryOp) {
  for (int64_t big : {int64_t(1) << 62, int64_t(1) << 57}) {
    for (auto c : every_op_with_first_dim(big)) {
      c.shape.back() = c.shape.size() > 1 ? 1 << 10 : c.shape.back();
      try {
        kv::registry().normalize(c);
        ADD_FAILURE() << c.op << " accepted shape " << kv::shape_str(c.shape);
      } catch (const kv::UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("overflows"), std::string::npos) << c.op << ": " << e.what();
      }
    }
  }
  const std::string out = " --device host --out " + tmpdir("overflow");
  expect_usage_error("run --op softmax.fwd --dtype fp32 --shape 4x4611686018427387904" + out, "overflows");
  expect_usage_error("run --op swiglu.bwd --dtype bf16 --shape 4294967296x4294967296" + out, "overflows");
  expect_usage_error("replay 'kv1 op=cross_entropy.fwd impl=host shape=4x4611686018427387904 dtypes=x:fp32'" + out,
                     "overflows");
}

// An output without elements checked nothing: the case is `skip` with the reason, never a
// pass. (A reduced loss over zero rows is one element, NaN or 0 as empty_mean names it
// under mean, 0 under sum, and is checked.)
TEST(Strict, ACaseWithAnEmptyOutputNeverPasses) {
  int empty = 0, ops = 0;
  std::string others;  // ops whose case has no empty output, with their verdict and reason
  for (auto& c : every_op_with_first_dim(0)) {
    ++ops;
    nlohmann::json j;
    try {
      j = kvtest::run_in_process(c);
    } catch (const kv::UsageError&) {
      ++empty;  // an op that refuses an empty dimension outright: not a pass either
      continue;
    }
    bool has_empty = false;
    for (auto& [name, o] : j["outputs"].items()) has_empty |= o.value("n", int64_t(-1)) == 0;
    if (!has_empty) {
      others += "\n  " + c.op + ": " + j.value("verdict", "") + " " + j.value("reason", "").substr(0, 300);
      continue;
    }
    ++empty;
    EXPECT_EQ(j.value("verdict", ""), "skip") << c.op << " " << j.value("reason", "");
    EXPECT_NE(j.value("reason", "").find("nothing to check"), std::string::npos) << c.op;
  }
  EXPECT_GE(empty, ops - 2) << others;  // all but the reduced-loss forwards (CE and FLCE) have an empty output here
}

TEST(Strict, TyposAndOutOfRangeValuesExitTwoNamingTheKnownValues) {
  const std::string d = tmpdir("typos"), out = " --device host --out " + d;
  const std::string rms = "run --op rms_norm.fwd --shape 2x64 --dtype fp32";
  expect_usage_error(rms + " --attrs mdoe=gemma" + out, "did you mean 'mode'");
  expect_usage_error(rms + " --attrs foo=1" + out, "unknown attribute 'foo'");
  expect_usage_error(rms + " --attrs mode=gemma,mode=llama" + out, "given twice");
  expect_usage_error(rms + " --config num_warps=2,num_warps=4" + out, "given twice");
  expect_usage_error(rms + " --seed -1" + out, "malformed seed '-1'");
  expect_usage_error(rms + " --dist nromal" + out, "did you mean 'normal'");
  for (const char* t : {"0", "-1", "nan", "inf"}) expect_usage_error(rms + " --timeout " + t + out, "seconds");
  expect_usage_error(rms + " --worker-timeout 0" + out, "seconds");
  // replay goes through the same validator as run: the same typo, the same answer.
  expect_usage_error("replay 'kv1 op=rms_norm.fwd impl=host shape=2x64 dtypes=x:fp32 attrs=mdoe:gemma'" + out,
                     "did you mean 'mode'");
  expect_usage_error("replay 'kv1 op=rms_norm.fwd impl=host shape=2x64 seed=-1'" + out, "malformed seed");
  expect_usage_error("replay 'kv1 op=rms_norm.fwd op=softmax.fwd shape=2x64'" + out, "given twice");
  expect_usage_error("fuzz --op rms_norm.fwd --seed -1" + out, "malformed seed");
  expect_usage_error("fuzz --op rms_norm.fwd --budget-seconds 0" + out, "seconds");
  // Suites: an unknown field or attribute is a typo, never silently ignored.
  expect_usage_error("run --suite " +
                         write_file(d + "/a.json", R"({"entries": [{"ops": ["rms_norm.fwd"], "shapez": ["2x64"]}]})") + out,
                     "did you mean 'shapes'");
  expect_usage_error("run --suite " +
                         write_file(d + "/b.json", R"({"entries": [{"ops": ["rms_norm.fwd"], "shapes": ["2x64"],
                                                       "attrs": {"mdoe": ["gemma"]}}]})") + out,
                     "did you mean 'mode'");
  expect_usage_error("run --suite " +
                         write_file(d + "/c.json", R"({"entries": [{"ops": ["rms_norm.fwd"], "shapes": ["2x64"],
                                                       "seeds": [-1]}]})") + out,
                     "malformed seed");
  expect_usage_error("run --suite " + write_file(d + "/e.json", R"({"entires": []})") + out, "did you mean 'entries'");
  // An output directory that cannot be written is a configuration error, not a crash.
  write_file(d + "/file", "x");
  expect_usage_error(rms + " --device host --out " + d + "/file/sub", "cannot write to output directory");
}

// A killed run can leave half a line; the next run sets it aside instead of appending to it.
TEST(Durable, RunSetsAsideAPartialLastLineAndEveryLineParses) {
  const std::string d = tmpdir("partial");
  ASSERT_EQ(sh(KV_BIN, "run --device host --op softmax.fwd --shape 2x33 --dtype fp32 --out " + d).code, 0);
  std::ofstream(d + "/results.jsonl", std::ios::app) << R"({"schema":1,"case":"kv1 op=softm)";
  Out o = sh(KV_BIN, "run --device host --op softmax.fwd --shape 3x33 --dtype fp32 --out " + d);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("incomplete line"), std::string::npos) << o.text;
  EXPECT_EQ(kv::read_results(d + "/results.jsonl").size(), 2u);  // strict read: every line whole
  EXPECT_TRUE(std::filesystem::exists(d + "/results.jsonl.partial"));
}

TEST(Durable, ResumeSkipsTheCasesAlreadyFinished) {
  const std::string d = tmpdir("resume");
  const std::string sel = "run --device host --op softmax.fwd --dtype fp32 --shape 2x33 --shape 3x17";
  ASSERT_EQ(sh(KV_BIN, sel + " --out " + d).code, 0);
  Out o = sh(KV_BIN, sel + " --shape 5x9 --resume --out " + d);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("2 finished earlier, resumed"), std::string::npos) << o.text;
  auto lines = kv::read_results(d + "/results.jsonl");
  ASSERT_EQ(lines.size(), 3u);  // only the new shape ran
  EXPECT_NE(lines[2]["case"].get<std::string>().find("shape=5x9"), std::string::npos);
  // The report covers the whole selection: the resumed cases and the new one.
  std::ifstream rep(d + "/junit.xml");
  std::string junit((std::istreambuf_iterator<char>(rep)), std::istreambuf_iterator<char>());
  EXPECT_NE(junit.find("tests=\"3\""), std::string::npos) << junit.substr(0, 300);
}

// SIGINT and SIGTERM stop a run cleanly: the case in flight (a hanging impl) is abandoned,
// the summary and report cover what finished, a line says so, and the exit code is 128 + sig.
TEST(Durable, StopSignalsEndTheRunWithItsResultsWritten) {
  for (int sig : {SIGINT, SIGTERM}) {
    const std::string d = tmpdir("sig" + std::to_string(sig)), log = d + "/log";
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      setpgid(0, 0);
      const std::string cmd = std::string(KV_TESTBIN) + " run --device host --op rms_norm.fwd --impl host --impl test.hang"
                              " --shape 2x64 --dtype fp32 --out " + d + " > " + log + " 2>&1";
      execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Wait for the first result (the host impl), then for the hang to be in flight.
    auto whole_lines = [&] {
      std::ifstream r(d + "/results.jsonl");
      std::string all((std::istreambuf_iterator<char>(r)), std::istreambuf_iterator<char>());
      return std::count(all.begin(), all.end(), '\n');
    };
    for (int i = 0; i < 300 && whole_lines() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto t0 = std::chrono::steady_clock::now();
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ifstream f(log);
    const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    ASSERT_TRUE(WIFEXITED(status)) << text;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << text;
    EXPECT_LT(s, 5.0);
    EXPECT_NE(text.find(sig == SIGINT ? "interrupted by SIGINT" : "interrupted by SIGTERM"), std::string::npos) << text;
    auto lines = kv::read_results(d + "/results.jsonl");  // strict: every line whole
    EXPECT_EQ(lines.size(), 1u) << text;                  // the hang left no line
    EXPECT_TRUE(std::filesystem::exists(d + "/summary.html"));
    EXPECT_TRUE(std::filesystem::exists(d + "/report.html"));
  }
}

TEST(Durable, ReportAndSummarySkipACorruptLineNameItAndExitNonZero) {
  const std::string d = tmpdir("corrupt");
  ASSERT_EQ(sh(KV_BIN, "run --device host --op softmax.fwd --shape 2x33 --shape 3x9 --dtype fp32 --out " + d).code, 0);
  std::ifstream in(d + "/results.jsonl");
  std::string a, b;
  std::getline(in, a), std::getline(in, b);
  write_file(d + "/mixed.jsonl", a + "\n{\"case\": broken\n" + b + "\n");
  Out o = sh(KV_BIN, "report --results " + d + "/mixed.jsonl --out " + d + "/rep");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("mixed.jsonl:2"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("(2 cases"), std::string::npos) << o.text;
  EXPECT_TRUE(std::filesystem::exists(d + "/rep/report.html"));
  o = sh(KV_BIN, "summary --results " + d + "/mixed.jsonl --out " + d + "/s.html");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("mixed.jsonl:2"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("(2 cases"), std::string::npos) << o.text;
}
