// Failure classes (fuzz/failure_class.hpp).
#include "fuzz/failure_class.hpp"

#include <map>
#include <set>

#include "core/case.hpp"

namespace kv {

namespace {

using nlohmann::json;

int64_t count(const json& o, const char* key) {
  const json& v = o.value(key, json(0));
  return v.is_number() ? v.get<int64_t>() : 0;
}

/// The worst way an output failed.
std::string output_kind(const json& o) {
  const int64_t unwritten = count(o, "n_unwritten"), nan = count(o, "n_nan_mismatch");
  if (unwritten > 0) return "unwritten";
  if (nan > 0) return "nan";
  if (count(o, "n_fail") > 0) return "out_of_enclosure";
  if (count(o, "n_padding_written") > 0) return "padding";
  return "fail";
}

/// Reason fragments ("a; b; c") that name no output: out-of-bounds writes and modified inputs.
void reason_parts(const std::string& r, std::set<std::string>& out) {
  static const std::string oob = "out-of-bounds write on ", modified = "input ", was_modified = " was modified";
  for (size_t start = 0; start < r.size();) {
    const size_t end = r.find("; ", start);
    const std::string f = r.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (f.rfind(oob, 0) == 0)
      out.insert("oob:" + f.substr(oob.size(), f.find(':', oob.size()) - oob.size()));
    else if (f.rfind(modified, 0) == 0 && f.size() > was_modified.size() &&
             f.compare(f.size() - was_modified.size(), std::string::npos, was_modified) == 0)
      out.insert("modified:" + f.substr(modified.size(), f.size() - modified.size() - was_modified.size()));
    if (end == std::string::npos) break;
    start = end + 2;
  }
}

std::string error_kind(const json& j) {
  const std::string r = j.value("reason", "");
  return r.substr(0, r.find_first_of(":("));
}

}  // namespace

std::string failure_class(const json& j) {
  const std::string v = j.value("verdict", "");
  if (v == "error") return "error:" + error_kind(j);
  if (v != "fail") return "";
  std::set<std::string> parts;
  if (j.contains("outputs") && j["outputs"].is_object())
    for (auto& [name, o] : j["outputs"].items())
      if (o.value("verdict", "") == "fail") parts.insert(name + ":" + output_kind(o));
  if (j.contains("batch_invariance")) {
    const json outs = j["batch_invariance"].value("outputs", json::object());  // kept alive for the loop
    for (auto& [name, o] : outs.items())
      if (count(o, "n_diff") > 0) parts.insert(name + ":claim_batch_invariant");
  }
  if (j.contains("sanitizer") && j["sanitizer"].is_object())
    for (auto& [tool, r] : j["sanitizer"].items())
      if (count(r, "errors") > 0) parts.insert("sanitizer:" + tool);
  reason_parts(j.value("reason", ""), parts);
  if (parts.empty()) return "fail:" + error_kind(j);  // a fail that names nothing above
  std::string s;
  for (auto& p : parts) append_sep(s, ", ", p);
  return s;
}

bool same_failure(const json& a, const json& b) {
  return a.value("verdict", "") == b.value("verdict", "") && failure_class(a) == failure_class(b);
}

void print_failures_by_class(const std::vector<json>& failures, std::ostream& out) {
  if (failures.empty()) return;
  std::vector<std::string> order;
  std::map<std::string, std::vector<const json*>> by;
  for (auto& f : failures) {
    const std::string c = f.contains("class") ? f["class"].get<std::string>() : failure_class(f);
    if (!by.count(c)) order.push_back(c);
    by[c].push_back(&f);
  }
  out << failures.size() << " failure" << (failures.size() == 1 ? "" : "s") << " in " << order.size() << " class"
      << (order.size() == 1 ? "" : "es") << ":\n";
  for (auto& c : order) {
    out << "  " << (c.empty() ? "(no class)" : c) << ": " << by[c].size() << "\n";
    for (const json* f : by[c]) {
      std::string who;
      try {
        const Case k = Case::parse(f->value("case", ""));
        who = k.op + " " + k.impl;
      } catch (const std::exception&) {
        who = "?";
      }
      const json fz = f->value("fuzz", json::object());
      out << "    " << (fz.contains("index") ? "#" + std::to_string(fz["index"].get<int64_t>()) + " " : "") << who
          << ": " << f->value("reason", "") << "\n      " << f->value("replay", "") << "\n";
    }
  }
}

}  // namespace kv
