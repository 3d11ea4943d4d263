// Replay lines end to end: each one kverify writes (results, case.json, failures.jsonl, the
// reports) is one shell command that reruns the case with what it needs (the plugin, the
// worker, the device and its profile) and fails the same way; a batch-invariance failure's
// reruns the case beside its companion.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "check/replay.hpp"
#include "check/results.hpp"
#include "cli_util.hpp"

namespace {

namespace fs = std::filesystem;
using kvtest::Out;
using kvtest::sh;

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// Runs a replay line as written (kvtest::sh_as_printed); its exit code and result line.
std::pair<Out, nlohmann::json> run_verbatim(const std::string& line, const std::string& dir, const std::string& bin) {
  Out o = kvtest::sh_as_printed(line, dir, bin);
  nlohmann::json last;
  if (fs::exists(dir + "/out/results.jsonl")) last = kv::read_results(dir + "/out/results.jsonl").back();
  return {o, last};
}

/// The single repro bundle's case.json under out/repro.
nlohmann::json bundle_case(const std::string& out) {
  for (auto& e : fs::directory_iterator(out + "/repro"))
    if (fs::exists(e.path() / "case.json")) return read_json((e.path() / "case.json").string());
  return {};
}

}  // namespace

TEST(Replay, ShellQuotingRoundTrips) {
  for (const std::string s : {"plain", "two words", "it's", "'", "a'b'c", "$HOME `x` \"q\"", ""}) {
    Out o = sh("printf %s", kv::shell_quote(s));
    EXPECT_EQ(o.text, s) << kv::shell_quote(s);
  }
}

TEST(Replay, APluginCasesReplayLineRerunsItAndFailsTheSameWay) {
  const std::string d = kvtest::tmpdir("replay_plugin");
  Out o = sh(KV_BIN, "run --plugin " KV_NAN_PLUGIN " --op rms_norm.fwd --impl plugin_nan --dtype fp32 --shape 4x64 --out " +
                         d + "/run");
  ASSERT_EQ(o.code, 1) << o.text;
  const auto first = kv::read_results(d + "/run/results.jsonl").back();
  ASSERT_EQ(first["verdict"], "fail") << first.dump();
  const nlohmann::json cj = bundle_case(d + "/run");
  const std::string line = cj.value("replay", "");
  EXPECT_NE(line.find("--plugin " KV_NAN_PLUGIN), std::string::npos) << line;
  EXPECT_EQ(line, first["replay"]);  // one builder: the result line says the same
  auto [r, again] = run_verbatim(line, d + "/verbatim", KV_BIN);
  EXPECT_EQ(r.code, 1) << line << "\n" << r.text;
  EXPECT_EQ(again.value("case", ""), first["case"]);
  EXPECT_EQ(again.value("reason", ""), first["reason"]);
  // The reports print it too.
  Out rep = sh(KV_BIN, "report --results " + d + "/run/results.jsonl --out " + d + "/report");
  EXPECT_EQ(rep.code, 0) << rep.text;
  EXPECT_EQ(read_json(d + "/report/report.json")["failures"][0]["replay"], line);
  // A campaign's failures.jsonl: its shrunk case replays verbatim, failing the same way (the
  // plugin takes fp32 contiguous llama cases only: most draws are rejected).
  Out f = sh(KV_BIN, "fuzz --plugin " KV_NAN_PLUGIN " --device host --op rms_norm.fwd --impl plugin_nan --budget-cases 40 "
                     "--seed 1 --curated none --max-elements 4096 --out " + d + "/fuzz");
  ASSERT_EQ(f.code, 1) << f.text;
  auto failures = kv::read_results(d + "/fuzz/failures.jsonl");
  ASSERT_FALSE(failures.empty()) << f.text;
  auto [fr, fagain] = run_verbatim(failures[0]["replay"], d + "/fuzz_verbatim", KV_BIN);
  EXPECT_EQ(fr.code, 1) << failures[0]["replay"] << "\n" << fr.text;
  EXPECT_EQ(fagain.value("reason", ""), failures[0]["reason"]);
}

TEST(Replay, AWorkerCasesReplayLineRerunsItAndFailsTheSameWay) {
  const std::string d = kvtest::tmpdir("replay_worker");
  const std::string cmd = "python3 " KV_SOURCE_DIR "/examples/worker/kv_worker.py --impl bad=pure_impls:rms_norm_fwd_bad";
  Out o = sh(KV_BIN, "run --worker " + kv::shell_quote(cmd) + " --worker-timeout 60 --op rms_norm.fwd --impl bad "
                     "--dtype fp32 --shape 3x37 --out " + d + "/run");
  ASSERT_EQ(o.code, 1) << o.text;
  const auto first = kv::read_results(d + "/run/results.jsonl").back();
  ASSERT_EQ(first["verdict"], "fail") << first.dump();
  const std::string line = bundle_case(d + "/run").value("replay", "");
  EXPECT_NE(line.find("--worker " + kv::shell_quote(cmd)), std::string::npos) << line;
  EXPECT_NE(line.find("--worker-timeout 60"), std::string::npos) << line;
  auto [r, again] = run_verbatim(line, d + "/verbatim", KV_BIN);
  EXPECT_EQ(r.code, 1) << line << "\n" << r.text;
  EXPECT_EQ(again.value("case", ""), first["case"]);
  EXPECT_EQ(again.value("reason", ""), first["reason"]);
  EXPECT_EQ(again.value("replay", ""), line);
}

TEST(Replay, ABatchInvarianceFailureReplaysThePairAndLeavesABundle) {
  // test.batch_dependent passes every case alone; the campaign's batch check breaks its
  // claim, and the failure's replay line reruns the case beside its companion.
  const std::string d = kvtest::tmpdir("replay_batch");
  Out o = sh(KV_TESTBIN, "fuzz --device host --op rms_norm.fwd --impl test.batch_dependent --budget-cases 64 --seed 12 "
                         "--max-elements 8192 --curated none --out " + d + "/fuzz");
  ASSERT_EQ(o.code, 1) << o.text;
  auto failures = kv::read_results(d + "/fuzz/failures.jsonl");
  ASSERT_FALSE(failures.empty()) << o.text;
  for (auto& f : failures) {
    const std::string line = f["replay"];
    EXPECT_NE(line.find("--batch-extra-rows "), std::string::npos) << line;
    EXPECT_NE(o.text.find(line), std::string::npos) << "printed on screen: " << line;
    // The bundle: the result line with the same replay, both runs' outputs.
    const std::string repro = f["repro"];
    EXPECT_EQ(read_json(repro + "/case.json")["replay"], line);
    EXPECT_TRUE(fs::exists(repro + "/outputs.safetensors"));
    EXPECT_TRUE(fs::exists(repro + "/companion.safetensors"));
    auto [r, again] = run_verbatim(line, d + "/verbatim", KV_TESTBIN);
    EXPECT_EQ(r.code, 1) << line << "\n" << r.text;
    EXPECT_EQ(again.value("reason", ""), f["reason"]);  // the same elements of the same rows
    EXPECT_TRUE(fs::exists(again.value("repro", "") + "/companion.safetensors")) << again.dump();
    // The honest host impl on the same pair keeps its claim.
    std::string host = line;
    host.replace(host.find("impl=test.batch_dependent"), 25, "impl=host");
    auto [h, hl] = run_verbatim(host, d + "/host", KV_TESTBIN);
    EXPECT_EQ(h.code, 0) << host << "\n" << h.text;
    EXPECT_TRUE(hl["batch_invariance"]["violations"].empty()) << hl.dump();
  }
}

TEST(Replay, AMeanLossGradientMakesNoBatchClaimAndASumsKeepsIt) {
  // cross_entropy.bwd divides by the batch's count of rows under mean: no claim, so the
  // pair is not compared; under sum the rows are independent and their bits hold.
  const std::string d = kvtest::tmpdir("replay_ce");
  const std::string c = "kv1 op=cross_entropy.bwd impl=host shape=9x40 dist=normal seed=3 gen=1 attrs=reduction:";
  Out mean = sh(KV_BIN, "replay '" + c + "mean' --batch-extra-rows 3 --out " + d);
  EXPECT_EQ(mean.code, 0) << mean.text;
  EXPECT_NE(mean.text.find("no output claims batch_invariant"), std::string::npos) << mean.text;
  Out sum = sh(KV_BIN, "replay '" + c + "sum' --batch-extra-rows 3 --out " + d);
  EXPECT_EQ(sum.code, 0) << sum.text;
  EXPECT_NE(sum.text.find("batch invariance of dlogits at 12 rows: 0 elements differ"), std::string::npos) << sum.text;
  EXPECT_EQ(sh(KV_BIN, "replay '" + c + "sum' --batch-extra-rows 0 --out " + d).code, 2);
}
