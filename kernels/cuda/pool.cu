// CUDA pooling and upsampling (Note [Spatial family]): a thread per output (forward) or input (backward).
#include "common.cuh"
#include "mytorch/pool.h"

namespace mytorch::cuda {
namespace {

template <typename T>
__global__ void kernel(SpatialArgs a, int64_t n) {
  for (const int64_t e : grid_stride(n)) {
    sp::item<T>(a, e);
  }
}

} // namespace

rt::Status spatial(const SpatialArgs& a, rt::Stream stream) {
  const int64_t n = a.backward ? a.planes * a.id * a.ih * a.iw : a.planes * a.od * a.oh * a.ow;
  if (n == 0) return rt::Status::Success;
  const bool ok =
      sp::dispatch(a, [&](auto tag) { kernel<decltype(tag)><<<grid_for(n), kThreads, 0, native(stream)>>>(a, n); });
  if (!ok)
    return rt::report(rt::Status::InvalidValue, "spatial: expected a floating dtype (or max pooling's integers)");
  return check_launch("spatial");
}

} // namespace mytorch::cuda
