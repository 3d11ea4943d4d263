// Appending and reading result lines.
#include "check/results.hpp"

#include <unistd.h>

#include <cmath>
#include <fstream>

#include "core/error.hpp"

namespace kv {

ResultsWriter::ResultsWriter(const std::string& path) : path_(path) {
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) throw UsageError("cannot open results file '" + path + "' for appending");
}

ResultsWriter::~ResultsWriter() {
  if (f_) std::fclose(f_);
}

void ResultsWriter::append(const nlohmann::json& line) {
  std::string s = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(s.data(), 1, s.size(), f_) != s.size() || std::fflush(f_) != 0)
    throw std::runtime_error("cannot write to results file '" + path_ + "'");
  fsync(fileno(f_));
}

nlohmann::json result_number(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

double result_number_value(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (v == "inf") return INFINITY;
  if (v == "-inf") return -INFINITY;
  if (v == "nan") return NAN;
  return 0;
}

std::vector<nlohmann::json> read_results(const std::string& path, const std::string& run_id) {
  std::ifstream f(path);
  if (!f) throw UsageError("cannot read results file '" + path + "'");
  std::vector<nlohmann::json> out;
  std::string line;
  int64_t no = 0;
  while (std::getline(f, line)) {
    ++no;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      throw UsageError(path + ":" + std::to_string(no) + ": malformed result line (" + e.what() + ")");
    }
    if (!j.is_object() || !j.contains("case") || !j.contains("verdict"))
      throw UsageError(path + ":" + std::to_string(no) + ": result line lacks 'case' or 'verdict'");
    if (run_id.empty() || j.value("run_id", "") == run_id) out.push_back(std::move(j));
  }
  return out;
}

bool claims(const nlohmann::json& r, const std::string& out, const std::string& claim) {
  if (!r.contains("contract") || !r["contract"].contains("determinism")) return false;
  const nlohmann::json& d = r["contract"]["determinism"];
  if (!d.contains(out)) return false;
  for (auto& c : d[out])
    if (c == claim) return true;
  return false;
}

}  // namespace kv
