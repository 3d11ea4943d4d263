// Subcommands. Cases are validated here, in the parent, so bad input exits 2 before
// anything runs; each case then runs in the worker process.
#include "cli/commands.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <algorithm>
#include <random>
#include <cmath>
#include <unistd.h>

#include "check/gate.hpp"
#include "check/results.hpp"
#include "cli/batch_check.hpp"
#include "cli/common.hpp"
#include "cli/drift.hpp"
#include "cli/fuzz.hpp"
#include "cli/report.hpp"
#include "run/suite.hpp"
#include "run/supervisor.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "ext/extensions.hpp"
#include "ext/plugin_probe.hpp"
#include "kv_default_suite.hpp"
#include "kv_standard_suite.hpp"
#include "render/summary.hpp"
#ifdef KV_HAVE_CUDA
#include "device/calibrate.hpp"
#include "device/calibrate_mma.hpp"
#include "device/cuda_device.hpp"
#endif

namespace kv {

// add_common and what follows to load_extensions are shared with fuzz (cli/common.hpp).
CLI::Validator seed_check() {
  return CLI::Validator(
      [](std::string& s) {
        try {
          parse_seed(s);
          return std::string();
        } catch (const UsageError& e) {
          return std::string(e.what());
        }
      },
      "SEED");
}

CLI::Validator seconds_check() {
  return CLI::Validator(
      [](std::string& s) {
        try {
          const double v = parse_real(s, "number of seconds");
          return std::isfinite(v) && v > 0 ? std::string() : "seconds must be a finite number above 0, not '" + s + "'";
        } catch (const UsageError& e) {
          return std::string(e.what());
        }
      },
      "SECONDS");
}

void make_out_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || access(dir.c_str(), W_OK | X_OK) != 0)
    throw UsageError("cannot write to output directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));
}

void add_extension_options(CLI::App* app, ExtensionOptions& o) {
  app->add_option("--plugin", o.plugins, "a plugin (.so) registering impls (repeatable; include/kverify/plugin.h)");
  app->add_option("--worker", o.worker, "an external worker command, started once (examples/worker/PROTOCOL.md)");
  app->add_option("--worker-timeout", o.worker_timeout_s, "watchdog seconds per worker request (default 300)")
      ->check(seconds_check());
  app->add_option("--plugin-timeout", o.plugin_timeout_s,
                  "watchdog seconds for loading a plugin and for each contract() answer of it (default 60)")
      ->check(seconds_check());
}

void add_common(CLI::App* app, Common& c) {
  app->add_option("--device", c.device, "cuda|host (default: cuda when a GPU is present, else host)")
      ->check(CLI::IsMember({"auto", "cuda", "host"}));
  app->add_option("--device-profile", c.profile, "override launch-relevant device facts, e.g. sm_count=108,warp_size=64");
  app->add_option("--timeout", c.timeout_s, "watchdog seconds per case (the worker is killed and restarted; default 600)")
      ->check(seconds_check());
  app->add_option("--out", c.out, "output directory (results.jsonl is appended to; summary.html)");
  add_extension_options(app, c.ext);
}

void add_sanitize_options(CLI::App* app, Common& c) {
  app->add_option("--sanitize", c.sanitize.tools,
                  "re-run a sample of the cases under compute-sanitizer tools: memcheck,racecheck,initcheck,synccheck")
      ->delimiter(',');
  app->add_option("--sanitize-every", c.sanitize.every,
                  "sample every k-th case (default " + std::to_string(c.sanitize.every) + "; the first included)")
      ->check(CLI::PositiveNumber);
}

RunEnv make_env(const Common& c) {
  RunEnv env;
  std::string kind = c.device;
#ifdef KV_HAVE_CUDA
  std::string why;
  if (kind == "auto") kind = cuda_device_count(&why) > 0 ? "cuda" : "host";
  if (kind == "cuda") {
    if (cuda_device_count(&why) == 0) throw UsageError("--device cuda: no usable GPU (" + why + ")");
    env.device = cuda_device(0);
  } else {
    env.device = host_device();
  }
#else
  if (kind == "auto") kind = "host";
  if (kind == "cuda") throw UsageError("this build has no CUDA support (configure with -DKVERIFY_CUDA=ON)");
  env.device = host_device();
#endif
  env.device.profile.apply_overrides(c.profile);
  for (auto& p : c.ext.plugins) env.sources.plugins.push_back(std::filesystem::absolute(p).string());
  env.sources.worker = c.ext.worker;
  if (!c.ext.worker.empty() && c.ext.worker_timeout_s != ExtensionOptions{}.worker_timeout_s)
    env.sources.worker_timeout_s = c.ext.worker_timeout_s;
  auto now = std::chrono::system_clock::now().time_since_epoch();
  std::random_device rd;
  env.run_id = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count()) + "-" +
               hex64((static_cast<uint64_t>(rd()) << 32) | rd()).substr(8);
  return env;
}

std::vector<std::string> worker_args(const Common& c, const RunEnv& env, const Extensions& ext) {
  std::vector<std::string> a = {"__worker", "--device", env.device.kind, "--run-id", env.run_id, "--repro-dir",
                                (std::filesystem::absolute(c.out) / "repro").string()};
  if (!c.profile.empty()) a.insert(a.end(), {"--device-profile", c.profile});
  if (!env.sources.empty()) a.insert(a.end(), {"--impl-sources", env.sources.to_json().dump()});
  for (auto& x : ext.worker_args()) a.push_back(x);
  return a;
}

/// Loads the run's plugins and starts its worker; says on stderr what could not be used.
std::unique_ptr<Extensions> load_extensions(const Common& c, const RunEnv& env) {
  auto ext = std::make_unique<Extensions>(c.ext, c.out, env.device);
  for (auto& f : ext->failures()) std::cerr << "kverify: " << f.source << " unusable, its cases will be errors: " << f.reason << "\n";
  return ext;
}

namespace {

/// Validates a case against the device before it is queued: invalid configs are usage
/// errors. An impl that cannot even answer (a crashed worker) reports it when the case runs.
void check_runnable(const Case& c, const RunEnv& env) {
  const Impl& impl = registry().impl(c.op, c.impl);
  std::optional<std::string> why;
  try {
    why = impl.invalid_reason(c, env.device.profile);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception&) {
    return;
  }
  if (why) throw UsageError("invalid config: " + *why);
}

std::string brief(const nlohmann::json& j) {
  std::string s = j.value("verdict", "?");
  s.resize(13, ' ');
  s += j.value("op", "") + " " + j.value("impl", "") + " " + j.value("dtype", "") + " ";
  if (j.contains("shape")) {
    std::string sh;
    for (auto& d : j["shape"]) append_sep(sh, "x", std::to_string(d.get<int64_t>()));
    s += sh;
  }
  if (j.contains("attrs") && j["attrs"].contains("mode")) s += " " + j["attrs"]["mode"].get<std::string>();
  if (j.contains("config"))
    for (auto& [k, v] : j["config"].items()) s += " " + k + "=" + v.get<std::string>();
  if (j.contains("reason")) s += "  -- " + j["reason"].get<std::string>();
  return s;
}

/// Cases sharing an input identity next to each other (groups in order of first
/// appearance), and within a group those whose contracts declare the same numerics, so
/// the worker generates inputs, references and enclosures once for each.
std::vector<Case> group_by_input(const std::vector<Case>& cases, const DeviceProfile& profile) {
  std::map<uint64_t, size_t> first;
  std::map<std::string, uint64_t> numerics;
  for (size_t i = 0; i < cases.size(); ++i) {
    first.emplace(cases[i].input_id(), i);
    try {
      const Impl& im = registry().impl(cases[i].op, cases[i].impl);
      numerics[cases[i].str()] = im.contract(cases[i], profile).numerics_hash();
    } catch (const std::exception&) {
      numerics[cases[i].str()] = 0;  // the case reports its own error when it runs
    }
  }
  std::vector<Case> out = cases;
  std::stable_sort(out.begin(), out.end(), [&](const Case& a, const Case& b) {
    size_t fa = first[a.input_id()], fb = first[b.input_id()];
    if (fa != fb) return fa < fb;
    return numerics[a.str()] < numerics[b.str()];
  });
  return out;
}

/// Shard i of n: a contiguous slice of the grouped cases (so input groups stay whole
/// but at the slice edges), the same on every machine.
std::vector<Case> shard_of(const std::vector<Case>& cases, const std::string& spec) {
  if (spec.empty()) return cases;
  auto slash = spec.find('/');
  if (slash == std::string::npos) throw UsageError("malformed --shard '" + spec + "' (expected i/N)");
  int64_t i = parse_int(spec.substr(0, slash), "shard index"), n = parse_int(spec.substr(slash + 1), "shard count");
  if (n < 1 || i < 0 || i >= n) throw UsageError("--shard " + spec + ": need 0 <= i < N");
  const int64_t total = static_cast<int64_t>(cases.size());
  return std::vector<Case>(cases.begin() + total * i / n, cases.begin() + total * (i + 1) / n);
}

/// Case strings already in the results file (any verdict, any run): `run --resume` skips
/// them. Their latest lines join this run's in the summary and report.
std::map<std::string, nlohmann::json> finished_cases(const std::string& results) {
  std::map<std::string, nlohmann::json> done;
  if (!std::filesystem::exists(results)) return done;
  int64_t skipped = 0;  // a malformed line's case simply runs again
  for (auto& j : read_results_skipping(results, "", skipped)) done[j["case"].get<std::string>()] = j;
  return done;
}

/// Runs cases through the worker, appending each result as it finishes. SIGINT/SIGTERM
/// abandon the case in flight; the summary and report then cover what finished.
int run_cases(const std::vector<Case>& in, const Common& c, const RunEnv& env, bool quiet, Extensions& ext) {
  const std::vector<Case> cases = shard_of(group_by_input(in, env.device.profile), c.shard);
  make_out_dir(c.out);
  std::string results = (std::filesystem::path(c.out) / "results.jsonl").string();
  ResultsWriter w(results);  // a partial last line (a killed run) is set aside first
  const auto done = c.resume ? finished_cases(results) : std::map<std::string, nlohmann::json>{};
  Supervisor sup(worker_args(c, env, ext), c.timeout_s);
  if (ext.has_worker()) sup.set_relay([&ext](const nlohmann::json& req) { return ext.relay(req); });
  std::map<std::string, int64_t> counts;
  std::vector<nlohmann::json> resumed;
  size_t i = 0;
  int64_t sanitizer_found = 0;
  int stopped = 0;
  install_stop_handlers();
  try {
    for (auto& cs : cases) {
      if (stop_signal()) throw Interrupted{stop_signal()};
      ++i;
      if (auto it = done.find(cs.str()); it != done.end()) {
        resumed.push_back(it->second);
        ++counts[it->second.value("verdict", "error")];
        continue;
      }
      auto why = unavailable_reason(registry().impl(cs.op, cs.impl));
      auto j = why ? error_result(cs, env, *why) : sup.run(cs, env);
      if (!why && !c.sanitize.tools.empty() && (i - 1) % static_cast<size_t>(c.sanitize.every) == 0) {
        j["sanitizer"] = sanitize_case(cs, env, worker_args(c, env, ext), c.timeout_s, c.sanitize.tools,
                                       (std::filesystem::path(c.out) / "sanitizer").string());
        const int64_t n = sanitizer_errors(j["sanitizer"]);
        sanitizer_found += n;
        for (auto& [t, r] : j["sanitizer"].items())
          if (r.contains("skipped") || r.value("errors", int64_t(0)) > 0)
            std::cout << "  sanitizer " << t << ": "
                      << (r.contains("skipped") ? "skipped, " + r["skipped"].get<std::string>()
                                                : std::to_string(r["errors"].get<int64_t>()) + " errors, " + r["log"].get<std::string>())
                      << "  (" << cs.str() << ")\n";
      }
      w.append(j);
      ++counts[j.value("verdict", "error")];
      const bool bad = j.value("verdict", "") == "fail" || j.value("verdict", "") == "error";
      if (!quiet || bad) std::cout << "[" << i << "/" << cases.size() << "] " << brief(j) << "\n";
      if (bad) std::cout << "    " << j.value("replay", "") << "\n";  // the whole command, --plugin/--worker included
      std::cout << std::flush;
    }
  } catch (const Interrupted& e) {
    stopped = e.signal;
  }
  std::string html = (std::filesystem::path(c.out) / "summary.html").string();
  int64_t skipped = 0;
  auto lines = read_results_skipping(results, env.run_id, skipped);
  lines.insert(lines.begin(), resumed.begin(), resumed.end());
  write_summary_html(html, lines, env.run_id);
  const std::string report = write_report_files(c.out, lines, {}, 2.0,
                                                "kverify run " + env.run_id + " on " + env.device.name, {results});
  int64_t finished = 0;
  for (auto& [k, v] : counts) finished += v;
  std::cout << "run " << env.run_id << ": " << cases.size() << " cases";
  for (auto& [k, v] : counts) std::cout << ", " << v << " " << k;
  if (!resumed.empty()) std::cout << " (" << resumed.size() << " finished earlier, resumed)";
  if (!c.sanitize.tools.empty()) std::cout << ", " << sanitizer_found << " sanitizer errors";
  std::cout << "\nresults: " << results << "\nsummary: " << html << "\nreport: " << report << " (with report.json, junit.xml)\n";
  if (stopped) {
    std::cout << "interrupted by " << stop_signal_name(stopped) << ": " << finished << " of " << cases.size()
              << " cases finished (the one in flight abandoned); continue with the same command and --resume\n";
    return Interrupted{stopped}.exit_code();
  }
  // A plugin or worker that could not be used fails the run even if none of its cases ran.
  return (counts["fail"] + counts["error"]) > 0 || sanitizer_found > 0 || !ext.failures().empty() ? 1 : 0;
}

int cmd_list(bool json_out) {
  const Registry& reg = registry();
  nlohmann::json j = nlohmann::json::array();
  for (auto* op : reg.ops()) {
    nlohmann::json o = {{"op", op->name()}, {"dists", op->dists()}};
    nlohmann::json attrs = nlohmann::json::array();
    for (auto& a : op->attrs()) attrs.push_back({{"name", a.name}, {"default", a.def}, {"choices", a.choices}});
    o["attrs"] = attrs;
    nlohmann::json impls = nlohmann::json::array();
    for (auto* im : reg.impls(op->name())) {
      if (im->test_only()) continue;
      nlohmann::json knobs = nlohmann::json::object();
      for (auto& k : im->knobs()) knobs[k.name] = k.values;
      Case sample;
      sample.op = op->name();
      sample.impl = im->name();
      sample.shape = op->example_shape();
      sample.dtypes["x"] = DType::bf16;
      nlohmann::json example = {{"case", ""}};
      try {  // an external impl may not support the sample case, or not answer
        reg.normalize(sample);
        example["case"] = sample.str();
        example["contract"] = im->contract(sample, host_device().profile).to_json();
      } catch (const std::exception& e) {
        example["error"] = e.what();
      }
      impls.push_back({{"impl", im->name()}, {"device", im->device()}, {"version", im->version()}, {"knobs", knobs}, {"contract_example", example}});
    }
    o["impls"] = impls;
    j.push_back(o);
  }
  if (json_out) {
    std::cout << j.dump(2) << "\n";
    return 0;
  }
  for (auto& o : j) {
    std::cout << o["op"].get<std::string>() << "\n  attrs:";
    for (auto& a : o["attrs"]) {
      std::cout << " " << a["name"].get<std::string>();
      if (!a["choices"].empty()) {
        std::string ch;
        for (auto& c : a["choices"]) {
          if (!ch.empty()) ch += '|';
          ch += c.get<std::string>();
        }
        std::cout << "=" << ch;
      }
    }
    std::cout << "\n";
    for (auto& im : o["impls"]) {
      std::cout << "  impl " << im["impl"].get<std::string>() << " (" << im["device"].get<std::string>() << ")\n";
      for (auto& [k, v] : im["knobs"].items()) {
        std::string vals;
        for (auto& x : v) append_sep(vals, "|", x.get<std::string>());
        std::cout << "    " << k << " = " << vals << "\n";
      }
      const auto& ex = im["contract_example"];
      if (ex.contains("contract"))
        std::cout << "    contract at " << ex["case"].get<std::string>() << ":\n      " << ex["contract"].dump() << "\n";
      else
        std::cout << "    contract: " << ex["error"].get<std::string>() << "\n";
    }
  }
  return 0;
}

}  // namespace

int kverify_main(int argc, char** argv) {
  CLI::App app{"kverify: verify GPU kernels against certified high-precision references"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all");

  bool list_json = false;
  Common lc;
  auto* list = app.add_subcommand("list", "ops, impls, their valid configs and contracts");
  list->add_flag("--json", list_json, "machine-readable output");
  add_extension_options(list, lc.ext);

  Common rc;
  std::vector<std::string> ops, impls, dtypes, shapes, dists, configs;
  std::vector<uint64_t> seeds;
  std::string attrs, suite;
  bool quiet = false;
  auto* run = app.add_subcommand("run", "run cases (with no selection: suites/standard.json on a GPU, suites/host-default.json on the host)");
  add_common(run, rc);
  add_sanitize_options(run, rc);
  run->add_option("--op", ops, "op, e.g. rms_norm.fwd (repeatable)");
  run->add_option("--impl", impls, "impl name (default: every impl of the op on the device)");
  run->add_option("--dtype", dtypes, "fp32|fp16|bf16, or per tensor x:bf16,w:fp32 (repeatable)");
  run->add_option("--shape", shapes, "e.g. 5x123x123 (repeatable)");
  run->add_option("--config", configs, "knobs, e.g. num_warps=8,dw=fixed_partials (repeatable)");
  run->add_option("--attrs", attrs, "op attributes, e.g. mode=gemma,eps=1e-5,offset=1");
  run->add_option("--dist", dists, "value distribution (normal, uniform, tiny, large, mean_shift, wide)");
  run->add_option("--seed", seeds, "seed (repeatable)")->check(seed_check());
  run->add_option("--suite", suite, "a suite file (JSON) instead of the selection options");
  run->add_flag("--quiet", quiet, "print only failures and the totals");
  run->add_option("--shard", rc.shard, "run shard i of N (i/N): a fixed slice of the cases, input groups kept together");
  run->add_flag("--resume", rc.resume, "skip the cases that already have a line in --out's results.jsonl (any verdict)");

  std::string sum_results, sum_out = "out/summary.html", sum_run;
  auto* summary = app.add_subcommand("summary", "render the HTML summary of a results file");
  summary->add_option("--results", sum_results, "results file (JSON Lines)")->required();
  summary->add_option("--run-id", sum_run, "only this run (default: every line)");
  summary->add_option("--out", sum_out, "HTML file to write");

  std::string gate_base, gate_results, gate_run;
  auto* gatec = app.add_subcommand("gate", "a kernel change against a baseline: exit 1 on a new failure, a broken "
                                           "determinism claim, or a p99 error ratio grown more than 2x");
  gatec->add_option("--baseline", gate_base, "the baseline results file (same GPU type, previous build)")->required();
  gatec->add_option("--results", gate_results, "the new results file")->required();
  gatec->add_option("--run-id", gate_run, "only this run of the new results file");

  Common pc;
  std::string replay_case;
  auto* replay = app.add_subcommand("replay", "rerun one case from its one-line string");
  add_common(replay, pc);
  add_sanitize_options(replay, pc);
  replay->add_option("case", replay_case, "the case string (kv1 op=... )")->required();
  int64_t replay_batch_rows = 0;
  replay->add_option("--batch-extra-rows", replay_batch_rows,
                     "also run the case with N more leading rows and hold its batch_invariant claims to the shared rows' bits")
      ->check(CLI::PositiveNumber);

  Common cc;
  std::string calib_out = "out/calibration.json";
  auto* calib = app.add_subcommand("calibrate-math", "measure the GPU's math-function ulp errors (exhaustive fp32)");
  calib->add_option("--device", cc.device, "cuda (the default when a GPU is present)");
  calib->add_option("--out", calib_out, "where to write the calibration JSON");

  Common mc;
  std::string mma_out = "out/calibration-mma.json";
  auto* mma = app.add_subcommand("calibrate-mma", "probe how the GPU's tensor-core products (cuBLAS bf16 -> fp32) round and block their sums");
  mma->add_option("--device", mc.device, "cuda (the default when a GPU is present)");
  mma->add_option("--out", mma_out, "where to write the probe JSON");

  FuzzCommand fz;
  auto* fuzzc = add_fuzz_command(app, fz);
  DriftCommand dr;
  auto* driftc = add_drift_command(app, dr);
  MergeCommand mg;
  auto* mergec = add_merge_command(app, mg);
  ReportCommand rp;
  auto* reportc = add_report_command(app, rp);
  CompareCommand cp;
  auto* comparec = add_compare_command(app, cp);

  Common wc;
  std::string worker_run_id;
  auto* worker = app.add_subcommand("__worker", "internal: the worker process");
  worker->group("");
  worker->add_option("--device", wc.device);
  worker->add_option("--device-profile", wc.profile);
  worker->add_option("--run-id", worker_run_id);
  std::string worker_repro, worker_outputs;
  worker->add_option("--repro-dir", worker_repro);
  worker->add_option("--outputs-dir", worker_outputs);
  std::vector<std::string> worker_plugins;
  std::string worker_external;
  worker->add_option("--plugin", worker_plugins);
  worker->add_option("--external", worker_external);
  std::string worker_sources;
  worker->add_option("--impl-sources", worker_sources);

  std::string probe_plugin;
  auto* probe = app.add_subcommand("__plugin-probe", "internal: loads one plugin and answers contract questions");
  probe->group("");
  probe->add_option("plugin", probe_plugin)->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "kverify: " << e.what() << "\n";
    return 2;
  }

  try {
    if (*list) {
      RunEnv env = make_env(lc);
      auto ext = load_extensions(lc, env);
      int rc = cmd_list(list_json);
      return ext->failures().empty() ? rc : 1;
    }
    if (*gatec) {
      auto base = read_results(gate_base), now = read_results(gate_results, gate_run);
      if (now.empty()) throw UsageError("no result lines in " + gate_results + (gate_run.empty() ? "" : " for run " + gate_run));
      auto causes = gate(base, now);
      for (auto& c : causes) std::cout << c.kind << ": " << c.detail << "\n    " << c.replay << "\n";
      std::cout << "gate: " << now.size() << " result lines against " << base.size() << " baseline lines: "
                << (causes.empty() ? "pass" : std::to_string(causes.size()) + " causes") << "\n";
      return causes.empty() ? 0 : 1;
    }
    if (*summary) {
      int64_t skipped = 0;
      auto lines = read_results_skipping(sum_results, sum_run, skipped);
      write_summary_html(sum_out, lines, sum_run.empty() ? "all runs in " + sum_results : sum_run);
      std::cout << "summary: " << sum_out << " (" << lines.size() << " cases";
      if (skipped) std::cout << ", " << skipped << " malformed lines skipped";
      std::cout << ")\n";
      return skipped ? 1 : 0;
    }
    if (*worker) {
      RunEnv env = make_env(wc);
      env.run_id = worker_run_id;
      env.repro_dir = worker_repro;
      env.outputs_dir = worker_outputs;
      if (!worker_sources.empty()) env.sources = ImplSources::from_json(nlohmann::json::parse(worker_sources));
#ifdef KV_HAVE_CUDA
      // Contracts are held to what this GPU's math functions measurably do.
      if (env.device.kind == "cuda") env.measured_ulps = calibrate_math().max_ulps;
#endif
      return worker_main(env, [&](FILE* to_parent) { load_extensions_in_worker(worker_plugins, worker_external, to_parent); });
    }
    if (*probe) return plugin_probe_main(probe_plugin);
    if (*calib) {
#ifdef KV_HAVE_CUDA
      RunEnv env = make_env(cc);
      if (env.device.kind != "cuda") throw UsageError("calibrate-math needs a GPU (--device cuda)");
      MathCalibration m = calibrate_math();
      nlohmann::json j = {{"schema", 1}, {"device", env.device.to_json()}, {"build", build_info()},
                          {"max_ulps", m.max_ulps}, {"functions", m.detail}};
      std::filesystem::path p(calib_out);
      if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
      std::ofstream(calib_out) << j.dump(2) << "\n";
      std::cout << j.dump(2) << "\n";
      return 0;
#else
      throw UsageError("calibrate-math needs a CUDA build (configure with -DKVERIFY_CUDA=ON)");
#endif
    }
    if (*mma) {
#ifdef KV_HAVE_CUDA
      RunEnv env = make_env(mc);
      if (env.device.kind != "cuda") throw UsageError("calibrate-mma needs a GPU (--device cuda)");
      nlohmann::json j = {{"schema", 1}, {"device", env.device.to_json()}, {"build", build_info()}, {"probe", calibrate_mma()}};
      std::filesystem::path p(mma_out);
      if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
      std::ofstream(mma_out) << j.dump(2) << "\n";
      std::cout << j.dump(2) << "\n";
      return 0;
#else
      throw UsageError("calibrate-mma needs a CUDA build (configure with -DKVERIFY_CUDA=ON)");
#endif
    }
    if (*fuzzc) {
      for (int i = 1; i < argc; ++i)
        if (std::string(argv[i]) == "fuzz") {
          fz.args.assign(argv + i + 1, argv + argc);
          break;
        }
      return run_fuzz_command(fz);
    }
    if (*driftc) return run_drift_command(dr);
    if (*mergec) return run_merge_command(mg);
    if (*reportc) return run_report_command(rp);
    if (*comparec) return run_compare_command(cp);
    if (*replay) {
      check_sanitize_tools(pc.sanitize.tools);
      RunEnv env = make_env(pc);
      Case c = Case::parse(replay_case);
      auto ext = load_extensions(pc, env);
      ext->register_stand_ins({c.op}, {c.impl}, env.device.kind);
      registry().normalize(c);
      check_runnable(c, env);
      if (replay_batch_rows > 0) return replay_batch(c, replay_batch_rows, pc, env, *ext);
      return run_cases({c}, pc, env, false, *ext);
    }
    if (*run) {
      check_sanitize_tools(rc.sanitize.tools);
      RunEnv env = make_env(rc);
      auto ext = load_extensions(rc, env);
      std::vector<SuiteEntry> entries;
      bool selection = !ops.empty() || !impls.empty() || !dtypes.empty() || !shapes.empty() || !configs.empty() ||
                       !attrs.empty() || !dists.empty() || !seeds.empty();
      if (!suite.empty() && selection) throw UsageError("--suite cannot be combined with selection options");
      if (!suite.empty()) {
        entries = load_suite(suite);
      } else if (!selection) {
        // The main job: the standard suite on a GPU, the host suite elsewhere.
        entries = env.device.kind == "cuda" ? parse_suite(kStandardSuiteJson, "the standard suite")
                                            : parse_suite(kDefaultSuiteJson, "the default suite");
      } else {
        if (ops.empty()) throw UsageError("--op is required with selection options");
        ext->register_stand_ins(ops, impls, env.device.kind);
        SuiteEntry e;
        e.ops = ops;
        e.impls = impls;
        e.dtypes = dtypes.empty() ? std::vector<std::string>{"fp32", "fp16", "bf16"} : dtypes;
        e.shapes = shapes.empty() ? std::vector<std::string>{"4x1536"} : shapes;
        if (!dists.empty()) e.dists = dists;
        if (!seeds.empty()) e.seeds = seeds;
        if (!attrs.empty())
          for (auto& [k, v] : parse_kv_list(attrs, "attrs")) e.attrs[k] = {v};
        std::vector<Case> cases;
        // Each --config is one configuration; its knobs must all be valid for the impl.
        std::vector<std::string> cfgs = configs.empty() ? std::vector<std::string>{""} : configs;
        for (auto& cfg : cfgs) {
          SuiteEntry one = e;
          one.configs.clear();
          auto picked = cfg.empty() ? std::map<std::string, std::string>{} : parse_kv_list(cfg, "config");
          for (auto& [k, v] : picked) one.configs[k] = {v};
          auto part = expand_suite({one}, env.device.kind);
          for (auto& c : part) {
            for (auto& [k, v] : picked)
              if (!c.config.count(k))
                throw UsageError("invalid config: impl " + c.impl + " has no knob '" + k + "'");
            check_runnable(c, env);
            cases.push_back(c);
          }
        }
        if (cases.empty()) throw UsageError("the selection gives no cases (no impl of the op on device " + env.device.kind + ")");
        return run_cases(cases, rc, env, quiet, *ext);
      }
      auto cases = expand_suite(entries, env.device.kind);
      return run_cases(cases, rc, env, quiet, *ext);
    }
  } catch (const UsageError& e) {
    std::cerr << "kverify: " << e.what() << "\n";
    return 2;
  } catch (const Interrupted& e) {  // before any case finished (loading, validation)
    std::cerr << "kverify: interrupted by " << stop_signal_name(e.signal) << " before any case finished\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    std::cerr << "kverify: " << e.what() << "\n";
    return 1;
  }
  return 2;
}

}  // namespace kv
