// The campaign loop (fuzz/campaign.hpp): the curated tier, then generated cases by index;
// each result appended with its `fuzz` object; failures shrunk into failures.jsonl.
#include "fuzz/campaign.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "fuzz/batch.hpp"
#include "check/replay.hpp"
#include "check/results.hpp"
#include "core/child_io.hpp"
#include "core/error.hpp"
#include "core/registry.hpp"
#include "fuzz/curated.hpp"
#include "fuzz/failure_class.hpp"
#include "fuzz/gen.hpp"
#include "fuzz/progress.hpp"
#include "fuzz/shrink.hpp"
#include "fuzz/state.hpp"
#include "render/summary.hpp"

namespace kv {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Secs = std::chrono::duration<double>;

uint64_t splitmix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// One entry of the sequence: curated (index < 0) or generated (index >= 0).
struct Entry {
  int64_t index;
  int size = 0;               // RapidCheck size it was drawn at (generated only)
  rc::Shrinkable<Case> case_;
  std::string note;           // curated only
};

bool failing(const nlohmann::json& j) {
  const std::string v = j.value("verdict", "");
  return v == "fail" || v == "error";
}

class Campaign {
 public:
  Campaign(const CampaignOptions& o, const CampaignState& st, const CampaignIO& io)
      : o_(o), st_(st), io_(io), dir_(o.out), results_path_((dir_ / "results.jsonl").string()),
        failures_path_((dir_ / "failures.jsonl").string()), results_(results_path_), failures_(failures_path_),
        shrinks_((dir_ / "shrinks.jsonl").string()), progress_(-1) {
    for (auto& [op, impl] : st_.pairs) gens_.push_back(candidate_gen(make_space(op, impl), {st_.max_elements, st_.profile}));
  }

  /// Reads what an earlier session finished (results and shrunk failures of this seed).
  void load_done() {
    // Partial last lines were set aside when the writers opened the files.
    for (auto& j : read_results(results_path_)) {
      if (!j.contains("fuzz") || j["fuzz"].value("seed", uint64_t(0)) != st_.seed) continue;
      const int64_t idx = j["fuzz"].value("index", int64_t(0));
      if (done_.count(idx)) continue;
      count(j, idx < 0);
      done_.emplace(idx, std::move(j));
    }
    for (auto& j : read_results(failures_path_))
      if (j.contains("fuzz") && j["fuzz"].value("seed", uint64_t(0)) == st_.seed) shrunk_.insert(j["fuzz"].value("index", int64_t(0)));
  }

  /// The campaign; a stop signal (SIGINT, SIGTERM) abandons the case in flight and ends
  /// with the totals of what finished (a later --resume reruns the rest).
  int run() {
    install_stop_handlers();
    try {
      return run_all();
    } catch (const Interrupted& e) {
      finish(false);
      std::cout << "interrupted by " << stop_signal_name(e.signal)
                << ": the case in flight was abandoned; continue with the same command and --resume\n";
      return e.exit_code();
    }
  }

 private:
  int run_all() {
    start_ = Clock::now();
    // The curated tier, once per impl of its op, numbered -1, -2, ... in file order.
    std::vector<Entry> curated;
    int64_t k = 0;
    for (auto& cc : load_curated(st_.curated)) {
      for (auto& [op, impl] : st_.pairs) {
        if (op != cc.c.op) continue;
        Case c = cc.c;
        c.impl = impl;
        if (!st_.shard.has(k++)) continue;
        Case n = c;
        bool ok = true;
        try {
          registry().normalize(n);
        } catch (const UsageError&) {
          ok = false;
        }
        curated.push_back(Entry{-k, 0, ok ? shrinkable_case(n) : rc::shrinkable::just(c), cc.note});
      }
    }
    if (st_.budget_cases >= 0) progress_.set_planned(static_cast<int64_t>(curated.size()) + planned());
    for (auto& e : curated) {
      if (out_of_time()) return finish(true);
      if (stop_signal()) throw Interrupted{stop_signal()};
      if (auto n = admit(e.case_.value())) process(e, *n);
    }
    for (int64_t i = 0; st_.budget_cases < 0 || i < st_.budget_cases; ++i) {
      if (!st_.shard.has(i)) continue;
      if (out_of_time()) return finish(true);
      if (stop_signal()) throw Interrupted{stop_signal()};
      process_generated(i);
    }
    return finish(false);
  }

  const CampaignOptions& o_;
  const CampaignState& st_;
  const CampaignIO& io_;
  fs::path dir_;
  std::string results_path_, failures_path_;
  ResultsWriter results_, failures_, shrinks_;
  Progress progress_;
  std::vector<rc::Gen<Case>> gens_;
  std::map<int64_t, nlohmann::json> done_;
  std::set<int64_t> shrunk_;
  Tally tally_;
  std::map<std::string, std::string> reject_example_;  // per kind of refusal: one example each
  int64_t sanitized_ = 0, sanitizer_errors_ = 0;       // this session's sanitized cases and their errors
  std::map<std::string, std::string> sanitizer_skips_;  // tool -> why it did not check
  Clock::time_point start_;

  int64_t planned() const {
    const int64_t b = st_.budget_cases, i = st_.shard.i, n = st_.shard.n;
    return b > i ? (b - i + n - 1) / n : 0;  // indices i, i+n, ... below b
  }

  bool out_of_time() const { return st_.budget_seconds > 0 && Secs(Clock::now() - start_).count() >= st_.budget_seconds; }

  void count(const nlohmann::json& j, bool curated) { ++tally_.verdicts[j.value("verdict", "error")]; tally_.curated += curated; }

  nlohmann::json fuzz_info(const Entry& e) const {
    nlohmann::json f = {{"seed", st_.seed}, {"index", e.index}, {"shard", st_.shard.str()},
                        {"tier", e.index < 0 ? "curated" : "generated"}};
    if (e.index >= 0) f["size"] = e.size;
    else f["note"] = e.note;
    return f;
  }

  void reject(const std::string& by, const std::string& why) {
    ++tally_.rejected;
    reject_example_.emplace(by, why);
    progress_.update(tally_);
  }

  /// The case normalized if it runs here, else counted as rejected with its reason: the op
  /// forbids it, the impl declines it, or this device cannot run it (Impl::refusal).
  std::optional<Case> admit(const Case& c) {
    Case n = c;
    try {
      registry().normalize(n);
    } catch (const UsageError& err) {
      reject("invalid for the op", c.str() + ": " + err.what());
      return std::nullopt;
    }
    std::optional<std::string> refused;
    try {
      if (io_.refused) refused = io_.refused(n);
    } catch (const std::exception&) {
      // An impl that cannot even answer (a crashed worker) reports it when the case runs.
    }
    if (!refused) return n;
    reject(refused->rfind("declined by ", 0) == 0 ? "declined by " + n.impl : "invalid on this device", c.str() + ": " + *refused);
    return std::nullopt;
  }

  /// Generated index i: its first draw of up to 64 that runs here (a draw's key follows
  /// from the seed, i and the draw: a resumed campaign redraws the same), so the budget
  /// counts cases that run, not draws the impl declines.
  void process_generated(int64_t i) {
    const uint64_t key0 = splitmix(st_.seed ^ splitmix(static_cast<uint64_t>(i)));
    for (int draw = 0; draw < 64; ++draw) {
      const uint64_t key = draw == 0 ? key0 : splitmix(key0 ^ splitmix(0xD5A7ull + static_cast<uint64_t>(draw)));
      const int size = static_cast<int>(splitmix(key ^ 0x51ED) % 101);
      Entry e{i, size, gens_[static_cast<size_t>(i) % gens_.size()](rc::Random(key), size), ""};
      if (auto n = admit(e.case_.value())) return process(e, *n);
    }
  }

  void process(const Entry& e, const Case& n) {
    const Case c = e.case_.value();
    if (auto it = done_.find(e.index); it != done_.end()) {
      // Done by an earlier session: the regenerated case must be the one it ran.
      if (it->second.value("case", "") != c.str())
        throw UsageError(results_path_ + ": index " + std::to_string(e.index) + " of seed " + std::to_string(st_.seed) +
                         " ran '" + it->second.value("case", "") + "', this build generates '" + c.str() +
                         "': resume with the build that started the campaign, or start a new one");
      if (failing(it->second) && !shrunk_.count(e.index)) shrink(e, it->second);
      return;
    }
    nlohmann::json j = io_.run(n);
    if (stop_signal()) throw Interrupted{stop_signal()};  // abandoned: the verdict may be the stop's (a child killed)
    j["fuzz"] = fuzz_info(e);
    const bool batch_fail = e.index >= 0 && e.index % 8 == 0 && batch_check(n, j);
    const bool sanitizer_fail = !batch_fail && sanitize(e, n, j);
    results_.append(j);
    ++tally_.run;
    count(j, e.index < 0);
    progress_.update(tally_);
    if (batch_fail) record_unshrunk(e, j, "batch invariance", {{"batch_invariance", j["batch_invariance"]}});
    else if (sanitizer_fail) record_unshrunk(e, j, "sanitizer", {{"sanitizer", j["sanitizer"]}});
    else if (failing(j)) shrink(e, j);
  }

  /// Reruns every sanitize_every-th generated case that ran under the sanitizer tools; true
  /// when a tool found errors (the case is then a fail with the tools' findings as reason).
  bool sanitize(const Entry& e, const Case& c, nlohmann::json& j) {
    const std::string v = j.value("verdict", "");
    if (!io_.sanitize || o_.sanitize_every <= 0 || e.index < 0 || e.index % o_.sanitize_every != 0 || v == "error" ||
        v == "skip")
      return false;
    j["sanitizer"] = io_.sanitize(c);
    ++sanitized_;
    int64_t errors = 0;
    std::string why;
    for (auto& [tool, r] : j["sanitizer"].items()) {
      const int64_t n = r.value("errors", int64_t(0));
      errors += n;
      if (r.contains("skipped")) sanitizer_skips_.emplace(tool, r["skipped"].get<std::string>());
      else if (n > 0) why += (why.empty() ? "" : "; ") + tool + ": " + std::to_string(n) + " errors (" + r.value("log", "") + ")";
    }
    sanitizer_errors_ += errors;
    if (errors == 0) return false;
    j["verdict"] = "fail";
    j["reason"] = "compute-sanitizer " + why + (j.value("reason", "").empty() ? "" : "; " + j.value("reason", ""));
    std::string tools;
    for (auto& [tool, r] : j["sanitizer"].items()) append_sep(tools, ",", tool);
    j["replay"] = replay_command(j, " --sanitize " + tools);  // reruns the tools
    return true;
  }

  /// Adds the batch-invariance check to a passing result; true when it broke the claim
  /// (the result is then a fail with the violations as its reason, and its replay line
  /// reruns the case beside its companion: fuzz/batch.hpp).
  bool batch_check(const Case& c, nlohmann::json& j) {
    const std::string v = j.value("verdict", "");
    if (!io_.batch || (v != "pass" && v != "unverifiable")) return false;
    auto b = io_.batch(c, j, GenLimits{st_.max_elements, st_.profile});
    if (!b) return false;
    nlohmann::json check = *b;
    const std::string repro = check.value("repro", "");
    check.erase("repro");
    const bool broken = apply_batch_check(j, check);
    if (broken && !repro.empty()) j["repro"] = repro;
    return broken;
  }

  /// A failure that needs more than the case alone to show (a batch-invariance companion,
  /// a sanitizer) is recorded as it is, not shrunk (the shrinker reruns cases alone); its
  /// replay line (the result's) carries what reruns it, `extra` adds fields.
  void record_unshrunk(const Entry& e, const nlohmann::json& j, const std::string& what, const nlohmann::json& extra) {
    nlohmann::json f = {{"case", j.value("case", "")},
                        {"verdict", "fail"},
                        {"reason", j.value("reason", "")},
                        {"class", failure_class(j)},
                        {"replay", replay_command(j)},
                        {"repro", j.value("repro", "")},
                        {"shrink", {{"runs", 0}, {"steps", 0}, {"complete", false}}},
                        {"fuzz", fuzz_info(e)}};
    f.update(extra);
    std::string text = "fail #" + std::to_string(e.index) + " (" + what + "): " + f["reason"].get<std::string>() +
                       "\n    " + f["replay"].get<std::string>() + "\n";
    if (!f["repro"].get<std::string>().empty()) text += "    repro: " + f["repro"].get<std::string>() + "\n";
    record_failure(e, f, text);
  }

  /// Appends a failure line, counts it, and prints `text` between progress lines.
  void record_failure(const Entry& e, const nlohmann::json& f, const std::string& text) {
    failures_.append(f);
    shrunk_.insert(e.index);
    ++tally_.failures;
    progress_.clear();
    std::cout << text << std::flush;
    progress_.update(tally_, "", true);
  }

  void shrink(const Entry& e, const nlohmann::json& first) {
    std::string label = "#";  // piecewise: GCC 12 warns falsely (-Wrestrict) on "..." + string
    label += std::to_string(e.index);
    int n = 0;
    const auto t0 = Clock::now();
    auto stop = [&] {
      return out_of_time() || Secs(Clock::now() - t0).count() >= o_.max_shrink_seconds;
    };
    ShrinkResult r = shrink_failure(
        e.case_, first, io_, o_.max_shrink_runs, stop,
        [&](const nlohmann::json& j) {
          if (stop_signal()) throw Interrupted{stop_signal()};  // as in process(): the run is the stop's
          nlohmann::json line = j;
          line["fuzz"] = fuzz_info(e);
          line["fuzz"]["shrink_run"] = ++n;
          shrinks_.append(line);
          ++tally_.shrink_runs;
          progress_.update(tally_, "shrinking " + label + ": " + std::to_string(n) + " runs");
        });
    const std::string replay = replay_command(r.result);
    nlohmann::json f = {{"case", r.minimal.str()},
                        {"verdict", r.result.value("verdict", "error")},
                        {"reason", r.result.value("reason", "")},
                        {"class", failure_class(r.result)},
                        {"replay", replay},
                        {"repro", r.result.value("repro", "")},
                        {"original", {{"case", first.value("case", "")}, {"reason", first.value("reason", "")},
                                      {"class", failure_class(first)}, {"repro", first.value("repro", "")}}},
                        {"shrink", {{"runs", r.runs}, {"steps", r.steps}, {"complete", r.complete}}},
                        {"fuzz", fuzz_info(e)}};
    std::ostringstream text;
    text << (e.index < 0 ? "curated " : "") << f["verdict"].get<std::string>() << " " << label << " (" << r.minimal.op
         << " " << r.minimal.impl << "), shrunk in " << r.steps << " steps (" << r.runs << " runs"
         << (r.complete ? "" : ", stopped early") << "):\n    " << replay << "\n    " << f["reason"].get<std::string>()
         << "\n";
    if (!f["repro"].get<std::string>().empty()) text << "    repro: " << f["repro"].get<std::string>() << "\n";
    record_failure(e, f, text.str());
  }

  int finish(bool timed_out) {
    progress_.finish(tally_);
    const std::string html = (dir_ / "summary.html").string();
    write_summary_html(html, read_results(results_path_), "fuzz campaign " + std::to_string(st_.seed));
    std::cout << "fuzz campaign seed " << st_.seed << " (shard " << st_.shard.str() << "): " << tally_.total()
              << " cases (" << tally_.curated << " curated)";
    for (auto& [v, n] : tally_.verdicts) std::cout << ", " << n << " " << v;
    std::cout << ", " << tally_.rejected << " rejected" << (timed_out ? "; stopped by --budget-seconds" : "") << "\n";
    for (auto& [by, why] : reject_example_) std::cout << "  " << by << ", e.g. " << why << "\n";
    if (o_.sanitize_every > 0) {
      std::cout << "sanitizer: " << sanitized_ << " cases rerun under the tools (every " << o_.sanitize_every
                << "th generated index), " << sanitizer_errors_ << " errors\n";
      for (auto& [tool, why] : sanitizer_skips_) std::cout << "  " << tool << " SKIPPED: " << why << "\n";
    }
    std::cout << "results: " << results_path_ << "\nsummary: " << html << "\n";
    if (tally_.failures || !shrunk_.empty()) {
      print_failures_by_class(read_results(failures_path_), std::cout);
      std::cout << "failures (shrunk): " << failures_path_ << "\n";
    }
    if (tally_.total() == 0 && tally_.rejected > 0)  // checked nothing: never a success
      return std::cerr << "kverify fuzz: no case ran: all " << tally_.rejected << " draws were rejected or declined\n", 1;
    return tally_.failing() > 0 ? 1 : 0;
  }
};

}  // namespace

int run_campaign(const CampaignOptions& o, const CampaignIO& io) {
  CampaignState st = open_campaign(o);
  Campaign c(o, st, io);
  c.load_done();
  return c.run();
}

int64_t merge_results(const std::string& out, const std::vector<std::string>& in) {
  if (in.empty()) throw UsageError("merge needs at least one input file");
  if (fs::exists(out)) throw UsageError(out + " exists: merge writes a new file");
  std::map<std::pair<uint64_t, int64_t>, std::pair<std::string, std::string>> seen;  // -> (case, file)
  std::vector<nlohmann::json> keep;
  for (auto& p : in)
    for (auto& j : read_results(p)) {
      if (j.contains("fuzz")) {
        std::pair<uint64_t, int64_t> key{j["fuzz"].value("seed", uint64_t(0)), j["fuzz"].value("index", int64_t(0))};
        auto [it, fresh] = seen.emplace(key, std::make_pair(j.value("case", ""), p));
        if (!fresh) {
          if (it->second.first != j.value("case", ""))
            throw UsageError("index " + std::to_string(key.second) + " of campaign seed " + std::to_string(key.first) +
                             " is '" + it->second.first + "' in " + it->second.second + " but '" +
                             j.value("case", "") + "' in " + p + ": not shards of one campaign");
          continue;
        }
      }
      keep.push_back(std::move(j));
    }
  if (auto parent = fs::path(out).parent_path(); !parent.empty()) fs::create_directories(parent);
  ResultsWriter w(out);
  for (auto& j : keep) w.append(j);
  return static_cast<int64_t>(keep.size());
}

}  // namespace kv
