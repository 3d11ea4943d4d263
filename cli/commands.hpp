// The kverify command line: the subcommands of the table in cli/commands.cpp, each in
// cli/cmd_<name>.cpp (cli/command.hpp).
#pragma once

namespace kv {
/// Exit codes: 0 all pass, 1 any failure or error, 2 usage or configuration error.
int kverify_main(int argc, char** argv);
}  // namespace kv
