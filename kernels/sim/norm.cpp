// sim normalisation (Note [Normalisation family]): per group / per channel loops.
#include "mytorch/norm.h"

namespace mytorch::sim {
namespace {

template <typename T, typename P>
void forward(const NormArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t groups = nrm::group_count(a), len = nrm::group_len(a);
  for (int64_t g = 0; g < groups; ++g) {
    if (a.kind == NormKind::Batch && !a.training) {
      nrm::eval_stats<P, A>(a, g);
      continue;
    }
    nrm::finish_stats<T, P, A>(a, g, nrm::lane_stats<T, A>(a, g, 0, 1));
  }
  const int64_t total = groups * len;
  for (int64_t off = 0; off < total; ++off) nrm::apply<T, P, A>(a, off);
}

template <typename T, typename P>
void backward(const NormArgs& a) {
  using A = ew::opmath_t<T>;
  if (a.dx) {
    const int64_t groups = nrm::group_count(a), len = nrm::group_len(a);
    for (int64_t g = 0; g < groups; ++g) {
      A s1 = 0, s2 = 0;
      if (!(a.kind == NormKind::Batch && !a.training)) nrm::lane_dx_sums<T, P, A>(a, g, 0, 1, &s1, &s2);
      for (int64_t j = 0; j < len; ++j) nrm::dx_element<T, P, A>(a, g, j, s1, s2);
    }
  }
  if (a.dweight || a.dbias) {
    for (int64_t ch = 0; ch < a.c; ++ch) {
      A dw = 0, db = 0;
      nrm::lane_dw_terms<T, A>(a, ch, 0, 1, &dw, &db);
      if (a.dweight) static_cast<P*>(a.dweight)[ch] = static_cast<P>(dw);
      if (a.dbias) static_cast<P*>(a.dbias)[ch] = static_cast<P>(db);
    }
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
