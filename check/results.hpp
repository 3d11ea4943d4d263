// The results file: JSON Lines, one line per finished case, appended and flushed as
// each case finishes so an interrupted run loses nothing already written.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kv {

class ResultsWriter {
 public:
  /// Opens for appending; throws UsageError when the file cannot be opened.
  explicit ResultsWriter(const std::string& path);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;
  void append(const nlohmann::json& line);

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
};

/// Reads every line (of one run when run_id is not empty); throws UsageError naming the
/// file and line number of a malformed line.
std::vector<nlohmann::json> read_results(const std::string& path, const std::string& run_id = "");

/// Numbers in result lines: finite values as JSON numbers, NaN and infinities as the strings
/// "nan", "inf", "-inf" (JSON has none); and back (anything else reads as 0).
nlohmann::json result_number(double x);
double result_number_value(const nlohmann::json& v);

/// Whether a result line's contract makes a determinism claim (run_to_run, ...) for an output.
bool claims(const nlohmann::json& result, const std::string& output, const std::string& claim);

}  // namespace kv
