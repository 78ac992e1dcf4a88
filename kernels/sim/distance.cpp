// Sim twin of cuda/distance.cu (Note [Pairwise distances]): the forward split over output distances (pdist's
// triangle over its pairs, so the threads get equal work), the backward over rows of the gradient, each row's
// features a vector loop over its partners.
#include "mytorch/distance.h"

#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"

namespace mytorch::sim::MT_SIM_ISA_NS {

namespace {

template <DistNorm N, typename T>
void forward(const DistanceArgs& a) {
  const T* x1 = static_cast<const T*>(a.x1);
  const T* x2 = static_cast<const T*>(a.x2);
  T* out = static_cast<T*>(a.out);
  const T p = static_cast<T>(a.p);
  const int64_t m = a.m, r1 = a.r1, r2 = a.r2;
  const int64_t grain = par::grain_for(3 * m + 8);
  if (a.pairs) {
    const int64_t total = r1 * (r1 - 1) / 2;
    par::parallel_for(total, grain, [&](int64_t begin, int64_t end) {
      int64_t i = 0;  // the row of pair `begin`: the last i whose first pair is at or before it
      while (i + 1 < r1 && pdist_index(i + 1, i + 2, r1) <= begin) ++i;
      int64_t j = begin - pdist_index(i, i + 1, r1) + i + 1;
      for (int64_t o = begin; o < end; ++o) {
        out[o] = row_distance<N>(x1 + i * m, x1 + j * m, m, p);
        if (++j == r1) j = ++i + 1;
      }
    });
    return;
  }
  par::parallel_for(a.batch * r1 * r2, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const int64_t row = o / r2, j = o % r2, b = row / r1;
      out[o] = row_distance<N>(x1 + row * m, x2 + (b * r2 + j) * m, m, p);
    }
  });
}

template <DistNorm N, typename T>
void backward(const DistanceArgs& a) {
  const T* x1 = static_cast<const T*>(a.x1);
  const T* x2 = static_cast<const T*>(a.x2);
  const T* grad = static_cast<const T*>(a.grad);
  const T* dist = static_cast<const T*>(a.dist);
  T* out = static_cast<T*>(a.out);
  const T p = static_cast<T>(a.p);
  const int64_t m = a.m, r1 = a.r1, r2 = a.r2;
  par::parallel_for(a.batch * r1, par::grain_for(4 * m * r2 + 8), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / r1, i = row % r1;
      const T* xa = x1 + row * m;
      T* o = out + row * m;
      for (int64_t k = 0; k < m; ++k) o[k] = T(0);
      for (int64_t j = 0; j < r2; ++j) {
        if (a.pairs && j == i) continue;
        const int64_t at = a.pairs ? (i < j ? pdist_index(i, j, r1) : pdist_index(j, i, r1)) : row * r2 + j;
        const T g = grad[at], d = dist[at];
        const T* xb = x2 + (b * r2 + j) * m;
        for (int64_t k = 0; k < m; ++k) o[k] += dist_grad<N>(xa[k] - xb[k], d, g, p);
      }
    }
  });
}

template <bool Forward>
rt::Status run(const DistanceArgs& a, const char* name) {
  bool typed = false;
  dispatch_dist_norm(a.norm, [&](auto tag) {
    constexpr DistNorm N = decltype(tag)::value;
    if (a.dtype == DType::Float) {
      Forward ? forward<N, float>(a) : backward<N, float>(a);
      typed = true;
    } else if (a.dtype == DType::Double) {
      Forward ? forward<N, double>(a) : backward<N, double>(a);
      typed = true;
    }
  });
  return typed ? rt::Status::Success : rt::report(rt::Status::InvalidValue, name);
}

} // namespace

MT_SIM_ENTRY rt::Status distance_forward(const DistanceArgs& a, rt::Stream) {
  return run<true>(a, "distance_forward: float32 or float64 expected");
}

MT_SIM_ENTRY rt::Status distance_backward(const DistanceArgs& a, rt::Stream) {
  return run<false>(a, "distance_backward: float32 or float64 expected");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, distance_forward, (const DistanceArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, distance_backward, (const DistanceArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim
#endif
