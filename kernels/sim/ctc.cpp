// Sim twin of cuda/ctc.cu (Note [CTC]).
#include "mytorch/ctc.h"

namespace mytorch::sim {
namespace {

template <typename A>
void forward(const CtcArgs& a) {
  for (int64_t b = 0; b < a.n; ++b) {
    const int64_t T = a.input_lengths[b], L = a.target_lengths[b];
    A* la = static_cast<A*>(a.log_alpha) + b * a.max_t * a.max_s;
    A* nll = static_cast<A*>(a.nll) + b;
    if (T == 0) {  // nothing to align: likelihood 1 for an empty target, 0 otherwise
      *nll = L == 0 ? A(0) : A(INFINITY);
      continue;
    }
    for (int64_t s = 0; s < a.max_s; ++s) la[s] = A(-INFINITY);
    la[0] = ctc::lp<A>(a, 0, b, a.blank);
    if (L > 0) la[1] = ctc::lp<A>(a, 0, b, ctc::prime(a, b, 1));
    for (int64_t t = 1; t < T; ++t)
      for (int64_t s = 0; s <= 2 * L; ++s) la[t * a.max_s + s] = ctc::alpha_step<A>(a, la + (t - 1) * a.max_s, b, t, s);
    *nll = ctc::nll_of<A>(la + (T - 1) * a.max_s, L);
  }
}

template <typename A>
void backward(const CtcArgs& a) {
  for (int64_t b = 0; b < a.n; ++b) {
    const int64_t T = a.input_lengths[b], L = a.target_lengths[b];
    if (T == 0) continue;
    A* lb = static_cast<A*>(a.log_beta) + b * a.max_t * a.max_s;
    A* last = lb + (T - 1) * a.max_s;
    for (int64_t s = 0; s < a.max_s; ++s) last[s] = A(-INFINITY);
    last[2 * L] = ctc::lp<A>(a, T - 1, b, a.blank);
    if (L > 0) last[2 * L - 1] = ctc::lp<A>(a, T - 1, b, ctc::prime(a, b, 2 * L - 1));
    for (int64_t t = T - 2; t >= 0; --t)
      for (int64_t s = 2 * L; s >= 0; --s)
        lb[t * a.max_s + s] = ctc::beta_step<A>(a, lb + (t + 1) * a.max_s, b, t, s, L);
  }
  for (int64_t b = 0; b < a.n; ++b)
    for (int64_t t = 0; t < a.max_t; ++t) ctc::grad_row<A>(a, b, t);
}

} // namespace

rt::Status ctc_forward(const CtcArgs& a, rt::Stream) {
  if (dispatch_float_double(a.dtype, [&](auto tag) { forward<decltype(tag)>(a); })) return rt::Status::Success;
  return rt::report(rt::Status::InvalidValue, "ctc_loss: expected float or double log probabilities");
}

rt::Status ctc_backward(const CtcArgs& a, rt::Stream) {
  if (dispatch_float_double(a.dtype, [&](auto tag) { backward<decltype(tag)>(a); })) return rt::Status::Success;
  return rt::report(rt::Status::InvalidValue, "ctc_loss_backward: expected float or double log probabilities");
}

} // namespace mytorch::sim
