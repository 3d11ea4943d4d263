// `kverify fuzz` and `kverify merge` end to end on the host device: the planted drop_tail
// bug is found and shrunk to its minimal case, a killed campaign resumes to the same
// results, a malformed results line stops a resume at its line, shards merge to the whole
// campaign, and a short campaign over every op passes.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "check/results.hpp"
#include "cli_util.hpp"
#include "core/case.hpp"
#include "core/registry.hpp"
#include "core/tensor.hpp"
#include "fuzz/devices.hpp"
#include "fuzz/space.hpp"

namespace {

using kvtest::Out;
using kvtest::sh;
using kvtest::tmpdir;

std::set<std::pair<std::string, std::string>> case_verdicts(const std::string& file) {
  std::set<std::pair<std::string, std::string>> out;
  for (auto& j : kv::read_results(file)) out.insert({j["case"].get<std::string>(), j["verdict"].get<std::string>()});
  return out;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

int64_t line_count(const std::string& path) {
  std::ifstream f(path);
  return std::count(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>(), '\n');
}

/// Starts bin with args (split at spaces) in the background; returns its pid.
pid_t spawn(const std::string& bin, const std::string& args) {
  std::vector<std::string> v = {bin};
  std::istringstream in(args);
  for (std::string a; in >> a;) v.push_back(a);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    dup2(null, 1);
    dup2(null, 2);
    std::vector<char*> argv;
    for (auto& s : v) argv.push_back(s.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST(FuzzCli, HelpListsTheOptions) {
  Out o = sh(KV_BIN, "fuzz --help");
  EXPECT_EQ(o.code, 0);
  for (const char* opt : {"--op", "--impl", "--budget-cases", "--budget-seconds", "--seed", "--out", "--resume", "--shard",
                          "--max-elements", "--curated", "--device", "--device-profile", "--timeout", "--plugin", "--worker",
                          "--devices", "--jobs-per-device", "--gpu-memory-budget", "--sanitize", "--sanitize-every"})
    EXPECT_NE(o.text.find(opt), std::string::npos) << opt << "\n" << o.text;
  EXPECT_EQ(sh(KV_BIN, "merge --help").code, 0);
}

TEST(FuzzCli, FindsTheDropTailBugAndShrinksItToOneMinimalRow) {
  std::string d = tmpdir("fuzz_droptail");
  Out o = sh(KV_TESTBIN, "fuzz --op rms_norm.fwd --impl host.bug.drop_tail --budget-cases 20 --seed 3 --curated none --out " + d);
  ASSERT_EQ(o.code, 1) << o.text;
  auto failures = kv::read_results(d + "/failures.jsonl");
  ASSERT_GE(failures.size(), 1u) << o.text;
  for (auto& f : failures) {
    kv::Case m = kv::Case::parse(f["case"].get<std::string>());
    std::printf("minimal: %s (%d runs)\n", m.str().c_str(), f["shrink"]["runs"].get<int>());
    EXPECT_TRUE(f["shrink"]["complete"].get<bool>());
    // One row of the smallest failing length for its num_warps: one element past a block.
    ASSERT_EQ(m.shape.size(), 2u);
    EXPECT_EQ(m.shape[0], 1);
    const int64_t lanes = 32 * m.config_int("num_warps", 4);
    EXPECT_EQ(m.shape[1], lanes + 1) << m.str();
    // Everything else at its simplest: only num_warps may stay off its default.
    EXPECT_EQ(kv::nondefault_count(m), lanes == 128 ? 0 : 1) << m.str();
    EXPECT_TRUE(std::filesystem::exists(f["repro"].get<std::string>() + "/tensors.safetensors"));
    // The replay line reproduces the failure.
    std::string replay = f["replay"].get<std::string>();
    ASSERT_EQ(replay.rfind("kverify replay '", 0), 0u) << replay;
    Out r = sh(KV_TESTBIN, replay.substr(8) + " --out " + d + "/replay");
    EXPECT_EQ(r.code, 1) << r.text;
    auto again = kv::read_results(d + "/replay/results.jsonl").back();
    EXPECT_EQ(again["case"], f["case"]);
    EXPECT_EQ(again["verdict"], "fail");
  }
}

TEST(FuzzCli, AKilledCampaignResumesToTheSameResults) {
  const std::string opts = " --op rms_norm.fwd --op softmax.fwd --impl host --impl host.bug.drop_tail --budget-cases 150 "
                           "--seed 11 --max-elements 20000 --out ";
  std::string a = tmpdir("fuzz_whole"), b = tmpdir("fuzz_killed");
  Out o = sh(KV_TESTBIN, "fuzz" + opts + a);
  ASSERT_EQ(o.code, 1) << o.text;  // drop_tail fails somewhere
  const auto whole = case_verdicts(a + "/results.jsonl");

  pid_t pid = spawn(KV_TESTBIN, "fuzz" + opts + b);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (line_count(b + "/results.jsonl") < 20 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const int64_t before = line_count(b + "/results.jsonl");
  EXPECT_LT(before, static_cast<int64_t>(whole.size())) << "the campaign finished before it was killed";

  o = sh(KV_TESTBIN, "fuzz --out " + b + " --resume");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_EQ(case_verdicts(b + "/results.jsonl"), whole);
  std::set<int64_t> seen;
  for (auto& j : kv::read_results(b + "/results.jsonl"))
    EXPECT_TRUE(seen.insert(j["fuzz"]["index"].get<int64_t>()).second) << "index run twice: " << j["fuzz"];
  std::multiset<std::string> fa, fb;
  for (auto& j : kv::read_results(a + "/failures.jsonl")) fa.insert(j["case"]);
  for (auto& j : kv::read_results(b + "/failures.jsonl")) fb.insert(j["case"]);
  EXPECT_EQ(fa, fb);
}

TEST(FuzzCli, AMalformedResultsLineStopsTheResumeAtItsLine) {
  std::string d = tmpdir("fuzz_malformed");
  ASSERT_EQ(sh(KV_BIN, "fuzz --op rms_norm.fwd --budget-cases 6 --seed 5 --curated none --out " + d).code, 0);
  const std::string file = d + "/results.jsonl";
  std::vector<std::string> lines;
  {
    std::ifstream f(file);
    for (std::string l; std::getline(f, l);) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 6u);
  lines[2] = lines[2].substr(0, lines[2].size() / 2);  // a line cut short
  {
    std::ofstream f(file);
    for (auto& l : lines) f << l << "\n";
  }
  const std::string before = slurp(file);
  Out o = sh(KV_BIN, "fuzz --out " + d + " --resume --budget-cases 12");
  EXPECT_NE(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("results.jsonl:3: malformed result line"), std::string::npos) << o.text;
  EXPECT_EQ(slurp(file), before);  // nothing lost, nothing added
}

TEST(FuzzCli, AnAppendCutShortByAKillIsSetAsideAndRerun) {
  const std::string opts = " --op rms_norm.fwd --budget-cases 6 --seed 5 --curated none --out ";
  std::string d = tmpdir("fuzz_partial");
  ASSERT_EQ(sh(KV_BIN, "fuzz" + opts + d + "/whole").code, 0);
  ASSERT_EQ(sh(KV_BIN, "fuzz" + opts + d + "/cut").code, 0);
  const std::string file = d + "/cut/results.jsonl", text = slurp(file);
  const size_t last = text.rfind('\n', text.size() - 2) + 1;
  std::ofstream(file, std::ios::trunc) << text.substr(0, last + (text.size() - last) / 2);  // no newline at the end
  Out o = sh(KV_BIN, "fuzz --out " + d + "/cut --resume");
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("incomplete line"), std::string::npos) << o.text;
  EXPECT_TRUE(std::filesystem::exists(file + ".partial"));
  EXPECT_EQ(case_verdicts(file), case_verdicts(d + "/whole/results.jsonl"));
}

TEST(FuzzCli, ShardsMergeToTheWholeCampaign) {
  const std::string opts = " --op softmax.fwd --op layer_norm.bwd --budget-cases 24 --seed 4 --max-elements 4096 --out ";
  std::string d = tmpdir("fuzz_shards");
  ASSERT_EQ(sh(KV_BIN, "fuzz" + opts + d + "/all").code, 0);
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(sh(KV_BIN, "fuzz" + opts + d + "/s" + std::to_string(i) + " --shard " + std::to_string(i) + "/3").code, 0);
  // Shard 0 given twice: its lines are dropped the second time.
  Out o = sh(KV_BIN, "merge " + d + "/merged.jsonl " + d + "/s0/results.jsonl " + d + "/s1/results.jsonl " + d +
                         "/s2/results.jsonl " + d + "/s0/results.jsonl");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(case_verdicts(d + "/merged.jsonl"), case_verdicts(d + "/all/results.jsonl"));
  EXPECT_EQ(kv::read_results(d + "/merged.jsonl").size(), kv::read_results(d + "/all/results.jsonl").size());
  EXPECT_EQ(sh(KV_BIN, "merge " + d + "/merged.jsonl " + d + "/s1/results.jsonl").code, 2);  // exists
  // A campaign directory stands for its results.jsonl; a path that holds none is exit 2, not
  // "merged 0 result lines" (what merging directories used to print, exit 0).
  o = sh(KV_BIN, "merge " + d + "/by_dir.jsonl " + d + "/s0 " + d + "/s1 " + d + "/s2");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(case_verdicts(d + "/by_dir.jsonl"), case_verdicts(d + "/all/results.jsonl"));
  o = sh(KV_BIN, "merge " + d + "/none.jsonl " + d + "/s0 " + d);
  EXPECT_EQ(o.code, 2) << o.text;
  EXPECT_NE(o.text.find("without results.jsonl"), std::string::npos) << o.text;
  o = sh(KV_BIN, "merge " + d + "/none.jsonl " + d + "/s9/results.jsonl");
  EXPECT_EQ(o.code, 2) << o.text;
  EXPECT_NE(o.text.find("does not exist"), std::string::npos) << o.text;
  EXPECT_FALSE(std::filesystem::exists(d + "/none.jsonl"));
}

TEST(FuzzCli, DevicesRunOneShardPerWorkerJoinedToTheWholeCampaign) {
  // On the host device `--devices 2` runs two workers; on a GPU host each would get its own
  // GPU. The joined results are the uninterrupted single-worker campaign's.
  const std::string opts = " --device host --op softmax.fwd --op rms_norm.bwd --budget-cases 30 --seed 6 --max-elements 4096 --out ";
  std::string d = tmpdir("fuzz_devices");
  ASSERT_EQ(sh(KV_BIN, "fuzz" + opts + d + "/one").code, 0);
  Out o = sh(KV_BIN, "fuzz" + opts + d + "/two --devices 2");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("[device-1]"), std::string::npos) << o.text;
  EXPECT_TRUE(std::filesystem::exists(d + "/two/device-1/results.jsonl"));
  EXPECT_EQ(case_verdicts(d + "/two/results.jsonl"), case_verdicts(d + "/one/results.jsonl"));
  EXPECT_EQ(kv::read_results(d + "/two/results.jsonl").size(), kv::read_results(d + "/one/results.jsonl").size());
  // Three workers on one device (--jobs-per-device) join to the same campaign too.
  o = sh(KV_BIN, "fuzz" + opts + d + "/jobs --jobs-per-device 3");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("[device-0.job-2]"), std::string::npos) << o.text;
  EXPECT_NE(o.text.find("joined: " + std::to_string(kv::read_results(d + "/one/results.jsonl").size()) + " cases"),
            std::string::npos)
      << o.text;
  EXPECT_EQ(case_verdicts(d + "/jobs/results.jsonl"), case_verdicts(d + "/one/results.jsonl"));
  EXPECT_EQ(sh(KV_BIN, "fuzz --device host --resume --out " + d + "/jobs --jobs-per-device 2").code, 2);  // other shards
  // Resumed with a larger budget, the workers go on from their shards.
  o = sh(KV_BIN, "fuzz --device host --resume --budget-cases 40 --out " + d + "/two --devices 2");
  ASSERT_EQ(o.code, 0) << o.text;
  ASSERT_EQ(sh(KV_BIN, "fuzz --device host --resume --budget-cases 40 --out " + d + "/one").code, 0);
  EXPECT_EQ(case_verdicts(d + "/two/results.jsonl"), case_verdicts(d + "/one/results.jsonl"));
  EXPECT_EQ(sh(KV_BIN, "fuzz" + opts + d + "/three --devices 0").code, 2);
  // An outer --shard (a Slurm array task) is split again among the workers: shard 1/2 on
  // two workers runs shards 1/4 and 3/4, which join to the single worker's shard 1/2.
  ASSERT_EQ(sh(KV_BIN, "fuzz" + opts + d + "/half --shard 1/2").code, 0);
  o = sh(KV_BIN, "fuzz" + opts + d + "/half2 --devices 2 --shard 1/2");
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("shard 3/4"), std::string::npos) << o.text;
  EXPECT_EQ(case_verdicts(d + "/half2/results.jsonl"), case_verdicts(d + "/half/results.jsonl"));
  EXPECT_EQ(sh(KV_BIN, "fuzz" + opts + d + "/four --devices 2 --shard 2/2").code, 2);
}

TEST(FuzzCli, WorkersTakeTheNthOfTheGpusASchedulerHandedThem) {
  EXPECT_EQ(kv::visible_device("2,3", 0), "2");
  EXPECT_EQ(kv::visible_device("2,3", 1), "3");
  EXPECT_EQ(kv::visible_device("GPU-ab12,GPU-cd34", 1), "GPU-cd34");
  EXPECT_EQ(kv::visible_device(nullptr, 1), "1");
  EXPECT_EQ(kv::visible_device("", 0), "0");
}

TEST(FuzzCli, AGpuMemoryBudgetRejectsCasesWhoseTensorsExceedIt) {
  // 4096 elements of fp32 x and y are 32 KiB: a 16 KiB budget rejects the large draws,
  // never runs them, and keeps every run case within it.
  std::string d = tmpdir("fuzz_membudget");
  Out o = sh(KV_BIN, "fuzz --device host --op softmax.fwd --budget-cases 40 --seed 8 --max-elements 4096 "
                     "--gpu-memory-budget 16KiB --curated none --out " + d);
  ASSERT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find("over --gpu-memory-budget 16KiB"), std::string::npos) << o.text;
  for (auto& j : kv::read_results(d + "/results.jsonl")) {
    int64_t bytes = 0;
    for (auto& [name, t] : j["dtypes"].items())
      bytes += kv::numel(j["shape"].get<std::vector<int64_t>>()) * (t == "fp32" ? 4 : 2);
    EXPECT_LE(bytes, 16 * 1024) << j["case"];
  }
  EXPECT_EQ(sh(KV_BIN, "fuzz --device host --op softmax.fwd --gpu-memory-budget 12XB --out " + d + "/bad").code, 2);
}

TEST(FuzzCli, ABatchDependentImplBreaksItsBatchInvarianceClaim) {
  // test.batch_dependent passes every case alone but sums rows in an order set by the
  // number of rows: every 8th generated case is rerun beside a companion with more rows.
  std::string d = tmpdir("fuzz_batch");
  Out o = sh(KV_TESTBIN, "fuzz --device host --op rms_norm.fwd --impl test.batch_dependent --budget-cases 64 --seed 12 "
                         "--max-elements 8192 --curated none --out " + d);
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("batch invariance"), std::string::npos) << o.text;
  int checked = 0, broken = 0;
  for (auto& j : kv::read_results(d + "/results.jsonl")) {
    if (!j.contains("batch_invariance")) continue;
    ++checked;
    broken += !j["batch_invariance"]["violations"].empty();
  }
  EXPECT_GE(checked, 4);
  EXPECT_GT(broken, 0);
  // Each failure's replay reruns the pair (tests/cli/test_replay.cpp runs them).
  for (auto& f : kv::read_results(d + "/failures.jsonl")) {
    EXPECT_NE(f["replay"].get<std::string>().find("--batch-extra-rows"), std::string::npos) << f.dump();
    EXPECT_EQ(f["class"], "rstd:claim_batch_invariant") << f.dump();
  }
  // The real host impl keeps its claim on the same campaign.
  Out h = sh(KV_TESTBIN, "fuzz --device host --op rms_norm.fwd --impl host --budget-cases 64 --seed 12 "
                         "--max-elements 8192 --curated none --out " + d + "/host");
  EXPECT_EQ(h.code, 0) << h.text;
}

TEST(FuzzCli, ShrinkingKeepsAFailuresClass) {
  // test.two_bugs writes NaN below N = 64 and scales y from 64 on: a failure found at a
  // long row would shrink to one of length 1 if any failure of y were the same failure.
  const std::string d = tmpdir("fuzz_classes");
  Out o = sh(KV_TESTBIN, "fuzz --device host --op rms_norm.fwd --impl test.two_bugs --budget-cases 12 --seed 21 "
                         "--max-elements 8192 --curated none --out " + d);
  EXPECT_EQ(o.code, 1) << o.text;
  std::set<std::string> classes;
  for (auto& f : kv::read_results(d + "/failures.jsonl")) {
    const std::string cls = f["class"];
    classes.insert(cls);
    EXPECT_EQ(cls, f["original"]["class"]) << f.dump();
    kv::Case m = kv::Case::parse(f["case"].get<std::string>()), first = kv::Case::parse(f["original"]["case"].get<std::string>());
    EXPECT_EQ(m.shape.back() >= 64, first.shape.back() >= 64) << f.dump();
    if (cls == "y:out_of_enclosure") {
      EXPECT_EQ(m.shape.back(), 64) << m.str();  // the shortest row of that bug
    } else {
      EXPECT_EQ(m.shape.back(), 1) << m.str();
    }
  }
  // Both bugs were met, so the property above was put to the test.
  EXPECT_EQ(classes, (std::set<std::string>{"y:nan", "y:out_of_enclosure"})) << o.text;
  // The end of the campaign lists every failure by class.
  EXPECT_NE(o.text.find(" in 2 classes:\n  "), std::string::npos) << o.text;
}

TEST(FuzzCli, AMultiWorkerCampaignPrintsEveryFailureByClass) {
  // The workers print their failures into their own logs: the parent lists them all, with
  // their reasons and replay lines, from the joined failures.jsonl.
  const std::string d = tmpdir("fuzz_devices_failures");
  Out o = sh(KV_TESTBIN, "fuzz --device host --devices 2 --op rms_norm.fwd --impl test.two_bugs --budget-cases 12 "
                         "--seed 21 --max-elements 8192 --curated none --out " + d);
  EXPECT_EQ(o.code, 1) << o.text;
  auto failures = kv::read_results(d + "/failures.jsonl");
  ASSERT_GE(failures.size(), 2u) << o.text;
  const size_t listed = o.text.find("failures in ");
  ASSERT_NE(listed, std::string::npos) << o.text;
  for (auto& f : failures) {
    EXPECT_NE(o.text.find("  " + f["class"].get<std::string>() + ": ", listed), std::string::npos) << f["class"];
    EXPECT_NE(o.text.find(f["reason"].get<std::string>(), listed), std::string::npos) << f["reason"];
    EXPECT_NE(o.text.find(f["replay"].get<std::string>(), listed), std::string::npos) << f["replay"];
  }
}

TEST(FuzzCli, UsageErrorsExitTwo) {
  std::string d = tmpdir("fuzz_usage");
  EXPECT_EQ(sh(KV_BIN, "fuzz --out " + d + "/x").code, 2);                             // no --op
  EXPECT_EQ(sh(KV_BIN, "fuzz --op nope --out " + d + "/y").code, 2);                   // unknown op
  EXPECT_EQ(sh(KV_BIN, "fuzz --op softmax.fwd --shard 3/3 --out " + d + "/z").code, 2);  // bad shard
  ASSERT_EQ(sh(KV_BIN, "fuzz --op softmax.fwd --budget-cases 2 --seed 1 --out " + d + "/c").code, 0);
  Out o = sh(KV_BIN, "fuzz --op softmax.fwd --budget-cases 2 --out " + d + "/c");
  EXPECT_EQ(o.code, 2);  // a campaign is there: --resume or another --out
  EXPECT_NE(o.text.find("--resume"), std::string::npos) << o.text;
  o = sh(KV_BIN, "fuzz --out " + d + "/c --resume --seed 2");
  EXPECT_EQ(o.code, 2);
  EXPECT_NE(o.text.find("--seed differs"), std::string::npos) << o.text;
}

TEST(FuzzCli, AShortCampaignOverEveryOpPassesOnTheHost) {
  // The host impls are correct: a failure here is a finding, with its shrunk replay line.
  std::string d = tmpdir("fuzz_all");
  Out o = sh(KV_BIN, "fuzz --op all --budget-cases 170 --seed 2024 --max-elements 4096 --out " + d);
  EXPECT_EQ(o.code, 0) << o.text;
  std::set<std::string> ops;
  int curated = 0;
  for (auto& j : kv::read_results(d + "/results.jsonl")) {
    ops.insert(j["op"]);
    curated += j["fuzz"]["tier"] == "curated";
    EXPECT_TRUE(j["verdict"] == "pass" || j["verdict"] == "unverifiable") << j["case"] << ": " << j.value("reason", "");
  }
  EXPECT_EQ(ops.size(), kv::registry().ops().size());
  EXPECT_GE(curated, 5);
}
