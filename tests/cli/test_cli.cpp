// The command line end to end: usage errors exit 2 with a one-line reason; a crashing
// or hanging impl becomes `error` for its case while the run goes on in a new worker.
#include <gtest/gtest.h>
#include <tbb/info.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "check/results.hpp"
#include "run/sanitize.hpp"
#include "cli_util.hpp"
#ifdef KV_HAVE_CUDA
#include "device/cuda_device.hpp"
#endif

namespace {

using kvtest::Out;
using kvtest::sh;
using kvtest::expect_usage_error;
using kvtest::tmpdir;


}  // namespace

TEST(Cli, BadInputExitsTwoWithAOneLineReason) {
  std::string out = " --out " + tmpdir("usage");
  expect_usage_error("run --op nope" + out, "unknown op 'nope'");
  expect_usage_error("run --op rms_norm.fwd --config num_warps=3" + out, "invalid config: num_warps=3");
  expect_usage_error("run --op rms_norm.fwd --config bogus=1" + out, "unknown knob 'bogus'");
  expect_usage_error("run --op rms_norm.fwd --shape -3x4" + out, "negative dimension");
  expect_usage_error("run --op rms_norm.fwd --shape 4xq" + out, "malformed dimension");
  expect_usage_error("run --op rms_norm.fwd --dtype fp64" + out, "unknown dtype 'fp64'");
  expect_usage_error("run --op rms_norm.fwd --attrs mode=fancy" + out, "invalid mode 'fancy'");
  expect_usage_error("replay 'not a case'" + out, "malformed case string");
  expect_usage_error("replay 'kv1 op=rms_norm.fwd shape=4x4 gen=999'" + out, "generator version");
  expect_usage_error("run --op rms_norm.fwd --device-profile sm_count=0" + out, "must be positive");
#ifdef KV_HAVE_CUDA
  std::string why;
  if (kv::cuda_device_count(&why) == 0) expect_usage_error("run --op rms_norm.fwd --device cuda" + out, "no usable GPU");
#else
  expect_usage_error("run --op rms_norm.fwd --device cuda" + out, "no CUDA support");
#endif
}

TEST(Cli, VersionUnknownSubcommandsAndHelpSayWhatAUserNeeds) {
  // --version: the commit, the build flags, CUDA (or that the build has none); exit 0.
  Out v = sh(KV_BIN, "--version");
  EXPECT_EQ(v.code, 0) << v.text;
  EXPECT_NE(v.text.find("kverify "), std::string::npos) << v.text;
  EXPECT_NE(v.text.find("flags:"), std::string::npos) << v.text;
#ifdef KV_HAVE_CUDA
  EXPECT_NE(v.text.find("CUDA runtime "), std::string::npos) << v.text;
#else
  EXPECT_NE(v.text.find("no CUDA in this build"), std::string::npos) << v.text;
#endif
  // A typo is named, with the closest subcommand and the list; no subcommand lists them too.
  expect_usage_error("rn --op rms_norm.fwd", "unknown subcommand 'rn' (did you mean 'run'?)");
  expect_usage_error("frobnicate", "the subcommands are list, run,");
  expect_usage_error("", "a subcommand is required, one of list, run,");
  // run --help lists every value distribution and the watchdog's default.
  Out h = sh(KV_BIN, "run --help");
  EXPECT_EQ(h.code, 0);
  for (const char* d : {"normal", "mean_shift", "big_mean", "const_rows", "subnormal", "near_overflow", "nan_inject",
                        "inf_inject"})
    EXPECT_NE(h.text.find(d), std::string::npos) << d;
  EXPECT_NE(h.text.find("default 600"), std::string::npos);
}

TEST(Cli, EveryOpRunsWithItsOpAlone) {
  // No --shape: row ops on 4x1536, rope on its B x S x H x D example, FLCE on BT x H x V.
  for (const char* op : {"rope.fwd", "fused_linear_cross_entropy.fwd", "rope_table.fwd", "softmax.bwd"}) {
    const std::string dir = tmpdir(std::string("op_alone_") + op);
    Out o = sh(KV_BIN, std::string("run --device host --dtype fp32 --op ") + op + " --out " + dir);
    EXPECT_EQ(o.code, 0) << op << "\n" << o.text;
    std::ifstream f(dir + "/results.jsonl");
    std::string line;
    int pass = 0;
    while (std::getline(f, line)) pass += nlohmann::json::parse(line).value("verdict", "") == "pass";
    EXPECT_GE(pass, 1) << op;
  }
}

TEST(Cli, ALongCaseSaysItsPhaseOnATerminalAndNothingInALog) {
  // test.hang sits in its kernel until the 4 s watchdog: on a terminal (script's pty) the
  // worker's stderr shows "kernel, 2 s" and erases it; in a log there is no such line.
  const std::string d = tmpdir("progress");
  const std::string run = std::string(KV_TESTBIN) + " run --op rms_norm.fwd --impl test.hang --shape 2x32 --dtype fp32 "
                          "--timeout 4 --out " + d;
  Out tty = sh("script", "-qec '" + run + "' /dev/null");
  EXPECT_NE(tty.text.find("rms_norm.fwd test.hang 2x32: kernel, 2 s"), std::string::npos) << tty.text;
  EXPECT_NE(tty.text.find("\033[K"), std::string::npos);
  Out log = sh(run, "");
  EXPECT_EQ(log.text.find(": kernel, "), std::string::npos) << log.text;
  Out off = sh("KV_PROGRESS=0 script", "-qec '" + run + "' /dev/null");
  EXPECT_EQ(off.text.find(": kernel, "), std::string::npos) << off.text;
}

TEST(Cli, AHostRunsReportSaysHostNotAnEmptyGpuHeader) {
  const std::string d = tmpdir("host_header");
  ASSERT_EQ(sh(KV_BIN, "run --device host --op softmax.fwd --shape 2x33 --dtype fp32 --out " + d).code, 0);
  auto read = [](const std::string& f) {
    std::ifstream in(f);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string report = read(d + "/report.html"), summary = read(d + "/summary.html");
  EXPECT_NE(report.find("<h2>Device and build</h2>"), std::string::npos);
  EXPECT_NE(report.find("A host run"), std::string::npos);
  EXPECT_EQ(report.find("GPU and build"), std::string::npos);
  EXPECT_EQ(report.find("compute capability</th>"), std::string::npos);
  EXPECT_NE(summary.find("a host run on this machine's CPU, no GPU"), std::string::npos);
  EXPECT_EQ(summary.find("CUDA runtime"), std::string::npos);
}

TEST(Cli, RtolAloneIsNaWithItsReasonWhereNoRelativeToleranceMeansAnything) {
  // softmax of large values: outputs down to subnormals whose error is tiny in absolute terms
  // but ~1e274 relative. "rtol alone" is n/a, with the element that makes it so.
  const std::string d = tmpdir("rtol_na");
  ASSERT_EQ(sh(KV_BIN, "run --device host --op softmax.fwd --dtype fp32 --dist large --dist normal --out " + d).code, 0);
  std::ifstream in(d + "/report.json");
  const nlohmann::json r = nlohmann::json::parse(in);
  int na = 0, number = 0;
  for (auto& t : r["tolerances"]) {
    if (t["dist"] == "large") {
      EXPECT_TRUE(t["rtol_only"].is_null()) << t.dump();
      EXPECT_EQ(t.value("rtol_only_note", "").rfind("n/a: an element with |expected| ", 0), 0u) << t.dump();
      ++na;
    } else {
      EXPECT_LT(t["rtol_only"].get<double>(), 1.0) << t.dump();  // a number where it means something
      ++number;
    }
  }
  EXPECT_EQ(na, 1);
  EXPECT_EQ(number, 1);
  std::ifstream h(d + "/report.html");
  const std::string html((std::istreambuf_iterator<char>(h)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("n/a<br><small>n/a: an element"), std::string::npos);
}

TEST(Cli, SummaryIsATriageViewFailuresFirstReadableCellsSortAndFilter) {
  const std::string d = tmpdir("triage");
  Out o = sh(KV_TESTBIN, "run --device host --op rms_norm.fwd --impl host --impl host.bug.drop_tail --dtype bf16 "
                         "--shape 3x300 --out " + d);
  EXPECT_EQ(o.code, 1) << o.text;  // the planted bug fails
  std::ifstream in(d + "/summary.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t first = html.find("<tr class='");
  ASSERT_NE(first, std::string::npos);
  EXPECT_EQ(html.compare(first, 20, "<tr class='fail'><td"), 0) << html.substr(first, 60);  // the host pass ran first
  EXPECT_NE(html.find("eps=<span title='0x1.0c6f7a0b5ed8dp-20'>1e-06</span>"), std::string::npos);
  EXPECT_NE(html.find("<td>w,x,y=bf16 rstd=fp32</td>"), std::string::npos);  // tensors grouped by dtype
  EXPECT_EQ(html.find("{&quot;"), std::string::npos);  // no raw JSON cell
  EXPECT_EQ(html.find("{\""), std::string::npos);
  EXPECT_NE(html.find("id='filter'"), std::string::npos);
  EXPECT_NE(html.find("rows.sort("), std::string::npos);
  // The report's headroom view: the failing group (inf) above the passing one.
  std::ifstream rin(d + "/report.html");
  const std::string rep((std::istreambuf_iterator<char>(rin)), std::istreambuf_iterator<char>());
  const size_t h = rep.find("<h2>Headroom</h2><details>");
  ASSERT_NE(h, std::string::npos);
  const size_t bad = rep.find("host.bug.drop_tail", h), good = rep.find("<td>host</td>", h);
  ASSERT_NE(bad, std::string::npos);
  ASSERT_NE(good, std::string::npos);
  EXPECT_LT(bad, good);
  EXPECT_NE(rep.find("<td class='fail'>inf</td><td><div class='bar'", h), std::string::npos);
}

TEST(Cli, PassingErrorsOfManyUlpsSayWhyUnderTheirChart) {
  // bf16 arithmetic stored to fp32 (mode none) and dx of a one-element row (dy w eps/(x^2 + eps):
  // cancellation) both pass with errors of 1e4+ ulps; the chart says which cause it is.
  auto report_of = [](const std::string& name, const std::string& sel) {
    const std::string d = tmpdir(name);
    EXPECT_EQ(sh(KV_BIN, "run --device host --quiet " + sel + " --out " + d).code, 0);
    std::ifstream in(d + "/report.html");
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string narrow = report_of("ulps_narrow", "--op rms_norm.fwd --shape 5x123 --dtype x:bf16,w:fp32,y:fp32,rstd:bf16 "
                                                      "--attrs mode=none");
  EXPECT_NE(narrow.find("the case computes in bf16 and stores to fp32"), std::string::npos);
  const std::string cancel = report_of("ulps_cancel", "--op rms_norm.bwd --shape 1x1 --dtype fp32");
  EXPECT_NE(cancel.find("is small against the terms of its sum (cancellation)"), std::string::npos);
  // A case whose errors are a few ulps gets no such caption.
  const std::string plain = report_of("ulps_plain", "--op softmax.fwd --shape 4x100 --dtype fp32");
  EXPECT_EQ(plain.find("the largest error inside its bound"), std::string::npos);
}

TEST(Cli, EmptyTensorRunsAndIsSkippedNeverPassed) {
  std::string d = tmpdir("empty");
  Out o = sh(KV_BIN, "run --op rms_norm.fwd --op rms_norm.bwd --shape 0x64 --dtype bf16 --out " + d);
  EXPECT_EQ(o.code, 0) << o.text;
  auto lines = kv::read_results(d + "/results.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  for (auto& j : lines) {
    EXPECT_EQ(j["verdict"], "skip");  // it ran (no crash, no out-of-bounds write) but checked nothing
    EXPECT_NE(j.value("reason", "").find("nothing to check"), std::string::npos);
  }
  EXPECT_TRUE(std::filesystem::exists(d + "/summary.html"));
}

TEST(Cli, ReplayReproducesTheSameOutputDigests) {
  std::string d = tmpdir("replay");
  Out o = sh(KV_BIN, "run --op rms_norm.bwd --shape 3x77 --dtype bf16 --config num_warps=2,dw=per_sm --out " + d);
  ASSERT_EQ(o.code, 0) << o.text;
  auto first = kv::read_results(d + "/results.jsonl").at(0);
  o = sh(KV_BIN, "replay '" + first["case"].get<std::string>() + "' --out " + d);
  ASSERT_EQ(o.code, 0) << o.text;
  auto lines = kv::read_results(d + "/results.jsonl");
  ASSERT_EQ(lines.size(), 2u);  // appended, nothing lost
  EXPECT_EQ(lines[1]["case"], first["case"]);
  EXPECT_EQ(lines[1]["inputs"], first["inputs"]);
  EXPECT_EQ(lines[1]["outputs"]["dw"]["digest"], first["outputs"]["dw"]["digest"]);
}

TEST(Cli, FailureExitsOneAndPrintsAReplayableCase) {
  std::string d = tmpdir("fail");
  Out o = sh(KV_TESTBIN, "run --op rms_norm.fwd --impl host.bug.write_nan --shape 2x64 --dtype fp32 --out " + d);
  EXPECT_EQ(o.code, 1) << o.text;
  auto j = kv::read_results(d + "/results.jsonl").at(0);
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_GE(j["outputs"]["y"]["n_nan_mismatch"].get<int>(), 1);
}

TEST(Cli, CrashAndHangAreContainedAndTheRunGoesOn) {
  std::string d = tmpdir("worker");
  std::ofstream(d + "/suite.json") << R"({"entries": [
    {"ops": ["rms_norm.fwd"], "impls": ["test.crash", "host", "test.hang", "host"], "shapes": ["2x32"], "seeds": [1]},
    {"ops": ["rms_norm.fwd"], "impls": ["host"], "shapes": ["2x33"], "seeds": [1]}]})";
  Out o = sh(KV_TESTBIN, "run --suite " + d + "/suite.json --timeout 3 --out " + d);
  EXPECT_EQ(o.code, 1) << o.text;
  auto lines = kv::read_results(d + "/results.jsonl");
  ASSERT_EQ(lines.size(), 4u) << o.text;  // duplicates of host are dropped
  EXPECT_EQ(lines[0]["verdict"], "error");
  EXPECT_NE(lines[0]["reason"].get<std::string>().find("worker crashed (signal 11"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1]["verdict"], "pass");
  EXPECT_EQ(lines[2]["verdict"], "error");
  EXPECT_NE(lines[2]["reason"].get<std::string>().find("watchdog"), std::string::npos) << lines[2];
  EXPECT_EQ(lines[3]["verdict"], "pass");
}

TEST(Cli, ListShowsOpsImplsKnobsAndContracts) {
  Out o = sh(KV_BIN, "list --json");
  ASSERT_EQ(o.code, 0);
  auto j = nlohmann::json::parse(o.text);
  std::set<std::string> ops;
  for (auto& op : j) {
    ops.insert(op["op"]);
    ASSERT_FALSE(op["impls"].empty());
    EXPECT_TRUE(op["impls"][0]["contract_example"]["contract"].contains("reductions"));
  }
  EXPECT_TRUE(ops.count("rms_norm.fwd") && ops.count("rms_norm.bwd"));
  EXPECT_EQ(o.text.find("host.bug"), std::string::npos);  // test-only impls stay hidden
}

TEST(Cli, ShardsPartitionTheCases) {
  std::string d = tmpdir("shard");
  std::string sel = "run --op rms_norm.fwd --dtype bf16 --dtype fp32 --shape 2x8 --shape 3x9 --config num_warps=1 "
                    "--config num_warps=2 --out ";
  ASSERT_EQ(sh(KV_BIN, sel + d + "/all").code, 0);
  ASSERT_EQ(sh(KV_BIN, sel + d + "/s0 --shard 0/3").code, 0);
  ASSERT_EQ(sh(KV_BIN, sel + d + "/s1 --shard 1/3").code, 0);
  ASSERT_EQ(sh(KV_BIN, sel + d + "/s2 --shard 2/3").code, 0);
  std::multiset<std::string> all, parts;
  for (auto& j : kv::read_results(d + "/all/results.jsonl")) all.insert(j["case"]);
  for (const char* s : {"/s0", "/s1", "/s2"})
    for (auto& j : kv::read_results(d + s + "/results.jsonl")) parts.insert(j["case"]);
  EXPECT_EQ(all.size(), 8u);
  EXPECT_EQ(parts, all);
  EXPECT_EQ(sh(KV_BIN, sel + d + "/bad --shard 3/3").code, 2);
}

TEST(Cli, ConfigsWithTheSameNumericsShareOneEnclosure) {
  // asc and desc orders declare the same contract: the second case reuses the enclosure.
  std::string d = tmpdir("encshare");
  Out o = sh(KV_BIN, "run --op rms_norm.fwd --dtype bf16 --shape 2x4096 --config num_warps=4,order=asc "
                     "--config num_warps=4,order=desc --config num_warps=8,order=asc --out " + d);
  ASSERT_EQ(o.code, 0) << o.text;
  auto lines = kv::read_results(d + "/results.jsonl");
  ASSERT_EQ(lines.size(), 3u);
  int reused = 0;
  for (auto& j : lines) {
    EXPECT_EQ(j["verdict"], "pass");
    reused += j["reference"]["enclosure_cached"].get<bool>() ? 1 : 0;
  }
  EXPECT_EQ(reused, 1);  // asc/desc share; num_warps=8 has its own n_eff
}

TEST(Cli, SanitizeSkipsVisiblyOnTheHostAndRejectsUnknownTools) {
  const std::string out = tmpdir("sanitize");
  Out o = sh(KV_BIN, "run --device host --op rms_norm.fwd --dtype bf16 --shape 4x64 --sanitize memcheck,initcheck --out " + out);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("sanitizer memcheck: skipped, the run's device is the host"), std::string::npos) << o.text;
  auto lines = kv::read_results(out + "/results.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0]["sanitizer"]["initcheck"].contains("skipped")) << lines[0]["sanitizer"].dump();
  expect_usage_error("run --op rms_norm.fwd --sanitize bogus --out " + out, "unknown tool 'bogus'");
}

TEST(Cli, SanitizerLogsOfEveryToolAreRead) {
  auto m = kv::parse_sanitizer_log("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 3 errors\n");
  EXPECT_EQ(m["errors"], 3);
  auto r = kv::parse_sanitizer_log("========= RACECHECK SUMMARY: 5 hazards displayed (2 errors, 3 warnings)\n");
  EXPECT_EQ(r["errors"], 2);
  EXPECT_EQ(r["warnings"], 3);
  auto one = kv::parse_sanitizer_log("========= ERROR SUMMARY: 1 error\n");
  EXPECT_EQ(one["errors"], 1);
  auto none = kv::parse_sanitizer_log("========= Error: Target application terminated before first instrumented API call\n");
  EXPECT_NE(none["skipped"].get<std::string>().find("terminated before first instrumented API call"), std::string::npos);
}

TEST(Cli, KvThreadsLimitsTheLoopsOrIsRefused) {
  const std::string dir = tmpdir("threads");
  // A worker's share of the cores (kverify fuzz --jobs-per-device sets it per worker).
  const Out ok = sh("KV_THREADS=1 " KV_BIN, "run --device host --op rms_norm.fwd --impl host --dtype fp32 --out " + dir);
  ASSERT_EQ(ok.code, 0) << ok.text;
  const auto lines = kv::read_results(dir + "/results.jsonl");
  ASSERT_FALSE(lines.empty());
  for (const auto& j : lines) EXPECT_EQ(j["host_threads"], 1) << j["case"];
  // Negative control: without it, the default (every core oneTBB sees; 2 where CI runs).
  const Out all = sh(KV_BIN, "run --device host --op rms_norm.fwd --impl host --dtype fp32 --out " + dir + "-all");
  ASSERT_EQ(all.code, 0) << all.text;
  EXPECT_EQ(kv::read_results(dir + "-all/results.jsonl").at(0)["host_threads"], tbb::info::default_concurrency());
  for (const char* bad : {"0", "-2", "two", "1x"}) {
    const Out o = sh(std::string("KV_THREADS=") + bad + " " KV_BIN, "run --device host --op rms_norm.fwd --out " + dir + "-bad");
    EXPECT_EQ(o.code, 2) << bad << "\n" << o.text;
    EXPECT_NE(o.text.find("KV_THREADS must be a thread count"), std::string::npos) << o.text;
  }
}
