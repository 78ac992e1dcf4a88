// sim im2col / col2im (Note [Convolution family]).
#include "mytorch/conv.h"
#include "mytorch/ops_math.h"

namespace mytorch::sim {

rt::Status im2col(const Im2ColArgs& a, rt::Stream) {
  const int64_t n = a.col2im ? a.n * a.c * a.ih * a.iw : a.n * a.c * a.kh * a.kw * a.oh * a.ow;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t e = 0; e < n; ++e) {
      if (a.col2im) conv::col2im<T, ew::opmath_t<T>>(a, e);
      else conv::im2col<T>(a, e);
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "im2col: expected a floating dtype");
}

} // namespace mytorch::sim

namespace mytorch::sim {

// sim has no convolution library: the glue runs im2col + GEMM (the reference path).
rt::Status convolution(const ConvArgs&, size_t*, rt::Stream) {
  return rt::report(rt::Status::Unavailable, "convolution: no convolution library on the sim runtime");
}

} // namespace mytorch::sim
