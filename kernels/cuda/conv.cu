// CUDA im2col / col2im (Note [Convolution family]): a thread per element, of every dtype (integer convolutions
// and unfold/fold of bool and complex use them too).
#include "common.cuh"
#include "mytorch/conv.h"

namespace mytorch::cuda {
namespace {

template <typename T>
__global__ void kernel(Im2ColArgs a, int64_t n) {
  for (const int64_t e : grid_stride(n)) {
    if (a.col2im) conv::col2im<T, conv::col2im_acc_t<T>>(a, e);
    else conv::im2col<T>(a, e);
  }
}

} // namespace

rt::Status im2col(const Im2ColArgs& a, rt::Stream stream) {
  const int64_t n = a.col2im ? a.n * a.image() : a.n * a.c * a.taps() * a.positions();
  if (n == 0) return rt::Status::Success;
  const bool ok = dispatch_dtype(
      a.dtype, [&](auto tag) { kernel<decltype(tag)><<<grid_for(n), kThreads, 0, native(stream)>>>(a, n); });
  if (!ok) return rt::report(rt::Status::InvalidValue, "im2col: unsupported dtype");
  return check_launch("im2col");
}

} // namespace mytorch::cuda
