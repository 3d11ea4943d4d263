// CUDA rope and rope_table: every layout, position scheme, dtype and config through the
// runner, the kernels' two access paths (16-byte chunks, element by element), in place,
// strided and offset tensors, 64-bit offsets, and what they reject. Skips without a GPU.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.hpp"
#include "kernels/rope/cuda.hpp"
#include "op_cases.hpp"
#include "ops/rope_common.hpp"
#include "test_util.hpp"

namespace {

using kv::DType;
using kvtest::expect_pass;
using kvtest::run_cuda;

kv::Case rope_case(const std::string& op, std::vector<int64_t> shape, const std::string& x, const std::string& layout,
                   const std::string& pos, const std::string& nw, const std::string& k_heads = "0",
                   const std::string& dist = "normal", uint64_t seed = 3) {
  kv::Case c = kvtest::op_case(op, std::move(shape), x, {{"layout", layout}, {"positions", pos}, {"k_heads", k_heads}},
                               dist, seed);
  c.impl = "cuda";
  c.config["num_warps"] = nw;
  return c;
}

std::string digest(const nlohmann::json& j, const std::string& t) { return j["outputs"][t]["digest"]["xxh64"].dump(); }

}  // namespace

// Every dtype x layout x position scheme x num_warps, fwd and bwd, on shapes that take each
// path: D = 64 (whole 16-byte chunks), D = 92 (Liger's odd head size: rotate_half's
// halves are not whole chunks, so element by element), GQA (fewer k heads) and more k
// heads than q, 3d with per-sample grids and padding (B = 3: odd samples end at F*H*W,
// even ones pad to S), and distributions with large and wide values.
TEST(Cuda, RopePassesAcrossLayoutsPositionsDtypesAndConfigs) {
  REQUIRE_GPU();
  struct Shape {
    std::vector<int64_t> shape;
    const char* k_heads;
    const char* dist;
  };
  const std::vector<Shape> shapes = {{{3, 37, 3, 64}, "2", "normal"}, {{2, 29, 2, 92}, "5", "wide"}, {{1, 17, 4, 12}, "0", "large"}};
  for (const char* op : {"rope.fwd", "rope.bwd"})
    for (const char* layout : {"rotate_half", "interleaved"})
      for (const char* pos : {"1d", "3d", "mrope"})
        for (const char* x : {"fp32", "fp16", "bf16"})
          for (const char* nw : {"1", "4", "32"})
            for (auto& s : shapes) expect_pass(rope_case(op, s.shape, x, layout, pos, nw, s.k_heads, s.dist));
}

// In place (q_out over q, k_out over k), strided and offset tensors: a padded head stride
// and a permuted (B, H, S, D) storage keep 16-byte chunks; a misaligned offset or a D
// stride of 2 falls back to element accesses; tables in fp32 (and strided) under bf16
// q/k; a batch stride past 2^31 elements (64-bit offsets).
TEST(Cuda, RopeHandlesInPlaceStridesOffsetsAndMixedTableDtypes) {
  REQUIRE_GPU();
  std::vector<kv::Case> cs;
  for (const char* op : {"rope.fwd", "rope.bwd"}) {
    const bool bwd = std::string(op) == "rope.bwd";
    const std::string q = bwd ? "dq_out" : "q", k = bwd ? "dk_out" : "k", qo = bwd ? "dq" : "q_out", ko = bwd ? "dk" : "k_out";
    for (const char* layout : {"rotate_half", "interleaved"})
      for (const char* pos : {"1d", "3d", "mrope"}) {
        kv::Case a = rope_case(op, {2, 33, 3, 64}, "bf16", layout, pos, "4", "2");
        a.alias[qo] = q, a.alias[ko] = k;
        cs.push_back(a);
        kv::Case b = rope_case(op, {2, 33, 3, 64}, "fp16", layout, pos, "8");
        b.layout[q] = {0, {33 * 3 * 72, 3 * 72, 72, 1}};  // padded heads, aligned
        b.layout[k] = {0, {3 * 33 * 64, 64, 33 * 64, 1}};  // (B, H, S, D) storage
        cs.push_back(b);
        kv::Case e = b;
        e.layout[ko] = {3, {}};  // misaligned: element accesses
        cs.push_back(e);
        kv::Case m = rope_case(op, {1, 20, 2, 32}, "bf16", layout, pos, "2");
        m.layout[q] = {0, {2 * 20 * 64, 2 * 64, 64, 2}};  // D stride 2
        const bool three = std::string(pos) == "3d";
        for (auto& t : kv::table_names_all())
          if ((t.size() > 3) == three) m.dtypes[t] = DType::f32;
        m.layout[three ? "cos_h" : "cos"] = {5, {}};
        cs.push_back(m);
      }
    kv::Case big = rope_case(op, {2, 3, 2, 64}, "bf16", "rotate_half", "1d", "1");
    big.layout[q] = {0, {(int64_t(1) << 31) + 512, 2 * 64, 64, 1}};
    cs.push_back(big);
  }
  for (auto& c : cs) expect_pass(c);
}

// The same bits under every config, on both access paths, and as the host impl's fp32
// definition (both compute exactly the definition's roundings).
TEST(Cuda, RopeKeepsItsDeterminismClaimsAndTheHostBits) {
  REQUIRE_GPU();
  for (const char* layout : {"rotate_half", "interleaved"})
    for (const char* pos : {"1d", "3d", "mrope"}) {
      kv::Case c = rope_case("rope.fwd", {3, 41, 3, 64}, "bf16", layout, pos, "1", "1");
      auto ref = run_cuda(c);
      kv::Case h = c;
      h.impl = "host";
      h.config.clear();
      auto host = kvtest::run_in_process(h);
      for (const char* t : {"q_out", "k_out"}) EXPECT_EQ(digest(ref, t), digest(host, t)) << layout << " " << pos << " " << t;
      for (const char* nw : {"2", "32"}) {
        kv::Case o = c;
        o.config["num_warps"] = nw;
        o.layout["q"] = {1, {}};  // element accesses
        auto j = run_cuda(o);
        for (const char* t : {"q_out", "k_out"}) EXPECT_EQ(digest(ref, t), digest(j, t)) << layout << " " << pos << " " << nw;
      }
    }
}

// rope_table: both layouts, every dtype and num_warps, positions up to 2^24 - 1 (large
// angles: cosf/sinf's slow argument reduction), strided outputs.
TEST(Cuda, RopeTablePassesAcrossLayoutsDtypesAndConfigs) {
  REQUIRE_GPU();
  for (const char* layout : {"rotate_half", "interleaved"})
    for (const char* x : {"fp32", "fp16", "bf16"})
      for (const char* nw : {"1", "8", "32"}) {
        for (auto [shape, off] : std::vector<std::pair<std::vector<int64_t>, const char*>>{
                 {{40, 16}, "32700"}, {{333, 92}, "0"}, {{64, 128}, "16777151"}}) {
          kv::Case c = kvtest::op_case("rope_table.fwd", shape, x, {{"layout", layout}, {"pos_offset", off}});
          c.impl = "cuda";
          c.config["num_warps"] = nw;
          expect_pass(c);
        }
        kv::Case s = kvtest::op_case("rope_table.fwd", {50, 64}, x, {{"layout", layout}});
        s.impl = "cuda";
        s.config["num_warps"] = nw;
        s.layout["cos"] = {7, {80, 1}};
        s.layout["sin"] = {0, {1, 50}};  // column-major
        expect_pass(s);
      }
}

// The seed shape (3d rope of the first source document, 1x32760x12x128, grid 21x30x52),
// bf16, q and k in place, both layouts, fwd and bwd.
TEST(Cuda, RopePassesAtTheSeedShape) {
  REQUIRE_GPU();
  for (const char* op : {"rope.fwd", "rope.bwd"})
    for (const char* layout : {"rotate_half", "interleaved"}) {
      kv::Case c = rope_case(op, {1, 32760, 12, 128}, "bf16", layout, "3d", "4");
      c.attrs["grid"] = "21x30x52";
      const bool bwd = std::string(op) == "rope.bwd";
      c.alias[bwd ? "dq" : "q_out"] = bwd ? "dq_out" : "q";
      c.alias[bwd ? "dk" : "k_out"] = bwd ? "dk_out" : "k";
      expect_pass(c);
    }
}

// Clear reasons before launch: one dtype for q, k and their outputs; in place only over
// the tensor's own input; the device's thread limit (warp size 64 makes 32 warps 2048
// threads).
TEST(Cuda, RopeRejectsWhatItCannotRun) {
  auto reason = [](kv::Case c, const std::string& profile = "") {
    kv::registry().normalize(c);
    kv::DeviceProfile p;
    p.apply_overrides(profile);
    return kv::registry().impl(c.op, c.impl).invalid_reason(c, p).value_or("");
  };
  kv::Case d = rope_case("rope.fwd", {1, 8, 2, 64}, "bf16", "rotate_half", "1d", "4");
  d.dtypes["k"] = DType::f16;
  EXPECT_NE(reason(d).find("share one dtype"), std::string::npos) << reason(d);
  kv::Case a = rope_case("rope.fwd", {1, 8, 2, 64}, "bf16", "rotate_half", "1d", "4");
  a.alias["k_out"] = "q";
  EXPECT_NE(reason(a).find("output k_out cannot be written over q"), std::string::npos) << reason(a);
  kv::Case b = rope_case("rope.bwd", {1, 8, 2, 64}, "fp32", "interleaved", "3d", "4");
  b.alias["dq"] = "dk_out";
  EXPECT_NE(reason(b).find("output dq cannot be written over dk_out"), std::string::npos) << reason(b);
  REQUIRE_GPU();  // the thread limit asks the kernels (cudaFuncGetAttributes)
  kv::Case w = rope_case("rope.fwd", {1, 8, 2, 64}, "bf16", "interleaved", "mrope", "32");
  EXPECT_NE(reason(w, "warp_size=64").find("2048 threads"), std::string::npos) << reason(w, "warp_size=64");
  EXPECT_EQ(reason(w), "");
  kv::Case t = kvtest::op_case("rope_table.fwd", {16, 64}, "fp32");
  t.impl = "cuda";
  t.config["num_warps"] = "32";
  EXPECT_NE(reason(t, "warp_size=64").find("2048 threads"), std::string::npos) << reason(t, "warp_size=64");
  EXPECT_EQ(reason(t), "");
}

// Which tensors take the 16-byte path (the speed of the seed shape depends on it), without
// a GPU: contiguous bf16/fp32 heads of 128 in both layouts; not a misaligned first element,
// a D stride of 2, a head stride off 16 bytes, or rotate_half halves of 46 bf16 (Liger's
// D = 92), while interleaved D = 92 fp32 (368 bytes) still is whole chunks.
TEST(Cuda, RopeTakesSixteenByteChunksWhereAligned) {
  auto t = [](DType x, std::vector<int64_t> shape, std::vector<int64_t> strides = {}) {
    return kv::TensorDesc{"q", x, std::move(shape), std::move(strides), 0};
  };
  const uintptr_t base = 0x7f0000000100u;
  for (bool il : {false, true}) {
    EXPECT_TRUE(kv::rope_whole_chunks(t(DType::bf16, {1, 32760, 12, 128}), base, il));
    EXPECT_TRUE(kv::rope_whole_chunks(t(DType::f32, {2, 33, 3, 64}, {33 * 3 * 72, 3 * 72, 72, 1}), base, il));
    EXPECT_FALSE(kv::rope_whole_chunks(t(DType::bf16, {1, 32760, 12, 128}), base + 2, il));
    EXPECT_FALSE(kv::rope_whole_chunks(t(DType::bf16, {1, 20, 2, 32}, {2 * 20 * 64, 2 * 64, 64, 2}), base, il));
    EXPECT_FALSE(kv::rope_whole_chunks(t(DType::bf16, {2, 4, 3, 64}, {4 * 3 * 68, 3 * 68, 68, 1}), base, il));
  }
  EXPECT_FALSE(kv::rope_whole_chunks(t(DType::bf16, {3, 423, 73, 92}), base, false));
  EXPECT_TRUE(kv::rope_whole_chunks(t(DType::f32, {3, 423, 73, 92}), base, true));
  EXPECT_TRUE(kv::rope_whole_chunks(t(DType::bf16, {1, 5, 1, 64}, {7, 64, 3, 1}), base, false));  // size-1 dims: strides unused
}
