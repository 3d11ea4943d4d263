// `kverify __plugin-probe PLUGIN` (internal): loads one plugin in a process of its own and
// answers the parent's questions about it (ext/plugin_probe.hpp).
#include "cli/command.hpp"
#include "ext/plugin_probe.hpp"

namespace kv {

namespace {

struct PluginProbeArgs : CommandArgs {
  std::string plugin;
};

}  // namespace

std::unique_ptr<CommandArgs> setup_plugin_probe(CLI::App& sub) {
  auto a = std::make_unique<PluginProbeArgs>();
  sub.group("");
  sub.add_option("plugin", a->plugin)->required();
  return a;
}

int run_plugin_probe(CommandArgs& args, const Argv&) { return plugin_probe_main(static_cast<PluginProbeArgs&>(args).plugin); }

}  // namespace kv
