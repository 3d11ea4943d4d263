// Running a list of cases through the worker (cli/run_cases.hpp): grouped by input,
// sharded, resumed, each result appended as it finishes, then the summary and report.
#include "cli/run_cases.hpp"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>

#include "check/results.hpp"
#include "cli/report_files.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "render/summary.hpp"
#include "run/supervisor.hpp"

namespace kv {

/// Validates a case against the device before it is queued: one the impl declines or
/// this device cannot run is a usage error. An impl that cannot even answer (a crashed
/// worker) reports it when the case runs.
void check_runnable(const Case& c, const RunEnv& env) {
  const Impl& impl = registry().impl(c.op, c.impl);
  std::optional<std::string> why;
  try {
    why = impl.refusal(c, env.device.profile);
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception&) {
    return;
  }
  if (why) throw UsageError(*why);
}

namespace {

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

}  // namespace

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

}  // namespace kv
