// sim NLL loss (Note [NLL loss]): sequential loops.
#include "mytorch/loss.h"

namespace mytorch::sim {
namespace {

template <typename T>
void run(const NllArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t count = a.n * a.inner;
  const T* logp = static_cast<const T*>(a.logp);
  if (!a.backward) {
    T* out = static_cast<T*>(a.out);
    A total = 0, wsum = 0;
    for (int64_t e = 0; e < count; ++e) {
      int64_t t = 0;
      A w = 0;
      const bool used = nll::element<T, A>(a, e, &t, &w);
      const A term = used ? -w * static_cast<A>(logp[nll::offset(a, e, t)]) : A(0);
      if (a.reduction == Reduction::None) {
        out[e] = static_cast<T>(term);
      } else if (used) {
        total += term;
        wsum += w;
      }
    }
    if (a.reduction != Reduction::None) {
      out[0] = static_cast<T>(a.reduction == Reduction::Mean ? total / wsum : total);
      static_cast<T*>(a.total_weight)[0] = static_cast<T>(wsum);
    }
    return;
  }
  T* gi = static_cast<T*>(a.out);
  const T* g = static_cast<const T*>(a.grad_out);
  const A scale =
      a.reduction == Reduction::Mean ? A(1) / static_cast<A>(static_cast<const T*>(a.total_weight)[0]) : A(1);
  for (int64_t e = 0; e < count; ++e) {
    int64_t t = 0;
    A w = 0;
    if (!nll::element<T, A>(a, e, &t, &w)) continue;
    const A gv = static_cast<A>(a.reduction == Reduction::None ? g[e] : g[0]);
    gi[nll::offset(a, e, t)] = static_cast<T>(-w * gv * scale);
  }
}

} // namespace

rt::Status nll_loss(const NllArgs& a, rt::Stream) {
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) { run<decltype(tag)>(a); });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "nll_loss: expected a floating dtype");
}

} // namespace mytorch::sim
