// sim normalisation (Note [Normalisation family]): per group / per channel loops, the groups (statistics, input
// gradients), the channels (weight gradients) and the (n, c) planes (the affine apply) split over the threads
// (Note [Sim parallelism]): each writes only its own group's, channel's or plane's outputs, in the order one thread
// would, so the bits do not depend on the thread count.
#include "mytorch/norm.h"
#include "mytorch/parallel.h"

namespace mytorch::sim {
namespace {

template <typename T, typename P>
void forward(const NormArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t groups = nrm::group_count(a), len = nrm::group_len(a);
  if (a.kind == NormKind::Batch && !a.training) {
    for (int64_t g = 0; g < groups; ++g) nrm::eval_stats<P, A>(a, g);
  } else {
    par::parallel_for(groups, par::grain_for(4 * len), [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) nrm::finish_stats<T, P, A>(a, g, nrm::lane_stats<T, A>(a, g, 0, 1));
    });
  }
  // The apply, plane by plane: nrm::apply's expression with the plane's constants hoisted (a loop that vectorises).
  const int64_t hw = a.hw;
  par::parallel_for(a.n * a.c, par::grain_for(hw), [&](int64_t b, int64_t e) {
    for (int64_t pl = b; pl < e; ++pl) {
      const int64_t ch = pl % a.c, n = pl / a.c;
      const int64_t g = a.kind == NormKind::Group ? n * a.groups + ch / (a.c / a.groups) : ch;
      const A mean = static_cast<const A*>(a.mean)[g], rstd = static_cast<const A*>(a.rstd)[g];
      const A w = nrm::param<P, A>(a.weight, ch, A(1)), bias = nrm::param<P, A>(a.bias, ch, A(0));
      const T* x = static_cast<const T*>(a.x) + pl * hw;
      T* y = static_cast<T*>(a.y) + pl * hw;
      for (int64_t i = 0; i < hw; ++i) y[i] = static_cast<T>((static_cast<A>(x[i]) - mean) * rstd * w + bias);
    }
  });
}

template <typename T, typename P>
void backward(const NormArgs& a) {
  using A = ew::opmath_t<T>;
  if (a.dx) {
    const int64_t groups = nrm::group_count(a), len = nrm::group_len(a);
    par::parallel_for(groups, par::grain_for(8 * len), [&](int64_t b, int64_t e) {
      for (int64_t g = b; g < e; ++g) {
        A s1 = 0, s2 = 0;
        if (!(a.kind == NormKind::Batch && !a.training)) nrm::lane_dx_sums<T, P, A>(a, g, 0, 1, &s1, &s2);
        for (int64_t j = 0; j < len; ++j) nrm::dx_element<T, P, A>(a, g, j, s1, s2);
      }
    });
  }
  if (a.dweight || a.dbias) {
    par::parallel_for(a.c, par::grain_for(4 * nrm::channel_len(a)), [&](int64_t b, int64_t e) {
      for (int64_t ch = b; ch < e; ++ch) {
        A dw = 0, db = 0;
        nrm::lane_dw_terms<T, A>(a, ch, 0, 1, &dw, &db);
        if (a.dweight) static_cast<P*>(a.dweight)[ch] = static_cast<P>(dw);
        if (a.dbias) static_cast<P*>(a.dbias)[ch] = static_cast<P>(db);
      }
    });
  }
}

template <bool fwd>
rt::Status run(const NormArgs& a) {
  const bool ok = dispatch_floating_with_param(a.dtype, a.param_dtype, [&](auto t, auto p) {
    fwd ? forward<decltype(t), decltype(p)>(a) : backward<decltype(t), decltype(p)>(a);
  });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue,
                         "norm: expected floating inputs with parameters of the same dtype or float32");
}

} // namespace

size_t norm_workspace_bytes(const NormArgs&) { return 0; }
rt::Status norm_forward(const NormArgs& a, rt::Stream) { return run<true>(a); }
rt::Status norm_backward(const NormArgs& a, rt::Stream) { return run<false>(a); }

} // namespace mytorch::sim
