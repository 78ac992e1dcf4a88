// CTC family: the connectionist temporal classification loss (torch's _ctc_loss and its backward) in log space,
// per sample: the forward (alpha) recursion over the blank-extended target, the negative log likelihood, and
// the backward (beta) recursion with the gradient with respect to the log probabilities.
//
// Note [CTC]
// ATen's CPU algorithm, step for step (aten/src/ATen/native/LossCTC.cpp), so the sim twin agrees with the CPU:
// the extended target l' has 2L + 1 symbols (blank, l1, blank, l2, ..., blank); alpha[t][s] = logsumexp of
// alpha[t-1][s], alpha[t-1][s-1] and, when l'(s) != l'(s-2), alpha[t-1][s-2], plus lp[t][l'(s)], with a max
// of -inf taken as 0; nll = -logsumexp(alpha[T-1][2L], alpha[T-1][2L-1]). The backward runs beta the same way
// from the end, accumulates log(alpha * beta) per (t, symbol) and gives
// grad[t][c] = (exp(lp[t][c]) - exp(lab[t][c] + nll - lp[t][c])) * grad_out, 0 for t >= the input length and
// for a sample whose nll is infinite when zero_infinity. cuda/ gives each sample a block (threads over s,
// a barrier per time step) and each (sample, t) row of the gradient a thread.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"

namespace mytorch {

struct CtcArgs {
  DType dtype = DType::Float;        // float or double
  const void* log_probs = nullptr;   // [T, N, C] with element strides
  int64_t lp_st = 0, lp_sn = 0, lp_sc = 0;
  int64_t max_t = 0, n = 0, c = 0;
  const int64_t* targets = nullptr;  // each sample's target starts at tg_offsets[b], symbols tg_stride apart
  const int64_t* tg_offsets = nullptr;
  int64_t tg_stride = 1;
  const int64_t* input_lengths = nullptr;   // [N], on the device
  const int64_t* target_lengths = nullptr;  // [N], on the device
  int64_t max_s = 0;                 // 2 * max target length + 1
  int64_t blank = 0;
  bool zero_infinity = false;
  void* log_alpha = nullptr;         // [N, T, max_s] contiguous
  void* nll = nullptr;               // [N]
  // backward
  void* log_beta = nullptr;          // [N, T, max_s] contiguous workspace
  const void* grad_out = nullptr;    // [N] (element stride grad_stride)
  int64_t grad_stride = 1;
  void* grad = nullptr;              // [T, N, C] contiguous
};

namespace ctc {
// l'(s): blank at even s, the target's symbol s / 2 at odd s.
MT_HOST_DEVICE inline int64_t prime(const CtcArgs& a, int64_t b, int64_t s) {
  return s % 2 == 0 ? a.blank : a.targets[a.tg_offsets[b] + a.tg_stride * (s / 2)];
}

template <typename A>
MT_HOST_DEVICE inline A lp(const CtcArgs& a, int64_t t, int64_t b, int64_t c) {
  return static_cast<const A*>(a.log_probs)[t * a.lp_st + b * a.lp_sn + c * a.lp_sc];
}

// log(e^x1 + e^x2 + e^x3) with `m` their max, taken as 0 when it is -inf (ATen's rule).
template <typename A>
MT_HOST_DEVICE inline A lse3(A x1, A x2, A x3, A m) {
  using std::exp;
  using std::log;
  if (m == A(-INFINITY)) m = A(0);
  return log(exp(x1 - m) + exp(x2 - m) + exp(x3 - m)) + m;
}

// alpha[t][s] from the row alpha[t-1] (prev) of sample b.
template <typename A>
MT_HOST_DEVICE inline A alpha_step(const CtcArgs& a, const A* prev, int64_t b, int64_t t, int64_t s) {
  const int64_t cur = prime(a, b, s);
  A la1 = prev[s], m = la1, la2 = A(-INFINITY), la3 = A(-INFINITY);
  if (s > 0) {
    la2 = prev[s - 1];
    if (la2 > m) m = la2;
  }
  if (s > 1 && prime(a, b, s - 2) != cur) {
    la3 = prev[s - 2];
    if (la3 > m) m = la3;
  }
  return lse3(la1, la2, la3, m) + lp<A>(a, t, b, cur);
}

// beta[t][s] from the row beta[t+1] (next) of sample b whose target has length L.
template <typename A>
MT_HOST_DEVICE inline A beta_step(const CtcArgs& a, const A* next, int64_t b, int64_t t, int64_t s, int64_t L) {
  const int64_t cur = prime(a, b, s);
  A lb1 = next[s], m = lb1, lb2 = A(-INFINITY), lb3 = A(-INFINITY);
  if (s < 2 * L) {
    lb2 = next[s + 1];
    if (lb2 > m) m = lb2;
  }
  if (s < 2 * L - 1 && prime(a, b, s + 2) != cur) {
    lb3 = next[s + 2];
    if (lb3 > m) m = lb3;
  }
  return lse3(lb1, lb2, lb3, m) + lp<A>(a, t, b, cur);
}

// log(e^acc + e^x), with acc = -inf meaning empty (ATen's accumulation of log(alpha beta)).
template <typename A>
MT_HOST_DEVICE inline A log_add(A acc, A x) {
  using std::exp;
  using std::log;
  if (acc == A(-INFINITY)) return x;
  const A m = acc > x ? acc : x;
  return log(exp(acc - m) + exp(x - m)) + m;
}

// The negative log likelihood of sample b from its last alpha row.
template <typename A>
MT_HOST_DEVICE inline A nll_of(const A* last, int64_t L) {
  if (L == 0) return -last[0];
  const A l1 = last[2 * L], l2 = last[2 * L - 1];
  A m = l1 > l2 ? l1 : l2;
  return -lse3(l1, l2, A(-INFINITY), m);
}

// The gradient row (sample b, time t < its input length): the log(alpha beta) sums of the symbols, then the
// final formula over every class (Note [CTC]).
template <typename A>
MT_HOST_DEVICE inline void grad_row(const CtcArgs& a, int64_t b, int64_t t) {
  using std::exp;
  const int64_t T = a.input_lengths[b], L = a.target_lengths[b];
  A* g = static_cast<A*>(a.grad) + (t * a.n + b) * a.c;
  const A* la = static_cast<const A*>(a.log_alpha) + (b * a.max_t + t) * a.max_s;
  const A* lb = static_cast<const A*>(a.log_beta) + (b * a.max_t + t) * a.max_s;
  const A nll = static_cast<const A*>(a.nll)[b];
  if (t >= T || (a.zero_infinity && nll == A(INFINITY))) {
    for (int64_t c = 0; c < a.c; ++c) g[c] = A(0);
    return;
  }
  for (int64_t c = 0; c < a.c; ++c) g[c] = A(-INFINITY);
  if (t == T - 1) {
    g[a.blank] = la[2 * L] + lb[2 * L];
    if (L > 0) g[prime(a, b, 2 * L - 1)] = la[2 * L - 1] + lb[2 * L - 1];
  } else {
    for (int64_t s = 2 * L; s >= 0; --s) {
      const int64_t cur = prime(a, b, s);
      g[cur] = log_add(g[cur], la[s] + lb[s]);
    }
  }
  const A gr = static_cast<const A*>(a.grad_out)[b * a.grad_stride];
  for (int64_t c = 0; c < a.c; ++c) {
    const A l = lp<A>(a, t, b, c);
    g[c] = (exp(l) - exp(g[c] + nll - l)) * gr;
  }
}
} // namespace ctc

MT_LAUNCHER(ctc_forward, (const CtcArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(ctc_backward, (const CtcArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
