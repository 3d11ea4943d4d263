// GeGLU with the tanh approximation (OPS.md): u = sqrt(2/pi) * (a + 0.044715 a^3),
// gelu(a) = 0.5 a (1 + tanh u), c = gelu(a) * b; db = dc * gelu(a);
// da = dc * b * [0.5 (1 + tanh u) + 0.5 a (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 a^2)].
// The constants are the fp32 numbers nearest to them (what `0.044715f` gives a kernel).
#pragma once

namespace kv {

inline constexpr double kGeluC = static_cast<double>(0.044715f);
inline constexpr double kGeluC3 = static_cast<double>(0.134145f);  // 3 * 0.044715
inline constexpr double kSqrt2OverPi = static_cast<double>(0.7978845608028654f);

template <class P>
typename P::T geglu_tanh_u(const P& p, const typename P::T& A) {
  auto a3 = p.acc(p.acc(A * A) * A);
  return p.tanh(p.acc(p.c(kSqrt2OverPi) * p.acc(A + p.acc(p.c(kGeluC) * a3))));
}

template <class P>
typename P::T geglu_gelu(const P& p, const typename P::T& A, const typename P::T& th) {
  return p.acc(p.acc(p.c(0.5) * A) * p.acc(p.c(1) + th));
}

template <class P>
typename P::T geglu_fwd(const P& p, double a, double b) {
  auto A = p.c(a);
  return p.acc(geglu_gelu(p, A, geglu_tanh_u(p, A)) * p.c(b));
}

template <class P>
void geglu_bwd(const P& p, double dc, double a, double b, typename P::T& da, typename P::T& db) {
  auto A = p.c(a), DC = p.c(dc);
  auto th = geglu_tanh_u(p, A);
  db = p.acc(DC * geglu_gelu(p, A, th));
  auto t1 = p.acc(p.c(0.5) * p.acc(p.c(1) + th));
  auto dth = p.acc(p.c(1) - p.acc(th * th));
  auto poly = p.acc(p.c(kSqrt2OverPi) * p.acc(p.c(1) + p.acc(p.c(kGeluC3) * p.acc(A * A))));
  auto t2 = p.acc(p.acc(p.acc(p.c(0.5) * A) * dth) * poly);
  da = p.acc(p.acc(DC * p.c(b)) * p.acc(t1 + t2));
}

}  // namespace kv
