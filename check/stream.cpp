// Streamed reference, enclosure and judging (check/stream.hpp). The whole-tensor path
// (run/runner.cpp) evaluates every output, refines the elements that miss the reference
// target in one call, marks those still missing unverifiable, and judges. Here each block
// of rows is evaluated and judged in order while no block has missed; from the first
// block that misses on, blocks only collect their misses, the rows holding them are
// gathered and refined in one call as the whole path would (the same rows, so the same
// precision and method), and those blocks are evaluated again with the refined values
// put in and judged.
#include "check/stream.hpp"

#include <algorithm>
#include <chrono>

#include "core/error.hpp"
#include "core/row_slice.hpp"
#include "core/sites.hpp"

namespace kv {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

/// An output as the streamed pass sees it.
struct OutInfo {
  std::string name;
  DType dtype;
  bool sliced = false;
  int64_t per = 0;  // elements per dim-0 index (sliced outputs)
};

using Misses = std::map<std::string, std::vector<int64_t>>;

/// The sliced outputs' elements that miss the reference target (ref_target_misses), by output.
Misses misses_of(const std::vector<OutInfo>& info, const RefResult& ref, const std::vector<OutputEnclosure>& enc) {
  Misses m;
  for (size_t o = 0; o < info.size(); ++o) {
    if (!info[o].sliced) continue;
    auto idx = ref_target_misses(ref.outputs[o], enc[o], info[o].dtype);
    if (!idx.empty()) m[info[o].name] = std::move(idx);
  }
  return m;
}

int64_t count(const Misses& m) {
  int64_t n = 0;
  for (auto& [k, v] : m) n += static_cast<int64_t>(v.size());
  return n;
}

/// The reference cannot decide these elements: never a pass (as the whole path marks them).
void mark_unverifiable(const std::vector<OutInfo>& info, const Misses& m, std::vector<OutputEnclosure>& enc) {
  for (size_t o = 0; o < info.size(); ++o)
    if (auto it = m.find(info[o].name); it != m.end())
      for (int64_t i : it->second) enc[o].unverifiable[static_cast<size_t>(i)] = 1;
}

}  // namespace

StreamPlan plan_stream(const Case& c, const OpBinding& op, double budget) {
  StreamPlan p;
  p.extent = c.shape.empty() ? 0 : c.shape[0];
  p.block = p.extent;
  p.dims = op.slice_dims(c);
  const auto specs = op.tensors(c);
  for (auto& t : specs)
    if (t.role == Role::output) (p.dims.count(t.name) ? p.sliced : p.whole).insert(t.name);
  // Per dim-0 index: the sliced tensors' share; per block besides: the shared inputs (each
  // block reads them); the whole pass reads every input and keeps the outputs not sliced.
  double per_index = 0, shared = 0;
  for (auto& t : specs) {
    const double n = static_cast<double>(numel(t.shape));
    const double bytes = t.role == Role::output ? kRefBytesPerOutput : kRefBytesPerInput;
    if (p.dims.count(t.name)) per_index += p.extent > 0 ? n / static_cast<double>(p.extent) * bytes : 0;
    else if (t.role == Role::input) shared += n * bytes;
    if (t.role == Role::input || p.whole.count(t.name)) p.whole_bytes += n * bytes;
  }
  if (p.whole.empty()) p.whole_bytes = 0;
  p.block_bytes = shared + per_index * static_cast<double>(p.extent);
  if (p.sliced.empty() || p.extent < 2 || p.block_bytes <= budget) return p;
  p.block = rows_per_block(per_index, shared, budget, p.extent);
  p.blocks = (p.extent + p.block - 1) / p.block;
  p.block_bytes = shared + per_index * static_cast<double>(p.block);
  return p;
}

double case_host_bytes(const Case& c, const OpBinding& op, const StreamPlan& plan) {
  double bytes = 0, whole_refs = 0, ref_all = 0;
  for (auto& t : op.tensors(c)) {
    TensorDesc d{t.name, t.dtype, t.shape, {}, 0};
    if (auto it = c.layout.find(t.name); it != c.layout.end()) d.strides = it->second.strides, d.offset = it->second.offset;
    const double storage = static_cast<double>(d.storage_elems()) * static_cast<double>(dtype_size(t.dtype));
    const double n = static_cast<double>(numel(t.shape));
    if (!c.alias.count(t.name)) bytes += storage;  // an aliased output shares its input's storage
    if (t.role == Role::input)
      for (auto& [out, in] : c.alias) bytes += in == t.name ? storage : 0;  // the snapshot's copy
    if (t.role == Role::output && !d.contiguous()) bytes += static_cast<double>(d.storage_elems());
    ref_all += n * (t.role == Role::output ? kRefBytesPerOutput : kRefBytesPerInput);
    if (plan.whole.count(t.name)) whole_refs += n * kRefBytesPerOutput;
  }
  if (!plan.streams()) return bytes + ref_all;
  return bytes + std::max(plan.whole_bytes, whole_refs + plan.block_bytes);
}

namespace {

/// One streamed evaluation, phase by phase: the outputs reduced over rows whole, then the
/// blocks in order, then (where a block missed) the refinement of the rows that missed and
/// those blocks again, then the verdicts.
class StreamPass {
 public:
  StreamPass(const Case& c, const OpBinding& op, const Contract& k, const StreamPlan& plan, const TensorSet& ins,
             const TensorSet& outs)
      : c_(with_sites(c, k)), op_(op), k_(k), plan_(plan), ins_(ins), outs_(outs) {
    for (auto& t : op.tensors(c))
      if (t.role == Role::output) {
        const bool sl = plan.sliced.count(t.name) != 0;
        info_.push_back({t.name, t.dtype, sl, sl ? numel(t.shape) / plan.extent : 0});
      }
  }

  /// Outputs reduced over rows, whole. A miss there would have the whole path's refinement
  /// recompute every row in a small case (run that path instead: false, whole_instead set)
  /// and nothing in a large one.
  bool evaluate_whole() {
    if (plan_.whole.empty()) return true;
    const auto t0 = Clock::now();
    op_.evaluate_only(c_, ins_, k_, plan_.whole, wref_, wenc_);
    r_.reference_s += since(t0);
    method_ = wref_.method;
    Misses wm;
    for (size_t o = 0; o < info_.size(); ++o)
      if (!info_[o].sliced)
        if (auto m = ref_target_misses(wref_.outputs[o], wenc_[o], info_[o].dtype); !m.empty()) wm[info_[o].name] = m;
    if (wm.empty()) return true;
    if (numel(c_.shape) <= kRefineAllMaxElements) {
      r_.whole_instead = true;
      return false;
    }
    refine_nothing_ = true;
    for (size_t o = 0; o < info_.size(); ++o)
      if (auto it = wm.find(info_[o].name); it != wm.end())
        for (int64_t i : it->second) wenc_[o].unverifiable[static_cast<size_t>(i)] = 1;
    r_.refined += count(wm), r_.insufficient += count(wm);
    return true;
  }

  /// Blocks in order: judged while none has missed; from the first miss on, misses collected.
  void evaluate_blocks() {
    for (auto& o : info_)
      if (o.sliced) judges_.emplace(o.name, JudgeStream(outs_.view(o.name)));
    for (int64_t bi = 0; bi < plan_.blocks; ++bi) {
      const int64_t b = bi * plan_.block, e = std::min(plan_.extent, b + plan_.block);
      evaluate(b, e);
      const Misses m = misses_of(info_, ref_, enc_);
      r_.refined += count(m);
      if (refine_nothing_) {
        mark_unverifiable(info_, m, enc_);
        r_.insufficient += count(m);
      } else if (!m.empty() || first_missed_ >= 0) {
        if (first_missed_ < 0) first_missed_ = bi;
        for (auto& o : info_)
          if (auto it = m.find(o.name); it != m.end())
            for (int64_t i : it->second) missed_[o.name].push_back(b * o.per + i);
        continue;
      }
      judge_block(b);
    }
  }

  bool missed() const { return first_missed_ >= 0; }

  /// The dim-0 indices holding a miss, gathered and refined together; the blocks from the
  /// first miss on evaluated again with the refined rows put in, and judged.
  void refine_missed() {
    const auto t0 = Clock::now();
    std::vector<int64_t> rows;
    std::map<std::string, int64_t> per;
    for (auto& o : info_) per[o.name] = o.per;
    for (auto& [n, idx] : missed_)
      for (int64_t i : idx) rows.push_back(i / per[n]);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    auto pos = [&](int64_t d) { return static_cast<int64_t>(std::lower_bound(rows.begin(), rows.end(), d) - rows.begin()); };
    Misses gmiss;
    for (auto& [n, idx] : missed_)
      for (int64_t i : idx) gmiss[n].push_back(pos(i / per[n]) * per[n] + i % per[n]);
    CaseSlice g = gather_rows(op_, c_, ins_, plan_.dims, rows);
    RefResult gref;
    std::vector<OutputEnclosure> genc;
    op_.evaluate_only(g.c, g.ts, k_, plan_.sliced, gref, genc);
    if (gref.method != method_ || misses_of(info_, gref, genc) != gmiss)
      throw HarnessError(op_.name() + ": the rows gathered for refinement evaluate unlike the blocks they came from");
    genc.clear();
    op_.refine(g.c, g.ts, gref, gmiss);
    r_.refine_s = since(t0);

    for (int64_t bi = first_missed_; bi < plan_.blocks; ++bi) {
      const int64_t b = bi * plan_.block, e = std::min(plan_.extent, b + plan_.block);
      evaluate(b, e);
      // The refined rows' values (the gathered case's, equal to the block's elsewhere).
      for (auto d = std::lower_bound(rows.begin(), rows.end(), b); d != rows.end() && *d < e; ++d)
        for (size_t o = 0; o < info_.size(); ++o) {
          if (!info_[o].sliced) continue;
          const int64_t n = info_[o].per, from = pos(*d) * n, to = (*d - b) * n;
          std::copy_n(gref.outputs[o].v.begin() + from, n, ref_.outputs[o].v.begin() + to);
          std::copy_n(gref.outputs[o].err.begin() + from, n, ref_.outputs[o].err.begin() + to);
        }
      const Misses still = misses_of(info_, ref_, enc_);
      mark_unverifiable(info_, still, enc_);
      r_.insufficient += count(still);
      judge_block(b);
    }
    method_ = gref.method;
  }

  /// Every output's verdict, in the op's order.
  StreamOutcome finish() {
    r_.method = method_;
    const auto t0 = Clock::now();
    for (size_t o = 0; o < info_.size(); ++o) {
      const TensorSlot& s = outs_.at(info_[o].name);
      if (info_[o].sliced) r_.verdicts.push_back(judges_.at(info_[o].name).finish(s.alias_of.empty()));
      else r_.verdicts.push_back(judge(s.view(), wref_.outputs[o], wenc_[o], s.alias_of.empty()));
    }
    r_.judge_s += since(t0);
    return std::move(r_);
  }

  StreamOutcome outcome() { return std::move(r_); }

 private:
  void evaluate(int64_t b, int64_t e) {
    const auto t0 = Clock::now();
    CaseSlice s = slice_rows(op_, c_, ins_, plan_.dims, b, e);
    op_.evaluate_only(s.c, s.ts, k_, plan_.sliced, ref_, enc_);
    r_.reference_s += since(t0);
    ++r_.blocks_evaluated;
    if (method_.empty()) method_ = ref_.method;
    if (ref_.method != method_)
      throw HarnessError(op_.name() + ": the reference of rows " + std::to_string(b) + ".." + std::to_string(e) +
                         " is '" + ref_.method + "', of the others '" + method_ + "'");
  }

  void judge_block(int64_t b) {
    const auto t0 = Clock::now();
    for (size_t o = 0; o < info_.size(); ++o)
      if (info_[o].sliced) judges_.at(info_[o].name).add(b * info_[o].per, ref_.outputs[o], enc_[o]);
    r_.judge_s += since(t0);
  }

  const Case c_;  // with the contract's rounding sites
  const OpBinding& op_;
  const Contract& k_;
  const StreamPlan& plan_;
  const TensorSet& ins_;
  const TensorSet& outs_;
  StreamOutcome r_;
  std::vector<OutInfo> info_;
  RefResult wref_;  // the outputs evaluated whole
  std::vector<OutputEnclosure> wenc_;
  bool refine_nothing_ = false;
  std::string method_;  // every evaluation's (before a refinement appends to it)
  std::map<std::string, JudgeStream> judges_;
  RefResult ref_;  // the block's
  std::vector<OutputEnclosure> enc_;
  Misses missed_;  // elements of the whole outputs
  int64_t first_missed_ = -1;
};

}  // namespace

StreamOutcome check_streamed(const Case& c, const OpBinding& op, const Contract& k, const StreamPlan& plan,
                             const TensorSet& ins, const TensorSet& outs) {
  StreamPass pass(c, op, k, plan, ins, outs);
  if (!pass.evaluate_whole()) return pass.outcome();
  pass.evaluate_blocks();
  if (pass.missed()) pass.refine_missed();
  return pass.finish();
}

}  // namespace kv
