// FLCE's one-pass reference and enclosure over dense products. Rows are taken in chunks
// so the BT x V logits never exist whole; within a chunk the products are tiled over
// oneTBB, each tile one single-threaded Eigen product (reference/gemm.hpp).
//
// Every sum of products s = sum_i a_i b_i is computed twice: in double for its value, and
// in float over |a_i| and |b_i| rounded up, for a bound on S = sum_i |a_i b_i|. Both rest
// on Higham, Accuracy and Stability, Lemma 3.1 and eq. (3.5): a sum of n products
// evaluated in any order, products rounded or fused, errs by at most gamma_{n+1}(u) times
// the sum of the magnitudes (n+1 covers the product's own rounding). With every term
// non-negative that gives S <= s_float / (1 - gamma_{n+1}(2^-24)); the float products
// flush subnormal results to zero, losing at most 2^-126 in each of their 2n + 1
// operations, and double products below the normal range lose 2^-1075 each.
#include "ops/flce_fast.hpp"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>

#include "ops/ce_common.hpp"
#include "ops/flce.hpp"
#include "ops/flce_certify.hpp"
#include "ops/flce_fast_bounds.hpp"
#include "reference/dual_policy.hpp"
#include "reference/flce.hpp"
#include "reference/gemm.hpp"

namespace kv {

namespace {

using namespace flce_fast;

struct Chunk {
  int64_t r0 = 0, n = 0;
};

class FlceFast {
 public:
  FlceFast(const Case& c, const OpInputs& in, const Contract& k, bool bwd)
      : in_(in), k_(k), bwd_(bwd), p_(&k), gemm_(gemm_table()) {
    g_ = flce_geom(c);
    q_ = ce_params(c, g_.v);
    x_ = in["x"].data();
    w_ = in["weight"].data();
    b_ = g_.bias ? in["bias"].data() : nullptr;
    xa_ = abs_float(in["x"]);
    x_zero_.resize(static_cast<size_t>(g_.bt));
    x_fin_max_.resize(static_cast<size_t>(g_.bt));
    par_rows(g_.bt, true, [&](int64_t r) {
      x_zero_[r] = std::all_of(x_ + r * g_.h, x_ + (r + 1) * g_.h, [](double e) { return e == 0; });
      x_fin_max_[r] = finite_max(x_ + r * g_.h, g_.h);
    });
    wa_ = abs_float(in["weight"]);
    // Is each product x_h W_vh an accumulator number (no rounding in acc())? Significands
    // of p_x and p_w bits multiply into at most p_x + p_w bits; the range check keeps
    // every nonzero product normal and finite in the accumulator's format.
    const int px = format_of(c.dtypes.at("x")).p, pw = format_of(c.dtypes.at("weight")).p;
    logit_prod_exact_ = px + pw <= format_of(k.acc).p && xa_.lo * wa_.lo >= min_normal(k.acc) &&
                        xa_.hi * wa_.hi <= 0.5 * max_finite(k.acc);
  }

  void run(RefResult& ref, std::vector<OutputEnclosure>& out) {
    times_.lap("setup");
    ref.method += std::string("+gemm:eigen-") + gemm_.isa;
    const int64_t bt = g_.bt;
    if (!bwd_) {
      std::vector<Dual> loss(static_cast<size_t>(bt));
      for (int64_t r0 = 0; r0 < bt; r0 += kRows) {
        Chunk ch{r0, std::min(kRows, bt - r0)};
        logits(ch);
        if (r0 == 0) certify_logits(ch);
        times_.lap("logits");
        par_rows(ch.n, true, [&](int64_t i) {
          const int64_t r = ch.r0 + i;
          auto l = logit_row(ch, i);
          loss[r] = ce_row_loss(p_, q_, l.data(), nullptr, static_cast<int64_t>(in_["target"][r]));
        });
        times_.lap("ce");
      }
      auto sink = [&](int o, int64_t i, const Dual& e) {
        put_ref(ref.outputs[o], i, e.ref);
        put_enc(out[o], i, e.con);
      };
      ce_emit_loss(p_, q_, bt, in_["target"], nullptr, sink, RowSet{}, true,
                   [&](int64_t r) { return loss[r]; });
    } else {
      backward(ref, out);
    }
    ref.method += "+sampled:mpfr-256(" + std::to_string(sampled_) + ")";
  }

 private:
  // Rows per chunk (whole dbias chunks). Tiles are shaped so each chunk streams W through
  // the products a few times only: the logits tile all of the chunk's rows, dx tiles 256 x 256.
  static constexpr int64_t kRows = 8 * kColChunk;

  /// L = x W^T and its magnitudes for the chunk's rows.
  void logits(const Chunk& ch) {
    const int64_t v = g_.v, h = g_.h;
    lm_.resize(static_cast<size_t>(ch.n * v));
    ls_.resize(static_cast<size_t>(ch.n * v));
    tiles(ch.n, v, ch.n, 1024, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
      gemm_.d(GemmOp::nt, i1 - i0, j1 - j0, h, x_ + (ch.r0 + i0) * h, h, w_ + j0 * h, h, lm_.data() + i0 * v + j0, v,
              false);
      gemm_.s(GemmOp::nt, i1 - i0, j1 - j0, h, xa_.a.data() + (ch.r0 + i0) * h, h, wa_.a.data() + j0 * h, h,
              ls_.data() + i0 * v + j0, v, false);
    });
  }

  /// Certification samples of the first chunk's logits (before the bias).
  void certify_logits(const Chunk& ch) {
    const SumBound sb(g_.h);
    std::vector<ProductSample> smp;
    for (auto [i, v] : {std::pair<int64_t, int64_t>{0, 0}, {ch.n - 1, g_.v - 1}}) {
      const int64_t e = i * g_.v + v;
      smp.push_back({"logit (" + std::to_string(ch.r0 + i) + ", " + std::to_string(v) + ")", x_ + (ch.r0 + i) * g_.h,
                     1, w_ + v * g_.h, 1, g_.h, lm_[e], rup(sb.err(sb.mag(ls_[e])))});
    }
    certify_samples(smp);
    sampled_ += static_cast<int>(smp.size());
  }

  /// Certification samples of the first chunk's dx sums (G's rows times W's columns).
  void certify_dx(const Chunk& ch, const Buf<double>& gm, const Buf<double>& dxm, const Buf<float>& dxa,
                  const GradSum& dx_sum) {
    const int64_t v = g_.v, h = g_.h;
    std::vector<ProductSample> smp;
    for (auto [i, kk] : {std::pair<int64_t, int64_t>{0, 0}, {ch.n - 1, h - 1}}) {
      const int64_t e = i * h + kk;
      smp.push_back({"dx (" + std::to_string(ch.r0 + i) + ", " + std::to_string(kk) + ")", gm.data() + i * v, 1,
                     w_ + kk, h, v, dxm[e], dx_sum.mid_bound(dxa[e])});
    }
    certify_samples(smp);
    sampled_ += static_cast<int>(smp.size());
  }

  /// Row i of the chunk's logits as enclosure pairs: the products x_h W_vh are exact in
  /// double (two significands of at most 24 bits), so the double sum errs by at most
  /// g53 S; under the contract each product is rounded to the accumulator unless it is
  /// known to be an accumulator number, then the "h" axis's contract applies (as in
  /// flce_logits_row), then the bias is added in the accumulator.
  std::vector<Dual> logit_row(const Chunk& ch, int64_t i) const {
    const SumBound sb(g_.h);
    const AccRound ar(k_);
    const AxisContract ax(k_, "h");
    std::vector<Dual> l(static_cast<size_t>(g_.v));
    for (int64_t v = 0; v < g_.v; ++v) {
      const double m = lm_[i * g_.v + v];
      const double S = sb.mag(ls_[i * g_.v + v]);
      Dual d;
      if (x_zero_[static_cast<size_t>(ch.r0 + i)]) {
        d = {enc_exact(m), enc_exact(m)};  // every product is an exact zero
      } else if (!enc_detail::finite(m)) [[unlikely]] {
        // A non-finite x_h (or W_vh): the double sum of the exact products is IEEE's value,
        // ±inf or NaN, in any order (its finite products cannot overflow a double). Under
        // the contract the finite products' partial sums might still overflow the other way
        // (inf - inf): bounded by h max|x_h| max|W_vh| over the finite values.
        const double fin = rup(static_cast<double>(g_.h) * x_fin_max_[static_cast<size_t>(ch.r0 + i)] * wa_.fin_hi);
        d.ref = enc_exact(m);
        d.con = Enc{m, 0.0, false, std::isinf(m) && !(rup(fin * (1.0 + ar.u)) * (1.0 + ax.g) < max_finite(ax.acc))};
      } else {
        d.ref = Enc{m, rup(sb.err(S)), false, false};
        const double tr = logit_prod_exact_ ? 0.0 : rup(ar.u * S + static_cast<double>(g_.h) * ar.eta);
        d.con = ax.apply(Enc{m, rup(d.ref.r + tr), false, false}, rup(S + tr), false, false);
      }
      if (b_) d = p_.acc(d + p_.c(b_[v]));
      if (g_.logits) d = p_.mand(d, *g_.logits);  // site flce.logits
      l[v] = d;
    }
    return l;
  }

  /// What the backward pass carries across chunks: dW's products and dbias's sums, and
  /// per chunk the gradient rows G (values, and scaled magnitudes, contract radii and
  /// reference radii for the float products), dx's products and the rows' flags.
  struct Bwd {
    Dual wsum, wbar;
    bool any;
    Buf<double> dwm;
    Buf<float> dwa, dwr, dwf;
    std::vector<DualPolicy::Sum> db;
    Buf<Dual> gd;  // the chunk's gradient rows, kept for dbias
    Buf<double> gm, dxm;
    Buf<float> ga, gr, gf, dxa, dxr, dxf;
    // Per row: some g_v unverifiable, some g_v admitting NaN, every g_v an exact zero.
    std::vector<char> unv, nan, g_zero;
    bool unv_all = false, nan_all = false;
    GradSum dx_sum, dw_sum;
    explicit Bwd(const FlceFast& f)
        : wsum(ce_weight_sum(f.p_, f.q_, f.in_["target"], nullptr)),
          wbar(f.p_.c(1)),
          any(numel_nonignored(f.q_, f.in_["target"]) > 0),
          dwm(static_cast<size_t>(f.g_.v * f.g_.h)),
          dwa(static_cast<size_t>(f.g_.v * f.g_.h)),
          dwr(dwa.size()),
          dwf(dwa.size()),
          db(f.b_ ? static_cast<size_t>(f.g_.v) : 0, f.p_.sum()),
          unv(static_cast<size_t>(kRows)),
          nan(static_cast<size_t>(kRows)),
          g_zero(static_cast<size_t>(kRows)),
          dx_sum(f.g_.v, f.k_, "v"),
          dw_sum(f.g_.bt, f.k_, "rows") {}
  };

  void backward(RefResult& ref, std::vector<OutputEnclosure>& out) {
    const int64_t bt = g_.bt;
    Bwd s(*this);
    for (int64_t r0 = 0; r0 < bt; r0 += kRows) {
      Chunk ch{r0, std::min(kRows, bt - r0)};
      logits(ch);
      if (r0 == 0) certify_logits(ch);
      times_.lap("logits");
      gradient_rows(ch, s);
      times_.lap("ce");
      dx_products(ch, s);
      if (r0 == 0) certify_dx(ch, s.gm, s.dxm, s.dxa, s.dx_sum);
      times_.lap("dx gemm");
      dx_out(ch, s, ref, out);
      times_.lap("dx out");
      dw_products(ch, s);
      times_.lap("dw gemm");
      if (b_) dbias_sums(ch, s);
    }
    if (bt == 0) {  // no chunk wrote dW's products (uninitialized buffers): a sum over no rows is 0
      std::fill(s.dwm.begin(), s.dwm.end(), 0.0);
      for (auto* b : {&s.dwa, &s.dwr, &s.dwf}) std::fill(b->begin(), b->end(), 0.0f);
    }
    dw_out(s, ref, out);
    times_.lap("dw out");
  }

  /// The chunk's gradient rows G (cross-entropy's per-row gradient of the logits), each
  /// g_v's contract enclosure recentred on the reference midpoint.
  void gradient_rows(const Chunk& ch, Bwd& s) {
    const int64_t v = g_.v;
    const auto& target = in_["target"];
    s.gm.resize(static_cast<size_t>(ch.n * v));
    s.ga.resize(s.gm.size());
    s.gr.resize(s.gm.size());
    s.gf.resize(s.gm.size());
    if (b_) s.gd.resize(s.gm.size());
    par_rows(ch.n, true, [&](int64_t i) {
      const int64_t r = ch.r0 + i;
      auto l = logit_row(ch, i);
      std::vector<Dual> g(static_cast<size_t>(v));
      ce_row_grad(p_, q_, l.data(), nullptr, static_cast<int64_t>(target[r]), s.wbar,
                  ce_scale(p_, q_, in_["dloss"], r, s.wsum, s.any), g.data());
      flce_round_grad(p_, g_, g.data());
      // The contract's enclosure of g_v, recentred on the reference midpoint.
      bool u = false, nn = false, zero = true;
      for (int64_t j = 0; j < v; ++j) {
        const Dual& e = g[j];
        const double rc = rup(e.con.r + std::fabs(e.con.m - e.ref.m));
        const double a = std::fabs(e.ref.m) + std::max(e.ref.r, rc);
        s.gm[i * v + j] = e.ref.m;
        s.ga[i * v + j] = GradSum::scaled_up(a * (1.0 + 0x1p-52));
        s.gr[i * v + j] = GradSum::scaled_up(rc);
        s.gf[i * v + j] = GradSum::scaled_up(e.ref.r);
        u = u || e.con.unv;
        nn = nn || e.con.nan;
        zero = zero && e.ref.m == 0 && e.ref.r == 0 && e.con.m == 0 && e.con.r == 0 && !e.con.nan;
      }
      s.g_zero[i] = zero;
      s.unv[i] = u;
      s.nan[i] = nn;
      if (b_) std::copy(g.begin(), g.end(), s.gd.begin() + i * v);
    });
    for (int64_t i = 0; i < ch.n; ++i) s.unv_all = s.unv_all || s.unv[i], s.nan_all = s.nan_all || s.nan[i];
  }

  /// dx = G W for the chunk's rows, and the float products bounding it.
  void dx_products(const Chunk& ch, Bwd& s) {
    const int64_t v = g_.v, h = g_.h;
    s.dxm.resize(static_cast<size_t>(ch.n * h));
    s.dxa.resize(s.dxm.size());
    s.dxr.resize(s.dxm.size());
    s.dxf.resize(s.dxm.size());
    tiles(ch.n, h, 256, 256, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
      gemm_.d(GemmOp::nn, i1 - i0, j1 - j0, v, s.gm.data() + i0 * v, v, w_ + j0, h, s.dxm.data() + i0 * h + j0, h, false);
      gemm_.s(GemmOp::nn, i1 - i0, j1 - j0, v, s.ga.data() + i0 * v, v, wa_.a.data() + j0, h, s.dxa.data() + i0 * h + j0,
              h, false);
      gemm_.s(GemmOp::nn, i1 - i0, j1 - j0, v, s.gr.data() + i0 * v, v, wa_.a.data() + j0, h, s.dxr.data() + i0 * h + j0,
              h, false);
      gemm_.s(GemmOp::nn, i1 - i0, j1 - j0, v, s.gf.data() + i0 * v, v, wa_.a.data() + j0, h, s.dxf.data() + i0 * h + j0,
              h, false);
    });
  }

  /// The chunk's rows of dx: reference and enclosure.
  void dx_out(const Chunk& ch, const Bwd& s, RefResult& ref, std::vector<OutputEnclosure>& out) const {
    const int64_t h = g_.h;
    par_rows(ch.n, true, [&](int64_t i) {
      const int64_t r = ch.r0 + i;
      for (int64_t kk = 0; kk < h; ++kk) {
        const int64_t e = i * h + kk;
        // A row of exact zeros (an ignored target) gives exact zeros.
        Dual d = s.g_zero[i] ? Dual{enc_exact(0), enc_exact(0)}
                             : s.dx_sum.at(s.dxm[e], s.dxa[e], s.dxr[e], s.dxf[e], s.unv[i], s.nan[i]);
        put_ref(ref.outputs[0], r * h + kk, d.ref);
        put_enc(out[0], r * h + kk, d.con);
      }
    });
  }

  /// dW += G^T x over the chunk's rows.
  void dw_products(const Chunk& ch, Bwd& s) {
    const int64_t v = g_.v, h = g_.h;
    const bool first = ch.r0 == 0;
    tiles(v, h, 512, h, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
      gemm_.d(GemmOp::tn, i1 - i0, j1 - j0, ch.n, s.gm.data() + i0, v, x_ + ch.r0 * h + j0, h,
              s.dwm.data() + i0 * h + j0, h, !first);
      gemm_.s(GemmOp::tn, i1 - i0, j1 - j0, ch.n, s.ga.data() + i0, v, xa_.a.data() + ch.r0 * h + j0, h,
              s.dwa.data() + i0 * h + j0, h, !first);
      gemm_.s(GemmOp::tn, i1 - i0, j1 - j0, ch.n, s.gr.data() + i0, v, xa_.a.data() + ch.r0 * h + j0, h,
              s.dwr.data() + i0 * h + j0, h, !first);
      gemm_.s(GemmOp::tn, i1 - i0, j1 - j0, ch.n, s.gf.data() + i0, v, xa_.a.data() + ch.r0 * h + j0, h,
              s.dwf.data() + i0 * h + j0, h, !first);
    });
  }

  /// dbias: column sums in chunks of kColChunk rows merged in order, as column_sums.
  void dbias_sums(const Chunk& ch, Bwd& s) {
    const int64_t v = g_.v;
    for (int64_t s0 = 0; s0 < ch.n; s0 += kColChunk)
      par_rows(v, true, [&](int64_t j) {
        auto part = p_.sum();
        for (int64_t i = s0; i < std::min(ch.n, s0 + kColChunk); ++i) part.add(s.gd[i * v + j]);
        s.db[j].merge(part);
      });
  }

  /// dW and dbias once every chunk was summed: reference and enclosure.
  void dw_out(Bwd& s, RefResult& ref, std::vector<OutputEnclosure>& out) {
    const int64_t h = g_.h;
    par_rows(g_.v, true, [&](int64_t j) {
      for (int64_t kk = 0; kk < h; ++kk) {
        const int64_t e = j * h + kk;
        Dual d = s.dw_sum.at(s.dwm[e], s.dwa[e], s.dwr[e], s.dwf[e], s.unv_all, s.nan_all);
        put_ref(ref.outputs[1], e, d.ref);
        put_enc(out[1], e, d.con);
      }
      if (b_) {
        Dual d = p_.finish(s.db[j], "rows");
        put_ref(ref.outputs[2], j, d.ref);
        put_enc(out[2], j, d.con);
      }
    });
  }

  PhaseTimes times_;  // first: it times the constructor too
  const OpInputs& in_;
  const Contract& k_;
  bool bwd_;
  DualPolicy p_;
  const GemmTable& gemm_;
  FlceGeom g_;
  CeParams q_;
  const double *x_ = nullptr, *w_ = nullptr, *b_ = nullptr;
  AbsFloat xa_, wa_;
  bool logit_prod_exact_ = false;
  int sampled_ = 0;  // certification samples checked
  std::vector<char> x_zero_;  // rows of x that are all zeros
  std::vector<double> x_fin_max_;  // per row of x, the largest finite magnitude
  Buf<double> lm_;  // the chunk's logits (double)
  Buf<float> ls_;   // and their magnitude sums (float)
};

}  // namespace

void flce_fast_evaluate(const Case& c, const OpInputs& in, const Contract& k, bool bwd, RefResult& ref,
                        std::vector<OutputEnclosure>& out) {
  FlceFast(c, in, k, bwd).run(ref, out);
}

}  // namespace kv
