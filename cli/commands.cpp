// kverify's main: the command table, one row per subcommand (each in cli/cmd_<name>.cpp),
// and the dispatch through it with the exit codes of commands.hpp. Cases are validated in
// this process, so bad input exits 2 before anything runs; each case then runs in the
// worker process.
#include "cli/commands.hpp"

#include <iostream>
#include <optional>
#include <string_view>

#include "cli/command.hpp"
#include "core/case.hpp"
#include "core/error.hpp"
#include "core/threads.hpp"
#include "core/child_io.hpp"
#include "run/runner.hpp"
#ifdef KV_HAVE_CUDA
#include "device/cuda_device.hpp"
#endif

namespace kv {

const std::vector<Command>& command_table() {
  static const std::vector<Command> table = {
      {"list", "ops, impls, their valid configs and contracts", setup_list, run_list},
      {"run", "run cases (with no selection: suites/standard.json on a GPU, suites/host-default.json on the host)",
       setup_run, run_run},
      {"summary", "render the HTML summary of a results file", setup_summary, run_summary},
      {"gate",
       "a kernel change against a baseline: exit 1 on a new failure, a broken determinism claim, or a p99 error ratio "
       "grown more than 2x",
       setup_gate, run_gate},
      {"replay", "rerun one case from its one-line string", setup_replay, run_replay},
      {"calibrate-math", "measure the GPU's math-function ulp errors (exhaustive fp32)", setup_calibrate_math,
       run_calibrate_math},
      {"calibrate-mma", "probe how the GPU's tensor-core products (cuBLAS bf16 -> fp32) round and block their sums",
       setup_calibrate_mma, run_calibrate_mma},
      {"fuzz",
       "a fuzz campaign: curated worst cases, then generated cases (RapidCheck) with failures shrunk to a minimal case; "
       "resumable and shardable",
       setup_fuzz, run_fuzz},
      {"drift",
       "one impl on one input across every valid config, repeated, and under a forecast device profile: which bits "
       "change, by how many ulps, against its claims",
       setup_drift, run_drift},
      {"merge", "join result files of campaign shards into a new file (lines deduplicated by campaign seed and index)",
       setup_merge, run_merge},
      {"report",
       "the tolerance report of results files: report.html (self-contained, charts inlined), report.json and junit.xml",
       setup_report, run_report},
      {"compare", "two reports side by side (two GPUs, or two builds): compare.html and compare.json", setup_compare,
       run_compare},
      {"audit",
       "measure the reduction shapes an impl really uses (masking probes, per reduced axis) against its contract: exit 1 "
       "where the contract understates them",
       setup_audit, run_audit},
      {"__worker", "internal: the worker process", setup_worker, run_worker},
      {"__plugin-probe", "internal: loads one plugin and answers contract questions", setup_plugin_probe,
       run_plugin_probe},
  };
  return table;
}

namespace {

/// `kverify --version`: the commit this binary was built from, the build flags, CUDA.
std::string version_text() {
  const nlohmann::json b = build_info();
  std::string s = "kverify " + b.value("commit", std::string("unknown")) + (b.value("dirty", false) ? " (dirty tree)" : "");
  s += "\ncompiler " + b.value("compiler", std::string("?")) + ", flags:" + b.value("flags", std::string());
#ifdef KV_HAVE_CUDA
  s += "\n" + cuda_versions();
#else
  s += "\nno CUDA in this build: the host device only";
#endif
  return s;
}

/// The subcommands a user may type (the internal ones start with "__").
std::string public_commands() {
  std::string s;
  for (const Command& c : command_table())
    if (std::string_view(c.name).rfind("__", 0) != 0) s += (s.empty() ? "" : ", ") + std::string(c.name);
  return s;
}

/// The first argument when it is no option and no subcommand: named, with the closest name.
std::optional<std::string> unknown_subcommand(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  const std::string got = argv[1];
  std::vector<std::string> names;
  for (const Command& c : command_table()) {
    if (c.name == got) return std::nullopt;
    if (std::string_view(c.name).rfind("__", 0) != 0) names.push_back(c.name);
  }
  return "unknown subcommand '" + got + "'" + did_you_mean(got, names) + "; the subcommands are " + public_commands();
}

}  // namespace

int kverify_main(int argc, char** argv) {
  CLI::App app{"kverify: verify GPU kernels against certified high-precision references"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text());
  if (const auto why = unknown_subcommand(argc, argv)) {
    std::cerr << "kverify: " << *why << "\n";
    return 2;
  }
  app.set_help_all_flag("--help-all");
  const std::vector<Command>& table = command_table();
  std::vector<CLI::App*> subs;
  std::vector<std::unique_ptr<CommandArgs>> args;
  for (const Command& c : table) {
    subs.push_back(app.add_subcommand(c.name, c.help));
    args.push_back(c.setup(*subs.back()));
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    if (app.get_subcommands().empty())  // no subcommand (CLI11: "A subcommand is required")
      std::cerr << "kverify: a subcommand is required, one of " << public_commands() << " (kverify --help)\n";
    else
      std::cerr << "kverify: " << e.what() << "\n";
    return 2;
  }

  try {
    apply_thread_limit();
    for (size_t i = 0; i < table.size(); ++i)
      if (*subs[i]) return table[i].run(*args[i], Argv{argc, argv});
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
