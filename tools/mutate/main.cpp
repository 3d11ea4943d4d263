// kverify-mutate: the mutation suite (issue 7). A separate binary so that kverify itself
// carries no mutants: this target compiles the mutated sources with -DKV_MUTANTS
// (CMakeLists.txt beside this file). As a worker (`__worker`) it runs cases like kverify's
// worker, with the mutant named by KV_MUTANT active.
#include <CLI/CLI.hpp>
#include <cstring>
#include <iostream>

#include "cli/commands.hpp"
#include "run/sanitize.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "tools/mutate/catalog.hpp"
#include "tools/mutate/mutate.hpp"

namespace {

int list_mutants() {
  for (auto& m : kv::mutant_catalog()) {
    std::string ops;
    for (auto& o : m.ops) kv::append_sep(ops, ",", o);
    std::cout << m.name << "  [" << m.device << "; " << ops << "; " << m.kind << "] " << m.what << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  kv::register_builtin();
  try {
    kv::select_mutant_from_env();
    if (argc > 1 && std::strcmp(argv[1], "__worker") == 0) return kv::kverify_main(argc, argv);
    kv::MutateOptions o;
    bool list = false;
    CLI::App app{"kverify-mutate: run the mutation suite (core/mutant_catalog.def) and report kill rates per op"};
    app.add_flag("--list", list, "list the mutants and exit");
    app.add_flag("--list-cases", o.list_cases, "list the cases a run would use (normalized) and exit");
    app.add_option("--device", o.device, "host or cuda: the impls whose mutants run (default host)")
        ->check(CLI::IsMember({"host", "cuda"}));
    app.add_option("--op", o.families, "op family to run, e.g. softmax (repeatable; default: all)");
    app.add_option("--mutant", o.mutants, "mutant to run (repeatable; default: all of the device)");
    app.add_option("--cases", o.pool.cases, "targeted cases: builtin (tools/mutate/cases.json), a file, or none");
    app.add_option("--curated", o.pool.curated, "the fuzz curated tier: builtin, a file, or none");
    app.add_option("--fuzz", o.pool.fuzz_per_op, "cases drawn by the fuzz generators per op (default 4)")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--seed", o.pool.seed, "seed of the drawn cases (default 1)");
    app.add_option("--max-elements", o.pool.max_elements, "cap on a drawn shape's elements (default 16384)");
    app.add_option("--out", o.out, "report directory: mutation.md, mutation.json (default out/mutation)");
    app.add_option("--timeout", o.timeout_s, "watchdog seconds per case (default 300)")->check(CLI::PositiveNumber);
    app.add_option("--sanitize", o.sanitize,
                   "compute-sanitizer tools (e.g. racecheck) run on the first case of a mutant that survives the "
                   "cases; errors the unmutated impl does not show kill it")
        ->delimiter(',');
    app.add_flag("--expect-killed", o.expect_killed, "exit 1 when a mutant survives");
    app.add_option("--expect-survivors", o.expect_survivors,
                   "a mutation.json (e.g. tools/mutate/expected-survivors-host.json): exit 1 unless the mutants run "
                   "here survive exactly where it has them survive");
    CLI11_PARSE(app, argc, argv);
    if (list) return list_mutants();
    kv::check_sanitize_tools(o.sanitize);
    o.command = "kverify-mutate";
    for (int i = 1; i < argc; ++i) o.command += std::string(" ") + argv[i];
    return kv::run_mutation(o);
  } catch (const kv::UsageError& e) {
    std::cerr << "kverify-mutate: " << e.what() << "\n";
    return 2;
  }
}
