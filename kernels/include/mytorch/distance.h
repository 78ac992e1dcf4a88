// Pairwise-distance family: torch.cdist's _cdist_forward/_cdist_backward and torch.pdist's
// _pdist_forward/_pdist_backward (Note [Pairwise distances]).
//
// Note [Pairwise distances]
// The distance of rows a and b of m features is finish(combine over k of map(a[k] - b[k])), with ATen's CPU
// definitions per p (aten/src/ATen/native/cpu/DistanceOpsKernel.cpp): p = 0 counts the non-zero differences (a NaN
// difference gives NaN), 1 sums |d|, 2 is the square root of the sum of d^2, inf the largest |d| (NaN propagates),
// any other p (sum |d|^p)^(1/p). A row's features are accumulated in kLanes interleaved partial sums combined in a
// fixed tree, in the input's type (float or double, as ATen's CPU); the sim and the CUDA kernel call the same
// row_distance (the same operations in the same order), and a result never depends on the thread count.
// The gradient with respect to the first operand's row a sums, over the rows b it is paired with, the per-feature
// terms of ATen's backward (dist_grad: a zero distance contributes nothing, p < 1 skips a zero difference), in the
// order of b; pdist's pair (i, j) adds to row i and, by the oddness of every term in d, subtracts from row j, so
// row i's gradient is the same sum over every j != i with the pair's gradient and distance.
// pdist's pairs are the i < j of n rows in row-major order: pair (i, j) is element i n - i (i + 1) / 2 + j - i - 1.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"

namespace mytorch {

// Which of ATen's distance definitions a p selects (dist_norm_of).
enum class DistNorm : int { Zero, One, Two, Inf, LtTwo, General };

inline DistNorm dist_norm_of(double p) {
  if (p == 0) return DistNorm::Zero;
  if (p == 1) return DistNorm::One;
  if (p == 2) return DistNorm::Two;
  if (std::isinf(p)) return DistNorm::Inf;
  return p < 2 ? DistNorm::LtTwo : DistNorm::General;
}

struct DistanceArgs {
  DType dtype = DType::Float;  // Float or Double
  DistNorm norm = DistNorm::Two;
  double p = 2;
  const void* x1 = nullptr;    // contiguous [batch, r1, m]
  const void* x2 = nullptr;    // contiguous [batch, r2, m]; pdist: x1 itself, r2 == r1, batch 1
  int64_t batch = 1, r1 = 0, r2 = 0, m = 0;
  bool pairs = false;          // pdist: only the pairs i < j, r1 (r1 - 1) / 2 of them in row-major order
  void* out = nullptr;         // forward: [batch, r1, r2] (pairs: r1 (r1 - 1) / 2); backward: [batch, r1, m]
  const void* grad = nullptr;  // backward: the forward's output's gradient, contiguous, the forward's shape
  const void* dist = nullptr;  // backward: the forward's output, contiguous
};

MT_HOST_DEVICE inline int64_t pdist_index(int64_t i, int64_t j, int64_t n) {  // i < j
  return i * n - i * (i + 1) / 2 + j - i - 1;
}

// The per-feature map, the combination of two partials, the final step and the identity (Note [Pairwise distances]).
template <DistNorm N, typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A dist_map(A d, A p) {
  if constexpr (N == DistNorm::Zero) return d != d ? d : A(d != A(0));
  else if constexpr (N == DistNorm::One || N == DistNorm::Inf) return std::abs(d);
  else if constexpr (N == DistNorm::Two) return d * d;
  else return std::pow(std::abs(d), p);
}

template <DistNorm N, typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A dist_combine(A acc, A v) {
  if constexpr (N == DistNorm::Inf) return (v > acc || v != v) ? v : acc;  // max, a NaN kept
  else return acc + v;
}

template <DistNorm N, typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A dist_finish(A acc, A p) {
  if constexpr (N == DistNorm::Two) return std::sqrt(acc);
  else if constexpr (N == DistNorm::LtTwo || N == DistNorm::General) return std::pow(acc, A(1) / p);
  else return acc;
}

// The distance of rows a and b of m features, in kLanes interleaved partials combined as a fixed tree.
template <DistNorm N, typename T>
MT_HOST_DEVICE inline T row_distance(const T* a, const T* b, int64_t m, T p) {
  constexpr int kLanes = 8;
  T acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = T(0);
  int64_t k = 0;
  for (; k + kLanes <= m; k += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = dist_combine<N>(acc[l], dist_map<N>(a[k + l] - b[k + l], p));
  for (int w = kLanes / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) acc[l] = dist_combine<N>(acc[l], acc[l + w]);
  T r = acc[0];
  for (; k < m; ++k) r = dist_combine<N>(r, dist_map<N>(a[k] - b[k], p));
  return dist_finish<N>(r, p);
}

template <typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A dist_sign(A d) {
  return A((A(0) < d) - (d < A(0)));
}

// One feature's term of the gradient: the difference d, the pair's distance and its gradient g (ATen's backward).
template <DistNorm N, typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A dist_grad(A d, A dist, A g, A p) {
  if constexpr (N == DistNorm::Zero) return A(0);
  else if constexpr (N == DistNorm::One) return dist_sign(d) * g;
  else if constexpr (N == DistNorm::Two) return dist == A(0) ? A(0) : g * d / dist;
  else if constexpr (N == DistNorm::Inf) return dist_sign(d) * A(std::abs(d) == dist) * g;
  else if constexpr (N == DistNorm::LtTwo)
    return (dist == A(0) || (d == A(0) && p < A(1)))
               ? A(0)
               : dist_sign(d) * std::pow(std::abs(d), p - 1) * g / std::pow(dist, p - 1);
  else return dist == A(0) ? A(0) : d * std::pow(std::abs(d), p - 2) * g / std::pow(dist, p - 1);
}

// Calls f(std::integral_constant-like tag) with the DistNorm as a compile-time value.
template <DistNorm N>
struct DistNormTag {
  static constexpr DistNorm value = N;
};
template <typename F>
inline bool dispatch_dist_norm(DistNorm n, const F& f) {
  switch (n) {
    case DistNorm::Zero: f(DistNormTag<DistNorm::Zero>{}); return true;
    case DistNorm::One: f(DistNormTag<DistNorm::One>{}); return true;
    case DistNorm::Two: f(DistNormTag<DistNorm::Two>{}); return true;
    case DistNorm::Inf: f(DistNormTag<DistNorm::Inf>{}); return true;
    case DistNorm::LtTwo: f(DistNormTag<DistNorm::LtTwo>{}); return true;
    case DistNorm::General: f(DistNormTag<DistNorm::General>{}); return true;
  }
  return false;
}

// forward: out = the distances; backward: out = the gradient of x1 (every pair's row a).
MT_LAUNCHER(distance_forward, (const DistanceArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(distance_backward, (const DistanceArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
