// sim pooling and upsampling (Note [Spatial family]).
#include "mytorch/pool.h"

namespace mytorch::sim {

rt::Status spatial(const SpatialArgs& a, rt::Stream) {
  const int64_t n = a.backward ? a.planes * a.ih * a.iw : a.planes * a.oh * a.ow;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t e = 0; e < n; ++e) {
      if (a.backward) sp::backward<T>(a, e);
      else sp::forward<T>(a, e);
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "spatial: expected a floating dtype");
}

} // namespace mytorch::sim
