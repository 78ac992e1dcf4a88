// CUDA pairwise-distance family (Note [Pairwise distances]): a thread per distance (forward) and per feature of a
// gradient row (backward, its partners in order), through the header's row_distance and dist_grad: the sim twin's
// operations in its order.
#include "common.cuh"
#include "mytorch/distance.h"

namespace mytorch::cuda {
namespace {

// The row i of pdist's pair o (the inverse of pdist_index, in double as ATen's kernel, then corrected by one).
__device__ inline int64_t pdist_row(int64_t o, int64_t n) {
  const double nd = static_cast<double>(n);
  int64_t i =
      static_cast<int64_t>(nd - 2 - floor(sqrt(-8.0 * static_cast<double>(o) + 4 * nd * (nd - 1) - 7) / 2.0 - 0.5));
  if (i < 0) i = 0;
  while (i > 0 && pdist_index(i, i + 1, n) > o) --i;
  while (i + 2 < n && pdist_index(i + 1, i + 2, n) <= o) ++i;
  return i;
}

template <DistNorm N, typename T>
__global__ void forward_kernel(DistanceArgs a, int64_t total) {
  const T* x1 = static_cast<const T*>(a.x1);
  const T* x2 = static_cast<const T*>(a.x2);
  T* out = static_cast<T*>(a.out);
  const T p = static_cast<T>(a.p);
  for (const int64_t o : grid_stride(total)) {
    if (a.pairs) {
      const int64_t i = pdist_row(o, a.r1), j = o - pdist_index(i, i + 1, a.r1) + i + 1;
      out[o] = row_distance<N>(x1 + i * a.m, x1 + j * a.m, a.m, p);
    } else {
      const int64_t row = o / a.r2, j = o % a.r2, b = row / a.r1;
      out[o] = row_distance<N>(x1 + row * a.m, x2 + (b * a.r2 + j) * a.m, a.m, p);
    }
  }
}

template <DistNorm N, typename T>
__global__ void backward_kernel(DistanceArgs a, int64_t total) {
  const T* x1 = static_cast<const T*>(a.x1);
  const T* x2 = static_cast<const T*>(a.x2);
  const T* grad = static_cast<const T*>(a.grad);
  const T* dist = static_cast<const T*>(a.dist);
  T* out = static_cast<T*>(a.out);
  const T p = static_cast<T>(a.p);
  for (const int64_t o : grid_stride(total)) {
    const int64_t row = o / a.m, k = o % a.m, b = row / a.r1, i = row % a.r1;
    const T xa = x1[o];
    T acc = T(0);
    for (int64_t j = 0; j < a.r2; ++j) {
      if (a.pairs && j == i) continue;
      const int64_t at = a.pairs ? (i < j ? pdist_index(i, j, a.r1) : pdist_index(j, i, a.r1)) : row * a.r2 + j;
      acc += dist_grad<N>(xa - x2[(b * a.r2 + j) * a.m + k], dist[at], grad[at], p);
    }
    out[o] = acc;
  }
}

template <bool Forward>
rt::Status launch(const DistanceArgs& a, rt::Stream stream, const char* name) {
  const int64_t total = Forward ? (a.pairs ? a.r1 * (a.r1 - 1) / 2 : a.batch * a.r1 * a.r2) : a.batch * a.r1 * a.m;
  if (total <= 0) return rt::Status::Success;
  bool typed = false;
  dispatch_dist_norm(a.norm, [&](auto tag) {
    constexpr DistNorm N = decltype(tag)::value;
    if (a.dtype == DType::Float) {
      if (Forward) forward_kernel<N, float><<<grid_for(total), kThreads, 0, native(stream)>>>(a, total);
      else backward_kernel<N, float><<<grid_for(total), kThreads, 0, native(stream)>>>(a, total);
      typed = true;
    } else if (a.dtype == DType::Double) {
      if (Forward) forward_kernel<N, double><<<grid_for(total), kThreads, 0, native(stream)>>>(a, total);
      else backward_kernel<N, double><<<grid_for(total), kThreads, 0, native(stream)>>>(a, total);
      typed = true;
    }
  });
  if (!typed) return rt::report(rt::Status::InvalidValue, name);
  return check_launch(Forward ? "distance_forward" : "distance_backward");
}

} // namespace

rt::Status distance_forward(const DistanceArgs& a, rt::Stream stream) {
  return launch<true>(a, stream, "distance_forward: float32 or float64 expected");
}

rt::Status distance_backward(const DistanceArgs& a, rt::Stream stream) {
  return launch<false>(a, stream, "distance_backward: float32 or float64 expected");
}

} // namespace mytorch::cuda
