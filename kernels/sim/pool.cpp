// sim pooling and upsampling (Note [Spatial family]): each work item writes its own output (forward) or input
// gradient (backward) element, so rows of items split over the workers (Note [Sim parallelism]) with the same bits at
// any thread count.
#include <vector>

#include "mytorch/parallel.h"
#include "mytorch/pool.h"

namespace mytorch::sim {
namespace {

// Element operations per work item, for the loop's grain: a window (pooling forward), the outputs whose windows
// cover an input (pooling backward), a stencil (upsampling).
int64_t workPerItem(const SpatialArgs& a) {
  const auto ceil_div = [](int64_t x, int64_t y) { return y > 0 ? (x + y - 1) / y : x; };
  switch (a.op) {
    case SpatialOp::MaxPool:
    case SpatialOp::AvgPool:
      return a.backward ? ceil_div(a.kd, a.sd) * ceil_div(a.kh, a.sh) * ceil_div(a.kw, a.sw) * 2
                        : int64_t(a.kd) * a.kh * a.kw;
    case SpatialOp::AdaptiveAvg:
    case SpatialOp::AdaptiveMax:
      return (ceil_div(a.id, a.od) + 1) * (ceil_div(a.ih, a.oh) + 1) * (ceil_div(a.iw, a.ow) + 1) *
             (a.backward ? 8 : 1);
    default: return a.backward ? ceil_div(a.oh, a.ih) * ceil_div(a.ow, a.iw) * 16 : 4;
  }
}

} // namespace

rt::Status spatial(const SpatialArgs& a, rt::Stream) {
  const int64_t rows = a.planes * (a.backward ? a.id * a.ih : a.od * a.oh), cols = a.backward ? a.iw : a.ow;
  const bool ok = sp::dispatch(a, [&](auto tag) {
    using T = decltype(tag);
    const bool upsample = a.op == SpatialOp::Nearest || a.op == SpatialOp::Bilinear;
    const bool scatter =
        a.op == SpatialOp::MaxPool || a.op == SpatialOp::AvgPool || a.op == SpatialOp::AdaptiveAvg || upsample;
    if (a.backward && scatter) {  // a plane per task, the gradients scattered
      const int64_t n_in = a.id * a.ih * a.iw, n_out = a.od * a.oh * a.ow;
      par::parallel_for(a.planes, par::grain_for(n_out * (upsample ? 4 : 1) + 2 * n_in),
                        [&](int64_t begin, int64_t end) {
                          std::vector<ew::opmath_t<T>> acc(static_cast<size_t>(n_in));
                          for (int64_t p = begin; p < end; ++p) {
                            if (upsample) sp::upsample_backward_plane<T>(a, p, acc.data());
                            else if (a.op == SpatialOp::AdaptiveAvg)
                              sp::adaptive_avg_backward_plane<T>(a, p, acc.data());
                            else if (a.op == SpatialOp::AvgPool) sp::avg_backward_plane<T>(a, p, acc.data());
                            else sp::max_backward_plane<T>(a, p, acc.data());
                          }
                        });
      return;
    }
    par::parallel_for(rows, par::grain_for(workPerItem(a) * cols),
                      [&](int64_t begin, int64_t end) { sp::rows<T>(a, begin, end); });
  });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue, "spatial: expected a floating dtype (or max pooling's integers)");
}

} // namespace mytorch::sim
