// External impls end to end, through the kverify binary: the example plugin's host path
// and the Python worker's pure-Python impls pass; a wrong-impl worker fails; a plugin of
// another ABI version, a worker of another protocol version, and a worker that crashes,
// hangs or answers garbage each give `error` with the reason while the run goes on.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <tuple>
#include <nlohmann/json.hpp>

#include "check/results.hpp"
#include "cli_util.hpp"

namespace {

using kvtest::Out;
using kvtest::sh;

std::string worker(const std::string& impls, const std::string& extra = "") {
  return "--worker 'python3 " KV_SOURCE_DIR "/examples/worker/kv_worker.py " + impls + extra + "'";
}

std::vector<nlohmann::json> results(const std::string& dir) { return kv::read_results(dir + "/results.jsonl", ""); }

/// Verdicts in run order, by impl.
std::vector<std::string> verdicts(const std::vector<nlohmann::json>& rs, const std::string& impl) {
  std::vector<std::string> v;
  for (auto& r : rs)
    if (r["impl"] == impl) v.push_back(r["verdict"].get<std::string>());
  return v;
}

std::string reasons(const std::vector<nlohmann::json>& rs) {
  std::string s;
  for (auto& r : rs)
    if (r.contains("reason")) s += r["reason"].get<std::string>() + "\n";
  return s;
}

/// `kverify run` with the Python worker serving `impls`, and its result lines.
std::vector<nlohmann::json> run_with_worker(const std::string& tag, const std::string& impls, const std::string& args, Out& o) {
  const std::string out = kvtest::tmpdir(tag);
  o = sh(KV_BIN, "run " + worker(impls) + " " + args + " --out " + out);
  return results(out);
}

}  // namespace

TEST(External, PythonWorkerImplsPassAndAWrongOneFails) {
  const std::string out = kvtest::tmpdir("worker_ok");
  Out o = sh(KV_BIN, "run " + worker("--impl py=pure_impls:rms_norm_fwd --impl bad=pure_impls:rms_norm_fwd_bad") +
                         " --op rms_norm.fwd --impl py --impl bad --dtype fp32 --dtype bf16 --dtype fp16"
                         " --shape 3x37 --shape 2x64 --out " + out);
  auto rs = results(out);
  ASSERT_EQ(rs.size(), 12u) << o.text;
  for (auto& v : verdicts(rs, "py")) EXPECT_EQ(v, "pass") << o.text;
  for (auto& v : verdicts(rs, "bad")) EXPECT_EQ(v, "fail") << o.text;
  EXPECT_EQ(o.code, 1);
  // The contract came from the worker, per case: a serial row of N terms.
  for (auto& r : rs)
    if (r["impl"] == "py") EXPECT_EQ(r["contract"]["reductions"]["row"]["serial"], r["shape"].back()) << r.dump();
}

TEST(External, AWorkerContractsRoundingSitesReachTheReference) {
  Out o;
  auto rs = run_with_worker("worker_sites", "--impl py=pure_impls:softmax_bwd --impl bad=pure_impls:softmax_bwd_unrounded",
                            "--op softmax.bwd --impl py --impl bad --dtype fp32 --shape 3x37 --shape 2x200", o);
  ASSERT_EQ(rs.size(), 4u) << o.text;
  for (auto& v : verdicts(rs, "py")) EXPECT_EQ(v, "pass") << o.text;
  for (auto& v : verdicts(rs, "bad")) EXPECT_EQ(v, "fail") << o.text;  // declared, not done
  for (auto& r : rs) EXPECT_EQ(r["contract"]["rounding_sites"]["softmax.bwd_dy_y"], "bf16") << r.dump();
}

TEST(External, AWorkerImplDeclaresWhatItAcceptsAndOtherCasesAreDeclined) {
  Out o;
  auto rs = run_with_worker("worker_accepts", "--impl py=pure_impls:softmax_bwd",
                            "--op softmax.bwd --impl py --dtype fp32 --dtype bf16 --dtype fp16 --shape 2x40", o);
  ASSERT_EQ(rs.size(), 3u) << o.text;
  EXPECT_EQ(o.code, 0) << o.text;
  int skipped = 0;
  for (auto& r : rs) {
    if (r["dtype"] == "fp32") {
      EXPECT_EQ(r["verdict"], "pass") << r.dump();
      continue;
    }
    EXPECT_EQ(r["verdict"], "skip") << r.dump();
    EXPECT_NE(r.value("reason", "").find("declined by py: it accepts dtypes fp32, not"), std::string::npos) << r["reason"];
    ++skipped;
  }
  EXPECT_EQ(skipped, 2);
}

// dtypes per tensor: a bf16 rms_norm impl names x and y alone, so its fp32 rstd is not
// declined (a plain dtypes list would hold rstd to bf16 too); fp32 x is declined; a tensor
// the op does not have is an error.
TEST(External, AcceptsCanNameDtypesPerTensor) {
  const std::string dir = kvtest::tmpdir("worker_per_tensor");
  for (auto [name, dt] : {std::pair{"ok", "{'x': ['bf16'], 'y': ['bf16']}"}, std::pair{"typo", "{'X': ['bf16']}"}})
    std::ofstream(dir + "/pt_" + name + ".py")
        << "from kv_worker import impl\nimport pure_impls\n"
        << "@impl(op='rms_norm.fwd', device='host', contract=pure_impls.rms_contract, accepts={'dtypes': " << dt << "})\n"
        << "def f(t, case):\n    return pure_impls._rms_fwd(t, case)\n";
  auto w = [&](const char* m) {
    return "--worker 'env PYTHONPATH=" + dir + ":" KV_SOURCE_DIR "/examples/worker python3 " KV_SOURCE_DIR
           "/examples/worker/kv_worker.py --impl p=pt_" + std::string(m) + ":f'";
  };
  Out o = sh(KV_BIN, "run " + w("ok") + " --op rms_norm.fwd --impl p --dtype bf16 --dtype fp32 --shape 2x40 --attrs mode=llama --out " +
                         dir + "/ok");
  EXPECT_EQ(o.code, 0) << o.text;
  int pass = 0, declined = 0;
  for (auto& r : results(dir + "/ok")) {
    pass += r["verdict"] == "pass";
    declined += r["verdict"] == "skip" && r.value("reason", "").find("it accepts dtypes bf16 for x, not fp32") != std::string::npos;
  }
  EXPECT_EQ(pass, 1) << o.text;
  EXPECT_EQ(declined, 1) << o.text;
  o = sh(KV_BIN, "run " + w("typo") + " --op rms_norm.fwd --impl p --dtype bf16 --shape 2x40 --out " + dir + "/typo");
  EXPECT_NE(o.code, 0);
  for (auto& r : results(dir + "/typo"))
    EXPECT_NE(r.value("reason", "").find("accepts.dtypes: rms_norm.fwd has no tensor 'X'"), std::string::npos) << r.dump();
}

// softmax_bwd accepts fp32 contiguous tensors only: fuzz draws nothing else, so no draw is
// declined and the budget is all cases that ran.
TEST(External, FuzzDrawsOnlyWhatAWorkerImplAccepts) {
  const std::string d = kvtest::tmpdir("worker_fuzz_accepts");
  Out o = sh(KV_BIN, "fuzz " + worker("--impl py=pure_impls:softmax_bwd") + " --device host --op softmax.bwd --impl py"
                         " --budget-cases 8 --seed 3 --curated none --max-elements 2048 --out " + d);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_NE(o.text.find(" 0 rejected"), std::string::npos) << o.text;
  const auto rs = results(d);
  ASSERT_EQ(rs.size(), 8u) << o.text;
  for (auto& r : rs) {
    EXPECT_EQ(r["verdict"], "pass") << r.dump();
    for (auto& [t, dt] : r["dtypes"].items()) EXPECT_EQ(dt, "fp32") << t << ": " << r.dump();
    EXPECT_EQ(r["case"].get<std::string>().find(" layout="), std::string::npos) << r.dump();
    EXPECT_EQ(r["case"].get<std::string>().find(" alias="), std::string::npos) << r.dump();
  }
}

TEST(External, AMalformedAcceptsMakesTheWorkerUnusable) {
  const std::string dir = kvtest::tmpdir("worker_bad_accepts");
  for (auto [name, accepts, says] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"fp8", "{'dtypes': ['fp8']}", "accepts.dtypes: \"fp8\" is not one of the values"},
           {"attr", "{'attrs': {'no_such': ['x']}}", "accepts.attrs: softmax.fwd has no attribute 'no_such'"},
           {"field", "{'shapes': []}", "accepts: unknown field 'shapes'"},
           {"empty", "{'dtypes': []}", "accepts.dtypes is empty: the impl would accept nothing"}}) {
    std::ofstream(dir + "/bad_" + name + ".py")
        << "from kv_worker import impl\n"
        << "@impl(op='softmax.fwd', device='host', contract={'acc': 'fp32', 'math_ulps': {'exp': 1}}, accepts=" << accepts
        << ")\n"
        << "def f(t, case):\n    raise RuntimeError('never called')\n";
    const std::string w = "--worker 'env PYTHONPATH=" + dir + " python3 " KV_SOURCE_DIR
                          "/examples/worker/kv_worker.py --impl b=bad_" + name + ":f'";
    Out o = sh(KV_BIN, "run " + w + " --op softmax.fwd --impl b --shape 2x8 --out " + dir + "/" + name);
    EXPECT_NE(o.code, 0) << o.text;
    const auto rs = results(dir + "/" + name);
    ASSERT_FALSE(rs.empty()) << o.text;
    for (auto& r : rs) {
      EXPECT_EQ(r["verdict"], "error") << r.dump();
      EXPECT_NE(r.value("reason", "").find(says), std::string::npos) << name << ": " << r.value("reason", "");
    }
  }
}

// A fuzz campaign whose every draw the impl declines checked nothing: exit 1, saying so.
TEST(External, AFuzzCampaignThatRanNoCaseFails) {
  const std::string dir = kvtest::tmpdir("worker_declines_all");
  std::ofstream(dir + "/never.py") << "from kv_worker import impl, Unsupported\n"
                                   << "def c(case):\n    raise Unsupported('declines every case')\n"
                                   << "@impl(op='softmax.fwd', device='host', contract=c)\n"
                                   << "def f(t, case):\n    raise RuntimeError('never called')\n";
  const std::string w = "--worker 'env PYTHONPATH=" + dir + " python3 " KV_SOURCE_DIR
                        "/examples/worker/kv_worker.py --impl n=never:f'";
  Out o = sh(KV_BIN, "fuzz " + w + " --op softmax.fwd --impl n --budget-cases 4 --seed 5 --curated none --max-elements 2048 --out " +
                         dir + "/out");
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("no case ran: all"), std::string::npos) << o.text;
}

TEST(External, ExamplePluginHostPathPasses) {
  const std::string out = kvtest::tmpdir("plugin_ok");
  Out o = sh(KV_BIN, "run --plugin " KV_EXAMPLE_PLUGIN " --op rms_norm.fwd --impl plugin_host --dtype fp32 --dtype bf16"
                     " --dtype fp16 --shape 4x100 --shape 3x4097 --attrs mode=llama --out " + out);
  EXPECT_EQ(o.code, 0) << o.text;
  auto rs = results(out);
  ASSERT_EQ(rs.size(), 6u) << o.text;
  for (auto& v : verdicts(rs, "plugin_host")) EXPECT_EQ(v, "pass") << o.text;
  Out g = sh(KV_BIN, "run --plugin " KV_EXAMPLE_PLUGIN " --op rms_norm.fwd --impl plugin_host --dtype bf16"
                     " --shape 5x123 --attrs mode=gemma,offset=1 --out " + out);
  EXPECT_EQ(g.code, 0) << g.text;
  // A case the plugin declines is a listed skip with the plugin's reason, worded as a
  // decline (not as a device fault); the rest of the selection runs.
  const std::string dn = kvtest::tmpdir("plugin_declines");
  Out n = sh(KV_BIN, "run --plugin " KV_EXAMPLE_PLUGIN " --op rms_norm.fwd --impl host --impl plugin_host --dtype bf16"
                     " --shape 5x123 --attrs mode=none --out " + dn);
  EXPECT_EQ(n.code, 0) << n.text;
  auto nr = results(dn);
  ASSERT_EQ(nr.size(), 2u) << n.text;
  std::string declined;
  for (auto& r : nr) {
    if (r["impl"] == "host") {
      EXPECT_EQ(r["verdict"], "pass") << r.dump();
      continue;
    }
    EXPECT_EQ(r["verdict"], "skip") << r.dump();
    // Declined by kverify from the plugin's accepts, before any contract() call.
    EXPECT_EQ(r.value("reason", ""), "declined by plugin_host: it accepts mode gemma, llama, not none") << r.dump();
    declined = r.value("case", "");
  }
  // Replaying that one case alone is a usage error with the same words.
  // (--plugin before the case: it takes one value, the case stays the positional.)
  Out rp = sh(KV_BIN, "replay --device host --plugin " KV_EXAMPLE_PLUGIN " '" + declined + "' --out " + dn + "/replay");
  EXPECT_EQ(rp.code, 2) << rp.text;
  EXPECT_NE(rp.text.find("declined by plugin_host: "), std::string::npos) << rp.text;
  // `list` shows the plugin's impls with their contracts.
  Out l = sh(KV_BIN, "list --plugin " KV_EXAMPLE_PLUGIN);
  EXPECT_EQ(l.code, 0) << l.text;
  EXPECT_NE(l.text.find("impl plugin_host (host)"), std::string::npos) << l.text;
}

// rms_old (tests/ext/accepts_plugin.c) declares no accepts and declines every dtype but
// fp32 from contract(): each index draws again until a case runs, so the budget counts
// cases that ran, and the declines are named as such. (The same arithmetic declaring what
// it accepts draws no declined case: PluginAccepts.FuzzDrawsOnlyWhatTheImplAccepts.)
TEST(External, FuzzBudgetCountsCasesThatRun) {
  const std::string d = kvtest::tmpdir("plugin_fuzz_budget");
  Out o = sh(KV_BIN, "fuzz --plugin " KV_ACCEPTS_PLUGIN " --device host --op rms_norm.fwd --impl rms_old"
                     " --budget-cases 12 --seed 3 --curated none --max-elements 4096 --out " + d);
  EXPECT_EQ(o.code, 0) << o.text;
  EXPECT_EQ(results(d).size(), 12u) << o.text;
  EXPECT_NE(o.text.find("declined by rms_old, e.g. "), std::string::npos) << o.text;
  EXPECT_EQ(o.text.find("rejected by the device"), std::string::npos) << o.text;
}

TEST(External, WrongAbiPluginIsAnErrorAndTheRunGoesOn) {
  const std::string out = kvtest::tmpdir("plugin_abi");
  Out o = sh(KV_BIN, "run --plugin " KV_BAD_ABI_PLUGIN " --op rms_norm.fwd --impl host --impl plugin_host --dtype bf16"
                     " --shape 4x64 --out " + out);
  EXPECT_EQ(o.code, 1) << o.text;
  EXPECT_NE(o.text.find("built for plugin ABI version 2, this kverify speaks version 1"), std::string::npos) << o.text;
  auto rs = results(out);
  ASSERT_EQ(rs.size(), 2u) << o.text;
  EXPECT_EQ(verdicts(rs, "host"), std::vector<std::string>{"pass"});
  EXPECT_EQ(verdicts(rs, "plugin_host"), std::vector<std::string>{"error"});
  EXPECT_NE(reasons(rs).find("ABI version 2"), std::string::npos) << reasons(rs);
  Out m = sh(KV_BIN, "run --plugin /nonexistent/libx.so --op rms_norm.fwd --impl host --dtype bf16 --shape 4x64 --out " + out);
  EXPECT_EQ(m.code, 1) << m.text;
  EXPECT_NE(m.text.find("no such file"), std::string::npos) << m.text;
}

TEST(External, WrongProtocolWorkerIsAnErrorAndTheRunGoesOn) {
  const std::string out = kvtest::tmpdir("worker_proto");
  Out o = sh(KV_BIN, "run " + worker("--impl py=pure_impls:rms_norm_fwd", " --speak-protocol 2") +
                         " --op rms_norm.fwd --impl host --impl py --dtype bf16 --shape 4x64 --out " + out);
  EXPECT_EQ(o.code, 1) << o.text;
  auto rs = results(out);
  ASSERT_EQ(rs.size(), 2u) << o.text;
  EXPECT_EQ(verdicts(rs, "host"), std::vector<std::string>{"pass"});
  EXPECT_EQ(verdicts(rs, "py"), std::vector<std::string>{"error"});
  EXPECT_NE(reasons(rs).find("worker speaks protocol 2, kverify speaks protocol 1"), std::string::npos) << reasons(rs);
}

/// A worker that misbehaves on its 2nd run request: that case is `error` with the reason,
/// the worker is restarted (its count starts again), and the cases after it pass.
void misbehaving_worker(const std::string& flag, const std::string& needle) {
  const std::string out = kvtest::tmpdir("worker_" + flag);
  Out o = sh(KV_BIN, "run " + worker("--impl py=pure_impls:rms_norm_fwd", " --" + flag + "-on-run 2") +
                         " --worker-timeout 3 --op rms_norm.fwd --impl py --dtype bf16 --shape 4x64"
                         " --seed 1 --seed 2 --seed 3 --out " + out);
  EXPECT_EQ(o.code, 1) << o.text;
  auto rs = results(out);
  ASSERT_EQ(rs.size(), 3u) << o.text;
  EXPECT_EQ(verdicts(rs, "py"), (std::vector<std::string>{"pass", "error", "pass"})) << o.text;
  EXPECT_NE(reasons(rs).find(needle), std::string::npos) << reasons(rs);
  EXPECT_NE(reasons(rs).find("restarted"), std::string::npos) << reasons(rs);
}

TEST(External, CrashingWorkerIsAnErrorAndRestarted) { misbehaving_worker("crash", "worker exited during the run request"); }
TEST(External, HangingWorkerIsAnErrorAndRestarted) { misbehaving_worker("hang", "watchdog: no answer to the run request within 3 s"); }
TEST(External, GarbageAnsweringWorkerIsAnErrorAndRestarted) { misbehaving_worker("garbage", "answered malformed JSON"); }
