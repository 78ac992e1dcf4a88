// sim grid sampler (Note [Grid sampler]): the forward splits the output locations over the workers (each writes its
// own elements); the backward splits (batch element, block of channels) tasks, each taking its locations in order,
// so every sum has the same order at any thread count. Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>

#include "mytorch/grid_sample.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
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

// A 2-D bilinear location's corners inside the input, from gs::corners once (the generic items walk them again for
// every channel): offsets, weights and the weights' derivatives along x and y, in ATen's order.
template <typename A>
struct Corners2d {
  int m = 0;
  int64_t at[4];
  A w[4], wx[4], wy[4];
};

template <typename A>
Corners2d<A> corners2d(const GridSampleArgs& a, const gs::Point<A>& p) {
  Corners2d<A> k;
  gs::corners(a, p, [&](int64_t at, A w, A wx, A wy, A) {
    k.at[k.m] = at;
    k.w[k.m] = w;
    k.wx[k.m] = wx;
    k.wy[k.m] = wy;
    ++k.m;
  });
  return k;
}

// gs::forward_at for 2-D bilinear locations [b, e): the same arithmetic in the same order, the corners found once per
// location and the batch element followed instead of divided out of every index.
template <typename T>
void forward_bilinear2d(const GridSampleArgs& a, int64_t b, int64_t e) {
  using A = ew::opmath_t<T>;
  const int64_t spatial = a.oh * a.ow, plane = a.ih * a.iw;
  int64_t n = b / spatial, o = b % spatial;
  for (int64_t l = b; l < e; ++l) {
    const gs::Point<A> p = gs::locate<T>(a, l);
    const Corners2d<A> k = corners2d(a, p);
    const T* in = static_cast<const T*>(a.input) + n * a.c * plane;
    T* out = static_cast<T*>(a.out) + n * a.c * spatial + o;
    for (int64_t c = 0; c < a.c; ++c) {
      const T* ip = in + c * plane;
      A acc = p.nan ? A(NAN) : A(0);
      for (int j = 0; j < k.m; ++j) acc += static_cast<A>(ip[k.at[j]]) * k.w[j];
      out[c * spatial] = static_cast<T>(acc);
    }
    if (++o == spatial) {
      o = 0;
      ++n;
    }
  }
}

// gs::backward_at for a 2-D bilinear location and channels [c0, c1), likewise.
template <typename T>
void backward_bilinear2d(const GridSampleArgs& a, int64_t loc, int64_t c0, int64_t c1, bool grid) {
  using A = ew::opmath_t<T>;
  const int64_t spatial = a.oh * a.ow, plane = a.ih * a.iw;
  const int64_t n = loc / spatial, o = loc % spatial;
  const gs::Point<A> p = gs::locate<T>(a, loc);
  const Corners2d<A> k = corners2d(a, p);
  const T* in = static_cast<const T*>(a.input) + n * a.c * plane;
  const T* go = static_cast<const T*>(a.grad_out) + n * a.c * spatial + o;
  A* gi = a.grad_input ? static_cast<A*>(a.grad_input) + n * a.c * plane : nullptr;
  A gx = 0, gy = 0;
  for (int64_t c = c0; c < c1; ++c) {
    const A g = static_cast<A>(go[c * spatial]);
    const T* ip = in + c * plane;
    A* gp = gi ? gi + c * plane : nullptr;
    for (int j = 0; j < k.m; ++j) {
      if (gp) gp[k.at[j]] += k.w[j] * g;
      if (grid) {
        const A v = static_cast<A>(ip[k.at[j]]) * g;
        gx += v * k.wx[j];
        gy += v * k.wy[j];
      }
    }
  }
  if (grid) {
    if (p.nan) gx = gy = A(NAN);
    T* gg = static_cast<T*>(a.grad_grid) + loc * 2;
    gg[0] = static_cast<T>(p.g[0] * gx);
    gg[1] = static_cast<T>(p.g[1] * gy);
  }
}

template <typename T>
void backward_item(const GridSampleArgs& a, int64_t loc, int64_t c0, int64_t c1, bool grid) {
  if (a.dims == 2 && a.interp == GridInterp::Bilinear) backward_bilinear2d<T>(a, loc, c0, c1, grid);
  else gs::backward_at<T>(a, loc, c0, c1, grid, PlainAdd{});
}

} // namespace

MT_SIM_ENTRY rt::Status grid_sample(const GridSampleArgs& a, rt::Stream) {
  const int64_t spatial = a.od * a.oh * a.ow, locations = a.n * spatial;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t per_location = workPerChannel(a) * std::max<int64_t>(a.c, 1) + 32;
    if (!a.backward) {
      par::parallel_for(locations, par::grain_for(per_location), [&](int64_t b, int64_t e) {
        if (a.dims == 2 && a.interp == GridInterp::Bilinear) return forward_bilinear2d<T>(a, b, e);
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
        for (int64_t l = b; l < e; ++l) backward_item<T>(grid_only, l, 0, a.c, true);
      });
    }
    if (!a.grad_input) return;
    par::parallel_for(a.n * blocks, par::grain_for(spatial * (workPerChannel(a) * block + 32)),
                      [&](int64_t b, int64_t e) {
                        for (int64_t task = b; task < e; ++task) {
                          const int64_t n = task / blocks, c0 = (task % blocks) * block;
                          const int64_t c1 = std::min(a.c, c0 + block);
                          for (int64_t o = 0; o < spatial; ++o) backward_item<T>(a, n * spatial + o, c0, c1, fused);
                        }
                      });
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "grid_sample: expected a floating dtype");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, grid_sample, (const GridSampleArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim
#endif
