// Grid sampler family: grid_sample's forward and backward, 2-D (bilinear, nearest, bicubic) and 3-D (trilinear,
// nearest), with zeros, border or reflection padding, over contiguous N C (D) H W inputs and N (D) H W x dims grids.
//
// Note [Grid sampler]
// A work item is an output location (n, z, y, x): its grid point gives the source coordinates once, and the item
// loops over the channels, as ATen's kernels do. The arithmetic is ATen's (GridSampler.h): unnormalize, then clip or
// reflect for border and reflection padding; bilinear corners nw, ne, sw, se (and the 3-D eight, x fastest) each
// weighted by the product of its distances to the opposite corner; nearest rounds half to even; bicubic takes the
// 4 x 4 taps of the unnormalized point, each tap's coordinate padded on its own. It runs in the opmath type A (float32
// for the half types). Coordinates that are not finite follow the CPU's kernels (the alignment's reference; CUDA's
// differ): border and reflection clip NaN to 0 in 2-D (the CPU's vectorised kernel) and to size - 1 in 3-D (its
// scalar one), a 2-D bilinear point outside with zeros padding samples NaN, and a coordinate that is NaN, infinite
// or beyond +-2^40 becomes index -100 (outside) instead of an undefined conversion.
// The backward's grid gradient is a gather over the item's channels. Its input gradient is a scatter (grid points
// may share input pixels): into an A-typed buffer the glue zeroes, through atomics on CUDA (torch.cuda's way:
// summation order varies between runs) and, on the sim, by tasks that each own a block of one batch element's
// channels and take the locations in order (the same bits at any thread count).
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/cubic.h"
#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"

namespace mytorch {

enum class GridInterp : int { Bilinear = 0, Nearest = 1, Bicubic = 2 };  // ATen's GridSamplerInterpolation
enum class GridPadding : int { Zeros = 0, Border = 1, Reflection = 2 };  // ATen's GridSamplerPadding

struct GridSampleArgs {
  DType dtype = DType::Float;
  int dims = 2;  // 2 or 3 spatial dimensions
  GridInterp interp = GridInterp::Bilinear;
  GridPadding padding = GridPadding::Zeros;
  bool align_corners = false;
  bool backward = false;
  int64_t n = 0, c = 0, id = 1, ih = 0, iw = 0, od = 1, oh = 0, ow = 0;  // 2-D: id = od = 1
  const void* input = nullptr;  // [n, c, id, ih, iw] in T
  const void* grid = nullptr;   // [n, od, oh, ow, dims] in T
  void* out = nullptr;          // forward: [n, c, od, oh, ow] in T
  const void* grad_out = nullptr;  // backward: [n, c, od, oh, ow] in T
  void* grad_input = nullptr;   // backward: [n, c, id, ih, iw] in opmath_t<T>, zeroed; null when not wanted
  void* grad_grid = nullptr;    // backward: the grid's shape in T
};

namespace gs {

// The coordinate as an index: -100 (out of bounds) for NaN, infinities and magnitudes past 2^40.
template <typename A>
MT_HOST_DEVICE inline int64_t to_index(A x) {
  return (x == x && x > A(-1099511627776.0) && x < A(1099511627776.0)) ? static_cast<int64_t>(std::floor(x)) : -100;
}

// [-1, 1] to pixel coordinates; *g: d result / d coord.
template <typename A>
MT_HOST_DEVICE inline A unnormalize(A coord, int64_t size, bool align, A* g) {
  if (align) {
    *g = static_cast<A>(size - 1) / 2;
    return ((coord + 1) / 2) * static_cast<A>(size - 1);
  }
  *g = static_cast<A>(size) / 2;
  return ((coord + 1) * static_cast<A>(size) - 1) / 2;
}

template <typename A>
MT_HOST_DEVICE inline bool finite(A x) {
  return x - x == A(0);
}

// Clip to [0, size - 1]; the border counts as outside for the gradient. NaN goes where the CPU's kernels put it:
// to 0 in 2-D (its vectorised clamp), to size - 1 in 3-D (std::min(size - 1, std::max(x, 0))).
template <typename A>
MT_HOST_DEVICE inline A clip(A x, int64_t size, int dims, A* g) {
  const A hi = static_cast<A>(size - 1);
  *g = (x > A(0) && x < hi) ? A(1) : A(0);
  if (x != x) return dims == 2 ? A(0) : hi;
  const A lo = x < A(0) ? A(0) : x;
  return lo < hi ? lo : hi;
}

// Reflect into [twice_low / 2, twice_high / 2]; NaN and infinities become NaN (for clip).
template <typename A>
MT_HOST_DEVICE inline A reflect(A x, int64_t twice_low, int64_t twice_high, A* g) {
  if (twice_low == twice_high) {
    *g = A(0);
    return A(0);
  }
  if (!finite(x)) {
    *g = A(0);
    return A(NAN);
  }
  const A lo = static_cast<A>(twice_low) / 2, span = static_cast<A>(twice_high - twice_low) / 2;
  x = x - lo;
  A sign = A(1);
  if (x < A(0)) {
    sign = A(-1);
    x = -x;
  }
  const A extra = std::fmod(x, span);
  const int flips = static_cast<int>(std::floor(x / span));
  if (flips % 2 == 0) {
    *g = sign;
    return extra + lo;
  }
  *g = -sign;
  return span - extra + lo;
}

// Padding's map of a pixel coordinate into the image (border, reflection; zeros leaves it); *g: its derivative.
template <typename A>
MT_HOST_DEVICE inline A pad(A x, int64_t size, GridPadding p, bool align, int dims, A* g) {
  *g = A(1);
  if (p == GridPadding::Zeros) return x;
  A gr = A(1), gc;
  if (p == GridPadding::Reflection) x = align ? reflect(x, 0, 2 * (size - 1), &gr) : reflect(x, -1, 2 * size - 1, &gr);
  x = clip(x, size, dims, &gc);
  *g = gr * gc;
  return x;
}

// The source coordinate of grid value `coord` along an axis of `size` pixels, and d source / d coord.
template <typename A>
MT_HOST_DEVICE inline A source(const GridSampleArgs& a, A coord, int64_t size, A* g) {
  A gu, gp;
  const A x = pad(unnormalize(coord, size, a.align_corners, &gu), size, a.padding, a.align_corners, a.dims, &gp);
  *g = gu * gp;
  return x;
}

// A location's geometry: source coordinates (x, y, z), their derivatives, the lower corner and the weights'
// distances (bilinear: w[axis][0] toward the lower corner's weight, w[axis][1] the upper's). nan: a 2-D bilinear
// point with zeros padding whose coordinate is not finite, which the CPU's kernel samples as NaN (its weights are
// NaN and it multiplies the zeros outside by them); 3-D and CUDA give 0 there.
template <typename A>
struct Point {
  A s[3] = {0, 0, 0}, g[3] = {1, 1, 1};
  int64_t lo[3] = {0, 0, 0};
  A w[3][2] = {{1, 0}, {1, 0}, {1, 0}};
  bool nan = false;
};

template <typename T>
MT_HOST_DEVICE inline Point<ew::opmath_t<T>> locate(const GridSampleArgs& a, int64_t loc) {
  using A = ew::opmath_t<T>;
  const T* gp = static_cast<const T*>(a.grid) + loc * a.dims;
  const int64_t size[3] = {a.iw, a.ih, a.id};
  Point<A> p;
  for (int k = 0; k < a.dims; ++k) {
    const A coord = static_cast<A>(gp[k]);
    if (a.interp == GridInterp::Bicubic) {  // padding applies per tap
      p.s[k] = unnormalize(coord, size[k], a.align_corners, &p.g[k]);
    } else {
      p.s[k] = source(a, coord, size[k], &p.g[k]);
    }
    if (a.interp == GridInterp::Nearest) {
      p.lo[k] = to_index(static_cast<A>(std::nearbyint(p.s[k])));
    } else if (a.interp == GridInterp::Bilinear) {
      p.lo[k] = to_index(p.s[k]);
      p.nan = p.nan || (a.dims == 2 && a.padding == GridPadding::Zeros && !finite(p.s[k]));
      const A f = static_cast<A>(p.lo[k]);
      p.w[k][0] = f + 1 - p.s[k];
      p.w[k][1] = p.s[k] - f;
    }
  }
  return p;
}

MT_HOST_DEVICE inline bool inside(const GridSampleArgs& a, int64_t x, int64_t y, int64_t z) {
  return x >= 0 && x < a.iw && y >= 0 && y < a.ih && z >= 0 && z < a.id;
}

// Bicubic's 4 x 4 taps around point p, separably: tap (j, i) is row[j] + col[i] in a plane when both are >= 0, else
// outside (zeros padding). Tap coordinates stay in A until padded (ATen's get_value_bounded), so a far coordinate
// under border padding still lands on the border.
template <typename A>
MT_HOST_DEVICE inline void taps(const GridSampleArgs& a, const Point<A>& p, int64_t row[4], int64_t col[4]) {
  const A fx = std::floor(p.s[0]), fy = std::floor(p.s[1]);
  A g;
  MT_UNROLL
  for (int k = 0; k < 4; ++k) {
    const int64_t ix = to_index(pad(fx - 1 + A(k), a.iw, a.padding, a.align_corners, 2, &g));
    const int64_t iy = to_index(pad(fy - 1 + A(k), a.ih, a.padding, a.align_corners, 2, &g));
    col[k] = ix >= 0 && ix < a.iw ? ix : -1;
    row[k] = iy >= 0 && iy < a.ih ? iy * a.iw : -1;
  }
}

// Bicubic's fractions: how far p lies past the floor of its coordinate, along x and y.
template <typename A>
MT_HOST_DEVICE inline void fractions(const Point<A>& p, A* tx, A* ty) {
  *tx = p.s[0] - std::floor(p.s[0]);
  *ty = p.s[1] - std::floor(p.s[1]);
}

// The linear corners of a point: f(offset in the plane, weight, d weight / d x, d / d y, d / d z) for each corner
// inside the input, in ATen's order (x fastest, then y, then z). Weights multiply x's, y's then z's distance.
template <typename A, typename F>
MT_HOST_DEVICE inline void corners(const GridSampleArgs& a, const Point<A>& p, F&& f) {
  const int nz = a.dims == 3 ? 2 : 1;
  MT_UNROLL
  for (int dz = 0; dz < 2; ++dz) {
    if (dz == nz) break;
    MT_UNROLL
    for (int dy = 0; dy < 2; ++dy) {
      MT_UNROLL
      for (int dx = 0; dx < 2; ++dx) {
        const int64_t x = p.lo[0] + dx, y = p.lo[1] + dy, z = a.dims == 3 ? p.lo[2] + dz : 0;
        if (!inside(a, x, y, z)) continue;
        const A wx = p.w[0][dx], wy = p.w[1][dy], wz = a.dims == 3 ? p.w[2][dz] : A(1);
        const A sx = dx ? A(1) : A(-1), sy = dy ? A(1) : A(-1), sz = dz ? A(1) : A(-1);
        const A w = a.dims == 3 ? wx * wy * wz : wx * wy;
        f((z * a.ih + y) * a.iw + x, w, sx * wy * wz, sy * wx * wz, sz * wx * wy);
      }
    }
  }
}

// Forward of location loc = (n, z, y, x) for every channel.
template <typename T>
MT_HOST_DEVICE inline void forward_at(const GridSampleArgs& a, int64_t loc) {
  using A = ew::opmath_t<T>;
  const int64_t spatial = a.od * a.oh * a.ow, plane = a.id * a.ih * a.iw;
  const int64_t n = loc / spatial, o = loc % spatial;
  const Point<A> p = locate<T>(a, loc);
  const T* in = static_cast<const T*>(a.input) + n * a.c * plane;
  T* out = static_cast<T*>(a.out) + n * a.c * spatial + o;
  if (a.interp == GridInterp::Nearest) {
    const bool ok = inside(a, p.lo[0], p.lo[1], a.dims == 3 ? p.lo[2] : 0);
    const int64_t at = ((a.dims == 3 ? p.lo[2] : 0) * a.ih + p.lo[1]) * a.iw + p.lo[0];
    for (int64_t c = 0; c < a.c; ++c) out[c * spatial] = ok ? in[c * plane + at] : static_cast<T>(A(0));
  } else if (a.interp == GridInterp::Bicubic) {
    A cx[4], cy[4], tx, ty;
    fractions(p, &tx, &ty);
    cubic::coefficients<A>(tx, cx);
    cubic::coefficients<A>(ty, cy);
    int64_t row[4], col[4];
    taps(a, p, row, col);
    for (int64_t c = 0; c < a.c; ++c) {
      const T* ip = in + c * plane;
      A acc = 0;
      MT_UNROLL
      for (int j = 0; j < 4; ++j) {  // a zero tap still multiplies its coefficient (a NaN one stays NaN, as ATen)
        A sum = 0;
        MT_UNROLL
        for (int i = 0; i < 4; ++i)
          sum += (row[j] >= 0 && col[i] >= 0 ? static_cast<A>(ip[row[j] + col[i]]) : A(0)) * cx[i];
        acc += sum * cy[j];
      }
      out[c * spatial] = static_cast<T>(acc);
    }
  } else {
    for (int64_t c = 0; c < a.c; ++c) {
      const T* ip = in + c * plane;
      A acc = p.nan ? A(NAN) : A(0);
      corners(a, p, [&](int64_t at, A w, A, A, A) { acc += static_cast<A>(ip[at]) * w; });
      out[c * spatial] = static_cast<T>(acc);
    }
  }
}

// Backward of location loc for channels [c0, c1): adds each channel's input gradient through add(A* p, A v) when
// a.grad_input is set, and writes the grid gradient when `grid` (over channels [c0, c1), so the caller passes all).
template <typename T, typename Add>
MT_HOST_DEVICE inline void backward_at(const GridSampleArgs& a, int64_t loc, int64_t c0, int64_t c1, bool grid,
                                       Add&& add) {
  using A = ew::opmath_t<T>;
  const int64_t spatial = a.od * a.oh * a.ow, plane = a.id * a.ih * a.iw;
  const int64_t n = loc / spatial, o = loc % spatial;
  const Point<A> p = locate<T>(a, loc);
  const T* in = static_cast<const T*>(a.input) + n * a.c * plane;
  const T* go = static_cast<const T*>(a.grad_out) + n * a.c * spatial + o;
  A* gi = a.grad_input ? static_cast<A*>(a.grad_input) + n * a.c * plane : nullptr;
  A gx = 0, gy = 0, gz = 0;
  if (a.interp == GridInterp::Nearest) {
    const int64_t z = a.dims == 3 ? p.lo[2] : 0;
    if (gi && inside(a, p.lo[0], p.lo[1], z)) {
      const int64_t at = (z * a.ih + p.lo[1]) * a.iw + p.lo[0];
      for (int64_t c = c0; c < c1; ++c) add(gi + c * plane + at, static_cast<A>(go[c * spatial]));
    }
  } else if (a.interp == GridInterp::Bicubic) {
    A cx[4], cy[4], dx[4], dy[4], tx, ty;
    fractions(p, &tx, &ty);
    cubic::coefficients<A>(tx, cx);
    cubic::coefficients<A>(ty, cy);
    cubic::coefficients_grad<A>(tx, dx);
    cubic::coefficients_grad<A>(ty, dy);
    int64_t row[4], col[4];
    taps(a, p, row, col);
    for (int64_t c = c0; c < c1; ++c) {
      const A g = static_cast<A>(go[c * spatial]);
      MT_UNROLL
      for (int j = 0; j < 4; ++j) {
        MT_UNROLL
        for (int i = 0; i < 4; ++i) {
          if (row[j] < 0 || col[i] < 0) continue;
          const int64_t t = row[j] + col[i];
          if (gi) add(gi + c * plane + t, g * cx[i] * cy[j]);
          if (grid) {
            const A v = static_cast<A>(in[c * plane + t]);
            gx -= v * dx[i] * cy[j] * g;
            gy -= v * dy[j] * cx[i] * g;
          }
        }
      }
    }
  } else {
    for (int64_t c = c0; c < c1; ++c) {
      const A g = static_cast<A>(go[c * spatial]);
      const T* ip = in + c * plane;
      A* gp = gi ? gi + c * plane : nullptr;
      corners(a, p, [&](int64_t at, A w, A wx, A wy, A wz) {
        if (gp) add(gp + at, w * g);
        if (grid) {
          const A v = static_cast<A>(ip[at]) * g;
          gx += v * wx;
          gy += v * wy;
          gz += v * wz;
        }
      });
    }
  }
  if (grid) {
    if (p.nan) gx = gy = A(NAN);
    T* gg = static_cast<T*>(a.grad_grid) + loc * a.dims;
    gg[0] = static_cast<T>(p.g[0] * gx);
    gg[1] = static_cast<T>(p.g[1] * gy);
    if (a.dims == 3) gg[2] = static_cast<T>(p.g[2] * gz);
  }
}

} // namespace gs

MT_LAUNCHER(grid_sample, (const GridSampleArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
