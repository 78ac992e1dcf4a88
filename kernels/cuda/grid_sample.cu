// CUDA grid sampler (Note [Grid sampler]): a thread per output location, looping over the channels; the backward's
// input gradient through atomic adds into the glue's zeroed opmath buffer, as torch.cuda's.
#include "common.cuh"
#include "mytorch/grid_sample.h"

namespace mytorch::cuda {
namespace {

struct AtomicAdd {
  template <typename A>
  __device__ void operator()(A* p, A v) const {
    atomicAdd(p, v);
  }
};

template <typename T>
__global__ void kernel(GridSampleArgs a, int64_t n) {
  for (const int64_t e : grid_stride(n)) {
    if (a.backward) gs::backward_at<T>(a, e, 0, a.c, true, AtomicAdd{});
    else gs::forward_at<T>(a, e);
  }
}

} // namespace

rt::Status grid_sample(const GridSampleArgs& a, rt::Stream stream) {
  const int64_t n = a.n * a.od * a.oh * a.ow;
  if (n == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(
      a.dtype, [&](auto tag) { kernel<decltype(tag)><<<grid_for(n), kThreads, 0, native(stream)>>>(a, n); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "grid_sample: expected a floating dtype");
  return check_launch("grid_sample");
}

} // namespace mytorch::cuda
