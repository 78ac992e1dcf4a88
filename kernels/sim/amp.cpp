// Sim twin of cuda/amp.cu.
#include <cmath>

#include "mytorch/amp.h"

namespace mytorch::sim {

rt::Status non_finite_check_and_unscale(const UnscaleArgs& p, rt::Stream) {
  const float inv = *p.inv_scale;
  bool any_bad = false;
  bool ok = dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>) {
      for (int t = 0; t < p.count; ++t) {
        T* x = static_cast<T*>(p.data[t]);
        for (int64_t i = 0; i < p.numel[t]; ++i) {
          using Op = std::conditional_t<std::is_same_v<T, double>, double, float>;
          const Op v = static_cast<Op>(x[i]);
          any_bad = any_bad || !std::isfinite(v);
          x[i] = static_cast<T>(v * static_cast<Op>(inv));
        }
      }
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "unscale: unsupported element type");
  if (any_bad) *p.found_inf = 1.0f;
  return rt::Status::Success;
}

rt::Status update_scale(const UpdateScaleArgs& p, rt::Stream) {
  update_scale_step(p);
  return rt::Status::Success;
}

} // namespace mytorch::sim
