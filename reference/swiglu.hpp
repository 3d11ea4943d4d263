// SwiGLU (OPS.md): c = silu(a) * b with silu(a) = a * sigmoid(a), sigmoid(a) = 1/(1+exp(-a));
// db = dc * silu(a); da = dc * b * sigmoid(a) * (1 + a * (1 - sigmoid(a))). Every operation
// is an accumulator operation (fp32); exp is an fp32 math function with declared ulps.
#pragma once

namespace kv {

/// sigmoid(a) = 1/(1 + exp(-a)). For a < -88, fp32 exp(-a) may overflow to inf and an
/// impl then gets 1/inf = 0 (IEEE): the value is computed as exp(a)/(1 + exp(a)), which
/// never overflows, and an enclosure also admits 0 there.
template <class P>
typename P::T swiglu_sigmoid(const P& p, double a) {
  if (a < -88.0) {
    auto e = p.exp(p.c(a));
    return p.or_zero(p.acc(e / p.acc(p.c(1) + e)));
  }
  return p.acc(p.c(1) / p.acc(p.c(1) + p.exp(-p.c(a))));
}

template <class P>
typename P::T swiglu_fwd(const P& p, double a, double b) {
  auto A = p.c(a);
  auto silu = p.acc(A * swiglu_sigmoid(p, a));
  return p.acc(silu * p.c(b));
}

/// da and db of one element.
template <class P>
void swiglu_bwd(const P& p, double dc, double a, double b, typename P::T& da, typename P::T& db) {
  auto A = p.c(a), DC = p.c(dc);
  auto sig = swiglu_sigmoid(p, a);
  auto silu = p.acc(A * sig);
  db = p.acc(DC * silu);
  auto inner = p.acc(p.c(1) + p.acc(A * p.acc(p.c(1) - sig)));
  da = p.acc(p.acc(DC * p.c(b)) * p.acc(sig * inner));
}

}  // namespace kv
