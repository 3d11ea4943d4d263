// Determinism claims against the ops' semantics: a built-in impl claims batch_invariant
// only for outputs whose rows depend on their own rows (OpBinding::row_local), the host
// impls for all of those; the outputs the review found batch-dependent (a mean's divisor)
// do change their shared rows' bits with the batch, and the row-local ones do not.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "fuzz/batch.hpp"
#include "core/error.hpp"
#include "core/safetensors.hpp"
#include "test_util.hpp"

namespace {

/// Per op: its example case with each value of every choice attribute in turn (the
/// reduction, the mode, the layout, ...), normalized; values an op refuses are skipped.
std::vector<kv::Case> sample_cases(const kv::OpBinding& op, const std::string& impl) {
  std::vector<kv::Case> out;
  kv::Case base;
  base.op = op.name();
  base.impl = impl;
  base.shape = op.example_shape();
  base.seed = 1;
  std::vector<kv::Case> tries = {base};
  for (auto& a : op.attrs())
    for (auto& v : a.choices) {
      kv::Case c = base;
      c.attrs[a.name] = v;
      tries.push_back(c);
    }
  for (auto& c : tries) {
    try {
      kv::registry().normalize(c);
      out.push_back(c);
    } catch (const kv::UsageError&) {
    }
  }
  return out;
}

bool claims(const kv::Contract& k, const std::string& out, const std::string& claim) {
  auto it = k.determinism.find(out);
  return it != k.determinism.end() && std::find(it->second.begin(), it->second.end(), claim) != it->second.end();
}

}  // namespace

TEST(Claims, BatchInvarianceIsClaimedExactlyWhereAnOpsRowsAreIndependent) {
  int checked = 0;
  for (const kv::OpBinding* op : kv::registry().ops())
    for (const kv::Impl* im : kv::registry().impls(op->name())) {
      if (im->test_only()) continue;
      for (const kv::Case& c : sample_cases(*op, im->name())) {
        const kv::Contract k = im->contract(c, kv::host_device().profile);
        for (auto& t : op->tensors(c)) {
          if (t.role != kv::Role::output) continue;
          const bool local = op->row_local(c, t.name);
          // Never claimed where the rows depend on each other; the host impls (serial rows)
          // claim it wherever it holds.
          if (!local) {
            EXPECT_FALSE(claims(k, t.name, "batch_invariant")) << im->name() << " " << t.name << " " << c.str();
          }
          if (im->name() == "host") {
            EXPECT_EQ(claims(k, t.name, "batch_invariant"), local) << t.name << " " << c.str();
          }
          ++checked;
        }
      }
    }
  EXPECT_GT(checked, 40);
}

TEST(Claims, AMeanReductionsOutputsDependOnTheBatch) {
  // The review's verdicts where the rows meet: a mean divides by the batch's rows, a sum
  // over rows (dW, a summed loss) spans them; per-row losses and a sum's gradient do not.
  const auto& reg = kv::registry();
  auto local = [&](const std::string& op, const std::string& red, const std::string& out) {
    kv::Case c;
    c.op = op;
    c.impl = "host";
    c.shape = op.rfind("fused", 0) == 0 ? std::vector<int64_t>{8, 16, 32} : std::vector<int64_t>{8, 32};
    c.attrs["reduction"] = red;
    reg.normalize(c);
    return reg.op(op).row_local(c, out);
  };
  for (const char* op : {"cross_entropy", "fused_linear_cross_entropy"}) {
    const std::string fwd = std::string(op) + ".fwd", bwd = std::string(op) + ".bwd";
    const std::string grad = std::string(op) == "cross_entropy" ? "dlogits" : "dx";
    EXPECT_TRUE(local(fwd, "none", "loss"));
    EXPECT_FALSE(local(fwd, "mean", "loss"));
    EXPECT_FALSE(local(fwd, "sum", "loss"));
    EXPECT_TRUE(local(bwd, "none", grad));
    EXPECT_TRUE(local(bwd, "sum", grad));
    EXPECT_FALSE(local(bwd, "mean", grad));
  }
  EXPECT_FALSE(local("fused_linear_cross_entropy.bwd", "none", "dweight"));
}

namespace {

/// Runs c and its companion (extra leading rows) in this process with their outputs kept
/// and compares every output `out`'s shared rows: the number of elements whose bits differ.
int64_t shared_rows_differ(kv::Case c, int64_t extra, const std::string& out) {
  kv::registry().normalize(c);
  kv::Case big = c;
  big.shape[0] += extra;
  kv::registry().normalize(big);
  const auto dir = std::filesystem::temp_directory_path() / ("kv_claims_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  kv::RunEnv env = kvtest::host_env();
  env.outputs_dir = dir.string();
  kv::RefCache cache;
  std::map<std::string, kv::StoredTensor> small, large;
  for (auto [k, t] : {std::pair{&c, &small}, std::pair{&big, &large}}) {
    const auto j = kv::run_case(k->str(), env, cache);
    EXPECT_EQ(j["verdict"], "pass") << j.dump();
    *t = kv::read_safetensors((dir / (kv::hex64(k->case_id()) + ".safetensors")).string());
  }
  std::filesystem::remove_all(dir);
  // compare_batch holds the outputs the result claims: claim `out` for the comparison.
  nlohmann::json claim = {{"contract", {{"determinism", {{out, {"batch_invariant"}}}}}}};
  return kv::compare_batch(big, claim, small, large)["outputs"][out]["n_diff"].get<int64_t>();
}

kv::Case ce_bwd(const std::string& reduction) {
  kv::Case c;
  c.op = "cross_entropy.bwd";
  c.impl = "host";
  c.shape = {9, 40};
  c.attrs["reduction"] = reduction;
  c.seed = 3;
  return c;
}

}  // namespace

TEST(Claims, TheSharedRowsOfAMeansGradientChangeWithTheBatchAndASumsDoNot) {
  // Two more rows (not ignored, or the count would not change) move the mean's divisor.
  EXPECT_GT(shared_rows_differ(ce_bwd("mean"), 2, "dlogits"), 0);
  EXPECT_EQ(shared_rows_differ(ce_bwd("sum"), 2, "dlogits"), 0);
  EXPECT_EQ(shared_rows_differ(ce_bwd("none"), 2, "dlogits"), 0);
}
