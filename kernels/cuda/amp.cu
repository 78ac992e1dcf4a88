// CUDA mixed-precision family: unscale-and-check of a whole tensor list in one launch (grid-stride, flag written
// only by threads that see a non-finite value) and the one-thread scale update.
#include "common.cuh"
#include "mytorch/amp.h"

namespace mytorch::cuda {
namespace {

// A row of blocks per tensor (blockIdx.y), grid-stride within it: every tensor of the list in one launch.
template <typename T>
__global__ void unscale_kernel(UnscaleArgs p) {
  using Op = std::conditional_t<std::is_same_v<T, double>, double, float>;
  T* x = static_cast<T*>(p.data[blockIdx.y]);
  const int64_t n = p.numel[blockIdx.y];
  const Op inv = static_cast<Op>(*p.inv_scale);
  for (const int64_t i : grid_stride(n)) {
    const Op v = static_cast<Op>(x[i]);
    if (!isfinite(v)) *p.found_inf = 1.0f;
    x[i] = static_cast<T>(v * inv);
  }
}

__global__ void update_scale_kernel(UpdateScaleArgs p) { update_scale_step(p); }

} // namespace

rt::Status non_finite_check_and_unscale(const UnscaleArgs& p, rt::Stream stream) {
  if (p.count <= 0) return rt::Status::Success;
  if (p.count > kMaxUnscaleTensors) return rt::report(rt::Status::InvalidValue, "unscale: too many tensors");
  int64_t longest = 0;
  for (int t = 0; t < p.count; ++t) longest = p.numel[t] > longest ? p.numel[t] : longest;
  if (longest == 0) return rt::Status::Success;
  // enough blocks for the longest tensor, at most about two waves of 8 blocks per SM over the whole list
  const unsigned cap = static_cast<unsigned>(std::max<int64_t>(1, 16 * int64_t(device_sms()) / p.count));
  const dim3 grid(std::min(grid_for(longest), cap), static_cast<unsigned>(p.count));
  cudaStream_t st = native(stream);
  switch (p.dtype) {
    case DType::Float: unscale_kernel<float><<<grid, kThreads, 0, st>>>(p); break;
    case DType::Double: unscale_kernel<double><<<grid, kThreads, 0, st>>>(p); break;
    case DType::Half: unscale_kernel<c10::Half><<<grid, kThreads, 0, st>>>(p); break;
    case DType::BFloat16: unscale_kernel<c10::BFloat16><<<grid, kThreads, 0, st>>>(p); break;
    default: return rt::report(rt::Status::InvalidValue, "unscale: unsupported element type");
  }
  return check_launch("unscale");
}

rt::Status update_scale(const UpdateScaleArgs& p, rt::Stream stream) {
  update_scale_kernel<<<1, 1, 0, native(stream)>>>(p);
  return check_launch("update_scale");
}

} // namespace mytorch::cuda
