// sim grid sampler (Note [Grid sampler]): the forward splits the output locations over the workers (each writes its
// own elements); the backward splits (batch element, block of channels) tasks, each taking its locations in order,
// so every sum has the same order at any thread count.
#include <algorithm>

#include "mytorch/grid_sample.h"
#include "mytorch/parallel.h"

namespace mytorch::sim {
namespace {

struct PlainAdd {
  template <typename A>
  void operator()(A* p, A v) const {
    *p += v;
  }
};

// Element operations per location and channel, for the loops' grain.
int64_t workPerChannel(const GridSampleArgs& a) {
  if (a.interp == GridInterp::Bicubic) return 16;
  if (a.interp == GridInterp::Nearest) return 1;
  return a.dims == 3 ? 8 : 4;
}

} // namespace

rt::Status grid_sample(const GridSampleArgs& a, rt::Stream) {
  const int64_t spatial = a.od * a.oh * a.ow, locations = a.n * spatial;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t per_location = workPerChannel(a) * std::max<int64_t>(a.c, 1) + 32;
    if (!a.backward) {
      par::parallel_for(locations, par::grain_for(per_location), [&](int64_t b, int64_t e) {
        for (int64_t l = b; l < e; ++l) gs::forward_at<T>(a, l);
      });
      return;
    }
    // The input's gradient: blocks of channels of one batch element, enough for every worker. With one block (as
    // many batch elements as workers) a task owns whole batch elements and also writes their grid gradient;
    // otherwise, or without an input gradient, the grid's gradient is a pass of its own over the locations.
    const int64_t c = std::max<int64_t>(a.c, 1);
    const int64_t per_n = std::max<int64_t>(1, (2 * int64_t(par::threads()) + a.n - 1) / std::max<int64_t>(a.n, 1));
    const int64_t block = (c + std::min(per_n, c) - 1) / std::min(per_n, c), blocks = (c + block - 1) / block;
    const bool fused = a.grad_input && blocks == 1;
    if (!fused) {
      GridSampleArgs grid_only = a;
      grid_only.grad_input = nullptr;
      par::parallel_for(locations, par::grain_for(per_location), [&](int64_t b, int64_t e) {
        for (int64_t l = b; l < e; ++l) gs::backward_at<T>(grid_only, l, 0, a.c, true, PlainAdd{});
      });
    }
    if (!a.grad_input) return;
    par::parallel_for(a.n * blocks, par::grain_for(spatial * (workPerChannel(a) * block + 32)),
                      [&](int64_t b, int64_t e) {
                        for (int64_t task = b; task < e; ++task) {
                          const int64_t n = task / blocks, c0 = (task % blocks) * block;
                          const int64_t c1 = std::min(a.c, c0 + block);
                          for (int64_t o = 0; o < spatial; ++o)
                            gs::backward_at<T>(a, n * spatial + o, c0, c1, fused, PlainAdd{});
                        }
                      });
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "grid_sample: expected a floating dtype");
}

} // namespace mytorch::sim
