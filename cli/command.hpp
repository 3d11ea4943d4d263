// The vocabulary of kverify's command table (cli/commands.cpp): a subcommand is a name, a
// line of help, a setup that adds its options and a run; each subcommand lives in its own
// file, cli/cmd_<name>.cpp.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <vector>

namespace kv {

/// The command line as main received it (fuzz hands what follows `fuzz` to its workers).
struct Argv {
  int argc;
  char** argv;
};

/// Where a subcommand's options land: each subcommand derives its own.
struct CommandArgs {
  virtual ~CommandArgs() = default;
};

/// A row of the command table.
struct Command {
  const char* name;  ///< `kverify <name>`; internal ones (`__worker`) are hidden from --help
  const char* help;  ///< the line --help shows
  /// Adds the subcommand's options to `sub`; returns what they are parsed into.
  std::unique_ptr<CommandArgs> (*setup)(CLI::App& sub);
  /// Runs the parsed subcommand (args: what its setup returned): the exit code, or a
  /// UsageError (exit 2).
  int (*run)(CommandArgs& args, const Argv& argv);
};

/// The subcommands in the order --help lists them.
const std::vector<Command>& command_table();

// Each subcommand's setup and run, defined in cli/cmd_<name>.cpp.
std::unique_ptr<CommandArgs> setup_list(CLI::App& sub);
int run_list(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_run(CLI::App& sub);
int run_run(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_summary(CLI::App& sub);
int run_summary(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_gate(CLI::App& sub);
int run_gate(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_replay(CLI::App& sub);
int run_replay(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_calibrate_math(CLI::App& sub);
int run_calibrate_math(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_calibrate_mma(CLI::App& sub);
int run_calibrate_mma(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_fuzz(CLI::App& sub);
int run_fuzz(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_drift(CLI::App& sub);
int run_drift(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_merge(CLI::App& sub);
int run_merge(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_report(CLI::App& sub);
int run_report(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_compare(CLI::App& sub);
int run_compare(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_audit(CLI::App& sub);
int run_audit(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_worker(CLI::App& sub);
int run_worker(CommandArgs& args, const Argv& argv);
std::unique_ptr<CommandArgs> setup_plugin_probe(CLI::App& sub);
int run_plugin_probe(CommandArgs& args, const Argv& argv);

}  // namespace kv
