// The results file: JSON Lines, one line per finished case, appended and flushed as
// each case finishes so an interrupted run loses nothing already written.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kv {

/// A kill during an append can leave a last line without its newline (a line is written
/// whole and flushed, but may take more than one write). That tail is moved to
/// <file>.partial (said on stderr), so its case reruns and the next append starts on a line
/// of its own; a complete line that does not parse is left for read_results to report.
void set_aside_partial_tail(const std::string& path);

class ResultsWriter {
 public:
  /// Opens for appending (a partial last line set aside first); throws UsageError when the
  /// file cannot be opened.
  explicit ResultsWriter(const std::string& path);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;
  /// Writes the line and flushes it to the kernel (a killed process loses none); fsyncs at
  /// most once every kSyncEvery seconds and on close (a machine crash loses at most the
  /// lines of the last interval): an fsync per line cost milliseconds a case on a campaign
  /// of 16 workers.
  void append(const nlohmann::json& line);
  static constexpr double kSyncEvery = 1.0;

 private:
  std::FILE* f_ = nullptr;
  std::string path_;
  double last_sync_ = -1e300;  // steady-clock seconds
};

/// Reads every line (of one run when run_id is not empty). A malformed line throws
/// UsageError naming the file and line number; with `skipped`, it is left out instead and
/// described there ("file:line: why"), so one corrupt line costs only itself.
std::vector<nlohmann::json> read_results(const std::string& path, const std::string& run_id = "",
                                         std::vector<std::string>* skipped = nullptr);

/// read_results leaving malformed lines out, each named on stderr ("kverify: skipped
/// file:line: why"); adds their count to n_skipped (a reader that skipped must exit non-zero).
std::vector<nlohmann::json> read_results_skipping(const std::string& path, const std::string& run_id, int64_t& n_skipped);

/// Numbers in result lines: finite values as JSON numbers, NaN and infinities as the strings
/// "nan", "inf", "-inf" (JSON has none); and back (anything else reads as 0).
nlohmann::json result_number(double x);
double result_number_value(const nlohmann::json& v);

/// Whether a result line's contract makes a determinism claim (run_to_run, ...) for an output.
bool claims(const nlohmann::json& result, const std::string& output, const std::string& claim);

}  // namespace kv
