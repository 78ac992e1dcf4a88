// CUDA random family: one thread per element, values from random_element (shared with the sim twin).
#include "common.cuh"
#include "mytorch/random.h"

namespace mytorch::cuda {
namespace {
template <typename T>
__global__ void random_kernel(RandomParams p) {
  T* out = static_cast<T*>(p.data);
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < p.numel; i += int64_t(gridDim.x) * blockDim.x) {
    out[i] = random_element<T>(p, i);
  }
}
} // namespace

rt::Status random(const RandomParams& p, rt::Stream stream) {
  if (p.numel == 0) return rt::Status::Success;
  if (p.dtype == DType::ComplexFloat || p.dtype == DType::ComplexDouble) {
    return rt::report(rt::Status::InvalidValue, "random: complex outputs are not supported by the kernel");
  }
  bool ok = dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      random_kernel<T><<<grid_for(p.numel), kThreads, 0, native(stream)>>>(p);
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "random: unsupported element type");
  return check_launch("random");
}

} // namespace mytorch::cuda
