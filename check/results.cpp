// Appending and reading result lines.
#include "check/results.hpp"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/error.hpp"

namespace kv {

void set_aside_partial_tail(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.empty() || text.back() == '\n') return;
  const size_t keep = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  std::ofstream(path + ".partial", std::ios::app) << text.substr(keep) << "\n";
  std::filesystem::resize_file(path, keep);
  std::cerr << "kverify: " << path << " ended in an incomplete line (an interrupted append): moved to " << path
            << ".partial\n";
}

ResultsWriter::ResultsWriter(const std::string& path) : path_(path) {
  set_aside_partial_tail(path);
  f_ = std::fopen(path.c_str(), "a");
  if (!f_) throw UsageError("cannot open results file '" + path + "' for appending");
}

ResultsWriter::~ResultsWriter() {
  if (f_) {
    std::fflush(f_);
    fsync(fileno(f_));
    std::fclose(f_);
  }
}

void ResultsWriter::append(const nlohmann::json& line) {
  std::string s = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(s.data(), 1, s.size(), f_) != s.size() || std::fflush(f_) != 0)
    throw std::runtime_error("cannot write to results file '" + path_ + "'");
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (now - last_sync_ >= kSyncEvery) {
    fsync(fileno(f_));
    last_sync_ = now;
  }
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

std::vector<nlohmann::json> read_results(const std::string& path, const std::string& run_id,
                                         std::vector<std::string>* skipped) {
  std::ifstream f(path);
  if (!f) throw UsageError("cannot read results file '" + path + "'");
  std::vector<nlohmann::json> out;
  std::string line;
  int64_t no = 0;
  auto bad = [&](const std::string& why) {
    const std::string at = path + ":" + std::to_string(no) + ": " + why;
    if (!skipped) throw UsageError(at);
    skipped->push_back(at);
  };
  while (std::getline(f, line)) {
    ++no;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const std::exception& e) {
      bad(std::string("malformed result line (") + e.what() + ")");
      continue;
    }
    if (!j.is_object() || !j.contains("case") || !j.contains("verdict") || !j["verdict"].is_string() ||
        !j["case"].is_string()) {
      bad("result line lacks a 'case' or 'verdict' string");
      continue;
    }
    if (run_id.empty() || j.value("run_id", "") == run_id) out.push_back(std::move(j));
  }
  return out;
}

std::vector<nlohmann::json> read_results_skipping(const std::string& path, const std::string& run_id, int64_t& n_skipped) {
  std::vector<std::string> skipped;
  auto out = read_results(path, run_id, &skipped);
  for (auto& s : skipped) std::cerr << "kverify: skipped " << s << "\n";
  n_skipped += static_cast<int64_t>(skipped.size());
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
