// Welford's running mean/variance and Chan et al.'s combine: the accumulator every reduction carries
// (value a, second moment b, index or count n) and the variance update on it. Its own header so that
// families that only need statistics (the normalisations) do not depend on the reduction table
// (tables/reductions.def) and are not rebuilt when a reduction is added.
#pragma once

#include <cstdint>

#include "mytorch/macros.h"

namespace mytorch {
namespace red {

// The accumulator of every reduction: value (a), second moment (b), index or count (n).
template <typename A>
struct Acc {
  A a;
  A b;
  int64_t n;
};

// One element into a running (mean, M2, count).
template <typename A>
MT_HOST_DEVICE inline void welford_push(Acc<A>& s, A v) {
  s.n += 1;
  const A delta = v - s.a;
  s.a += delta / static_cast<A>(s.n);
  s.b += delta * (v - s.a);
}

// Chan et al.'s combine of two partial (mean, M2, count).
template <typename A>
MT_HOST_DEVICE inline void welford_combine(Acc<A>& s, const Acc<A>& o) {
  if (o.n == 0) return;
  if (s.n == 0) {
    s = o;
    return;
  }
  const int64_t n = s.n + o.n;
  const A delta = o.a - s.a;
  s.a += delta * static_cast<A>(o.n) / static_cast<A>(n);
  s.b += o.b + delta * delta * static_cast<A>(s.n) * static_cast<A>(o.n) / static_cast<A>(n);
  s.n = n;
}

}  // namespace red
}  // namespace mytorch
