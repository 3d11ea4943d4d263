// JUnit XML from result lines, for CI systems' test views.
#include <map>
#include <sstream>
#include <vector>

#include "render/html.hpp"
#include "render/report.hpp"

namespace kv {

using json = nlohmann::json;

std::string render_junit(const std::vector<json>& lines) {
  std::map<std::string, std::vector<const json*>> by_op;
  for (auto& j : lines) by_op[j.value("op", "unknown")].push_back(&j);
  auto attr = [](const std::string& s) { return html::esc(s); };  // XML attribute escaping is HTML's
  std::ostringstream o;
  int64_t tests = 0, failures = 0, errors = 0, skipped = 0;
  std::ostringstream suites;
  for (auto& [op, js] : by_op) {
    int64_t f = 0, e = 0, s = 0;
    double time = 0;
    std::ostringstream cases;
    for (auto* j : js) {
      const std::string v = j->value("verdict", "error");
      const double t = j->contains("timings") ? (*j)["timings"].value("total_s", 0.0) : 0.0;
      time += t;
      const std::string replay = replay_command(*j);
      cases << "    <testcase classname=\"kverify." << attr(op) << "." << attr(j->value("impl", "")) << "\" name=\""
            << attr(j->value("case", "")) << "\" time=\"" << t << "\">";
      if (v == "fail") {
        ++f;
        cases << "<failure type=\"fail\" message=\"" << attr(j->value("reason", "outside the admissible set")) << "\">"
              << html::esc(replay) << "</failure>";
      } else if (v == "error") {
        ++e;
        cases << "<error type=\"error\" message=\"" << attr(j->value("reason", "error")) << "\">" << html::esc(replay) << "</error>";
      } else if (v == "skip" || v == "unverifiable") {
        ++s;
        cases << "<skipped message=\"" << attr(v + ": " + j->value("reason", "the contract bounds some elements by nothing"))
              << "\"/>";
      }
      cases << "</testcase>\n";
    }
    tests += static_cast<int64_t>(js.size()), failures += f, errors += e, skipped += s;
    suites << "  <testsuite name=\"" << attr(op) << "\" tests=\"" << js.size() << "\" failures=\"" << f << "\" errors=\""
           << e << "\" skipped=\"" << s << "\" time=\"" << time << "\">\n"
           << cases.str() << "  </testsuite>\n";
  }
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"kverify\" tests=\"" << tests << "\" failures=\""
    << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped << "\">\n"
    << suites.str() << "</testsuites>\n";
  return o.str();
}

}  // namespace kv
