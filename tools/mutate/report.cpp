// Rendering the mutation report (report.hpp).
#include "tools/mutate/report.hpp"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "run/runner.hpp"

namespace kv {

namespace {

using json = nlohmann::json;

struct Tally {
  int64_t units = 0, killed = 0, shared = 0;
};

std::string rate(const Tally& t) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", t.units ? 100.0 * static_cast<double>(t.killed) / static_cast<double>(t.units) : 0.0);
  return b;
}

json tally_json(const Tally& t) {
  return {{"mutants", t.units}, {"killed", t.killed}, {"survived", t.units - t.killed}, {"shared", t.shared},
          {"kill_rate", t.units ? static_cast<double>(t.killed) / static_cast<double>(t.units) : 0.0}};
}

std::string killed_by(const MutationUnit& u) {
  if (!u.killed) return "**survived** (" + std::to_string(u.cases_run) + " cases)";
  std::string s = u.how + (u.detail.empty() || u.how == "error" ? "" : " (" + u.detail + ")") + ", " + u.source +
                  " case `" + u.case_str + "`";
  return s;
}

}  // namespace

void write_mutation_report(const std::string& dir, const MutationReport& r) {
  std::map<std::string, Tally> per;
  Tally all;
  json units = json::array();
  for (auto& u : r.units) {
    for (Tally* t : {&per[u.family], &all}) t->units++, t->killed += u.killed, t->shared += u.shared;
    units.push_back({{"mutant", u.m->name}, {"op", u.family}, {"ops", u.m->ops}, {"device", u.m->device},
                     {"kind", u.m->kind}, {"what", u.m->what}, {"shared", u.shared}, {"killed", u.killed},
                     {"how", u.how}, {"detail", u.detail}, {"case", u.case_str}, {"source", u.source},
                     {"cases_run", u.cases_run}, {"killed_at", u.killed_at}});
  }
  json ops = json::object();
  for (auto& [f, t] : per) ops[f] = tally_json(t);
  const json build = build_info();
  const json j = {{"schema", 1},  {"build", build},          {"device", r.device}, {"command", r.command},
                  {"pool", r.pool_counts}, {"dropped", r.dropped}, {"ops", ops}, {"total", tally_json(all)},
                  {"units", units}};
  std::filesystem::create_directories(dir);
  std::ofstream(std::filesystem::path(dir) / "mutation.json") << j.dump(2) << "\n";

  std::ofstream md(std::filesystem::path(dir) / "mutation.md");
  md << "# Mutation kill rates: " << r.device.value("kind", "") << " impls\n\n"
     << "Build " << build["commit"].get<std::string>() << (build["dirty"].get<bool>() ? " (dirty)" : "") << " on "
     << r.device.value("name", "") << ", `" << r.command << "`.\n"
     << "A mutant runs against the cases of each op it belongs to (fwd and bwd together count as one op). It is "
        "killed by a `fail` or `error` verdict, by output bits that change between runs of a case where the impl "
        "claims run_to_run (`drift`), or, failing those, by a p99 error ratio more than twice the unmutated "
        "impl's on the same case (`p99_growth`, what `kverify gate` flags). Shared: mutants of code that more "
        "than one op runs, counted under each.\n\n"
     << "Cases:";
  for (auto& [src, n] : r.pool_counts) md << " " << n << " " << src << ";";
  md << " " << r.dropped.size() << " dropped (the unmutated impl fails them).\n\n"
     << "| op | mutants | killed | survived | kill rate | of which shared |\n|---|---:|---:|---:|---:|---:|\n";
  for (auto& [f, t] : per)
    md << "| " << f << " | " << t.units << " | " << t.killed << " | " << t.units - t.killed << " | " << rate(t) << " | "
       << t.shared << " |\n";
  md << "| **all** | " << all.units << " | " << all.killed << " | " << all.units - all.killed << " | " << rate(all)
     << " | " << all.shared << " |\n\n## Survivors\n\n";
  bool any = false;
  for (auto& u : r.units)
    if (!u.killed) {
      md << "- `" << u.m->name << "` (" << u.family << ", " << u.m->kind << "): " << u.m->what << "\n";
      any = true;
    }
  if (!any) md << "None.\n";
  md << "\n## Every mutant\n\n| mutant | op | kind | bug | killed by |\n|---|---|---|---|---|\n";
  for (auto& u : r.units)
    md << "| `" << u.m->name << "` | " << u.family << " | " << u.m->kind << " | " << u.m->what << " | " << killed_by(u)
       << " |\n";
}

}  // namespace kv
