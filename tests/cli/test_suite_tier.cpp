// suites/offset-2to31-cuda.json (issue 18): every CUDA impl with its largest element
// offset one row either side of 2^31 and at it. Its cases normalize, each offset is where
// the suite says, and each case fits the H100 host (125 GiB available) and an 80 GB GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "run/runner.hpp"
#include "check/stream.hpp"
#include "run/suite.hpp"
#include "core/registry.hpp"
#include "core/row_slice.hpp"

namespace {

constexpr int64_t kTwo31 = int64_t(1) << 31;

/// The farthest storage element of any of the case's tensors; for fused_linear_cross_entropy
/// also of its logits (BT x V), which its impls compute a chunk of rows at a time.
int64_t largest_offset(const kv::Case& c) {
  int64_t far = -1;
  for (auto& t : kv::registry().op(c.op).tensors(c)) {
    kv::TensorDesc d{t.name, t.dtype, t.shape, {}, 0};
    if (auto it = c.layout.find(t.name); it != c.layout.end()) d.strides = it->second.strides, d.offset = it->second.offset;
    far = std::max(far, d.storage_elems() - 1);
  }
  if (c.op.rfind("fused_linear_cross_entropy", 0) == 0) far = std::max(far, c.shape[0] * c.shape[2] - 1);
  return far;
}

/// What the suite calls a row: the elements per index of the first dimension (a row of
/// logits for fused_linear_cross_entropy, whose first dimension indexes them).
int64_t row_of(const kv::Case& c) {
  if (c.op.rfind("fused_linear_cross_entropy", 0) == 0) return c.shape[2];
  return kv::numel(c.shape) / c.shape[0];
}

/// The ops with a CUDA impl: the registry's in a CUDA build, else the ops whose folder
/// kernels/<op>/ holds a cuda.cpp (README, Layout: the short forms flce and glu).
std::set<std::string> cuda_ops() {
  std::set<std::string> ops;
  for (auto* op : kv::registry().ops())
    for (auto* i : kv::registry().impls(op->name()))
      if (i->name() == "cuda") ops.insert(op->name());
  if (!ops.empty()) return ops;
  for (auto* op : kv::registry().ops()) {
    std::string folder = op->name().substr(0, op->name().find('.'));
    if (folder == "fused_linear_cross_entropy") folder = "flce";
    if (folder == "swiglu" || folder == "geglu") folder = "glu";
    if (std::filesystem::exists(std::string(KV_SOURCE_DIR) + "/kernels/" + folder + "/cuda.cpp")) ops.insert(op->name());
  }
  for (const char* o : {"rms_norm.fwd", "rope_table.fwd", "geglu.bwd", "fused_linear_cross_entropy.bwd"})
    EXPECT_TRUE(ops.count(o)) << o << " not found from kernels/*/cuda.cpp";
  return ops;
}

/// Per op and family, the offsets a suite's cases meet, in rows from 2^31; every case
/// normalizes (UsageError otherwise) and fits the H100 host and GPU.
std::map<std::string, std::set<int64_t>> offsets_met(const std::string& suite) {
  auto entries = kv::load_suite(std::string(KV_SOURCE_DIR) + "/suites/" + suite);
  for (auto& e : entries) {
    EXPECT_EQ(e.impls, std::vector<std::string>{"cuda"});
    e.impls = {"host"};  // the same ops, shapes, attributes and layouts on this build's impls
  }
  const std::vector<kv::Case> cases = kv::expand_suite(entries, "host");
  EXPECT_FALSE(cases.empty());
  std::map<std::string, std::set<int64_t>> met;
  for (const kv::Case& c : cases) {
    SCOPED_TRACE(c.str());
    // Contiguous: the largest offset is numel - 1; starting one element in, numel.
    const int64_t row = row_of(c), far = largest_offset(c);
    const bool shifted = !c.layout.empty();
    for (auto& [name, l] : c.layout) EXPECT_EQ(l.offset, 1) << name;
    const int64_t from = (shifted ? far : far + 1) - kTwo31;
    EXPECT_TRUE(from == -row || from == 0 || from == row) << "largest offset " << far << ", row " << row;
    met[c.op + (shifted ? " one element in" : " contiguous")].insert(from / row);
    const kv::OpBinding& op = kv::registry().op(c.op);
    const kv::StreamPlan plan = kv::plan_stream(c, op, 256.0 * (1 << 20));
    EXPECT_LT(kv::case_host_bytes(c, op, plan), 0.8 * 125.0 * (1 << 30)) << "refused on the H100 host";
    EXPECT_LT(kv::case_tensor_bytes(c, op), 70e9) << "beyond an H100's memory";
  }
  return met;
}

bool is_flce(const std::string& op) { return op.rfind("fused_linear_cross_entropy", 0) == 0; }

TEST(SuiteTier, EveryCudaImplMeetsTwoToThe31WithinARow) {
  // The tier: each tensor spanning the rows one element in, so the largest offset is 2^31
  // and a row either side (FLCE, whose impl refuses misaligned rows: its logits, contiguous).
  auto met = offsets_met("offset-2to31-cuda.json");
  for (const std::string& op : cuda_ops())
    EXPECT_EQ(met[op + (is_flce(op) ? " contiguous" : " one element in")], (std::set<int64_t>{-1, 0, 1})) << op;
  // Its contiguous twins: 2^31 - 1 and a row either side, the vector paths.
  met = offsets_met("offset-2to31-cuda-aligned.json");
  for (const std::string& op : cuda_ops())
    if (!is_flce(op)) EXPECT_EQ(met[op + " contiguous"], (std::set<int64_t>{-1, 0, 1})) << op;
}

}  // namespace

#ifdef KV_HAVE_CUDA
// The CUDA impls take every case of both suites as written (an H100's profile): a case the
// impl refuses would be a `skip` on the GPU (FLCE bwd bf16 needs grad_rounding=x_dtype).
// Reasons that need the device (the row kernels' thread limits, cudaFuncGetAttributes) are
// the GPU's to give: without one those cases are left out, the others still asked.
TEST(SuiteTier, TheCudaImplsTakeEveryCase) {
  kv::DeviceProfile p;
  p.sm_count = 132;
  int asked = 0;
  for (const char* suite : {"offset-2to31-cuda.json", "offset-2to31-cuda-aligned.json"})
    for (kv::Case c : kv::expand_suite(kv::load_suite(std::string(KV_SOURCE_DIR) + "/suites/" + suite), "cuda")) {
      std::optional<std::string> why;
      try {
        why = kv::registry().impl(c.op, c.impl).invalid_reason(c, p);
      } catch (const std::exception&) {
        continue;
      }
      ++asked;
      EXPECT_FALSE(why.has_value()) << suite << ": " << c.str() << ": " << why.value_or("");
    }
  if (asked == 0) GTEST_SKIP() << "no CUDA device to ask";
  std::printf("%d cases asked\n", asked);
}
#endif
