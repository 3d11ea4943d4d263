// Failure classes: which part failed and how, from a result line; two failures are the same
// only with the same verdict and class (what shrinking keeps).
#include <gtest/gtest.h>

#include <sstream>

#include "fuzz/failure_class.hpp"

namespace {

using nlohmann::json;

json fail_output(int64_t n_fail, int64_t nan = 0, int64_t unwritten = 0, int64_t padding = 0) {
  return {{"verdict", "fail"}, {"n_fail", n_fail}, {"n_nan_mismatch", nan}, {"n_unwritten", unwritten},
          {"n_padding_written", padding}};
}

json line(json outputs, std::string reason = "") {
  return {{"verdict", "fail"}, {"outputs", std::move(outputs)}, {"reason", std::move(reason)}};
}

}  // namespace

TEST(FailureClass, NamesEachFailingPartAndItsWorstKind) {
  const json pass = {{"verdict", "pass"}};
  EXPECT_EQ(kv::failure_class(line({{"y", fail_output(3)}, {"rstd", pass}})), "y:out_of_enclosure");
  EXPECT_EQ(kv::failure_class(line({{"y", fail_output(3, 1)}})), "y:nan");  // NaN outranks the rest
  EXPECT_EQ(kv::failure_class(line({{"y", fail_output(3, 1, 2)}})), "y:unwritten");
  EXPECT_EQ(kv::failure_class(line({{"y", fail_output(0, 0, 0, 4)}})), "y:padding");
  EXPECT_EQ(kv::failure_class(line({{"y", fail_output(1)}, {"rstd", fail_output(1, 1)}},
                                   "y: 1 of 8 elements fail; out-of-bounds write on rstd: 4 bytes after; input x was modified")),
            "modified:x, oob:rstd, rstd:nan, y:out_of_enclosure");
  json batch = {{"verdict", "fail"},
                {"outputs", {{"y", pass}}},
                {"batch_invariance", {{"outputs", {{"y", {{"n_diff", 0}}}, {"rstd", {{"n_diff", 5}}}}}}}};
  EXPECT_EQ(kv::failure_class(batch), "rstd:claim_batch_invariant");
  json sanitizer = {{"verdict", "fail"}, {"sanitizer", {{"memcheck", {{"errors", 2}}}, {"racecheck", {{"errors", 0}}}}}};
  EXPECT_EQ(kv::failure_class(sanitizer), "sanitizer:memcheck");
  EXPECT_EQ(kv::failure_class({{"verdict", "error"}, {"reason", "watchdog: no answer within 3 s"}}), "error:watchdog");
  EXPECT_EQ(kv::failure_class(pass), "");
}

TEST(FailureClass, TheSameFailureNeedsTheSameClass) {
  // Two softcap failures out of the enclosure are not an all-ignored-rows NaN of the same loss.
  const json ooe = line({{"loss", fail_output(1)}}), nan = line({{"loss", fail_output(1, 1)}});
  EXPECT_TRUE(kv::same_failure(ooe, line({{"loss", fail_output(7)}})));
  EXPECT_FALSE(kv::same_failure(ooe, nan));
  EXPECT_FALSE(kv::same_failure(ooe, line({{"loss", fail_output(1)}, {"dlogits", fail_output(1)}})));
  const json err = {{"verdict", "error"}, {"reason", "watchdog: no answer within 3 s"}};
  EXPECT_TRUE(kv::same_failure(err, {{"verdict", "error"}, {"reason", "watchdog: no answer within 9 s"}}));
  EXPECT_FALSE(kv::same_failure(err, {{"verdict", "error"}, {"reason", "worker exited (signal 11)"}}));
  EXPECT_FALSE(kv::same_failure(err, ooe));
}

TEST(FailureClass, FailuresAreListedByClassWithTheirReasonsAndReplays) {
  std::vector<json> f = {
      {{"case", "kv1 op=rms_norm.fwd impl=a shape=2x3"}, {"class", "y:nan"}, {"reason", "r1"}, {"replay", "kverify replay 1"},
       {"fuzz", {{"index", 4}}}},
      {{"case", "kv1 op=rms_norm.fwd impl=a shape=2x3"}, {"class", "y:out_of_enclosure"}, {"reason", "r2"}, {"replay", "kverify replay 2"}},
      {{"case", "kv1 op=rms_norm.fwd impl=a shape=2x3"}, {"class", "y:nan"}, {"reason", "r3"}, {"replay", "kverify replay 3"}}};
  std::ostringstream o;
  kv::print_failures_by_class(f, o);
  const std::string s = o.str();
  EXPECT_EQ(s.find("3 failures in 2 classes:\n"), 0u) << s;
  // Grouped: both NaN failures before the other class, each with its reason and replay.
  const size_t nan = s.find("  y:nan: 2\n"), ooe = s.find("  y:out_of_enclosure: 1\n");
  ASSERT_NE(nan, std::string::npos) << s;
  ASSERT_NE(ooe, std::string::npos) << s;
  EXPECT_LT(s.find("#4 rms_norm.fwd a: r1\n      kverify replay 1"), s.find("r3\n      kverify replay 3"));
  EXPECT_LT(s.find("kverify replay 3"), ooe);
  EXPECT_GT(s.find("r2\n      kverify replay 2"), ooe);
}
