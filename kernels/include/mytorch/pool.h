// Spatial family: 2-D and 3-D pooling (max with indices, also over integers; average; adaptive max, and 2-D adaptive
// average) and 2-D upsampling (nearest, bilinear), forward and backward, over N C (D) H W planes.
//
// Note [Spatial family]
// The glue makes inputs contiguous N C (D) H W and flattens N*C into planes (2-D ops: depth 1). Forwards compute one output element
// per work item; backwards compute one *input* element per work item by visiting the outputs whose window
// (or interpolation stencil) can reach it — a gather, so no atomics and the same bits on every run (a
// scatter would race wherever windows overlap). Index and size arithmetic follows ATen's (pooling output
// size with ceil_mode, count_include_pad and divisor_override; adaptive windows floor/ceil; nearest and
// bilinear source indices with align_corners and explicit scales).
#pragma once

#include <cmath>
#include <vector>
#include <cstdint>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"
#include "mytorch/launch.h"
#include "mytorch/window.h"

namespace mytorch {

enum class SpatialOp : int { MaxPool, AvgPool, AdaptiveAvg, AdaptiveMax, Nearest, Bilinear };

struct SpatialArgs {
  SpatialOp op = SpatialOp::MaxPool;
  bool backward = false;
  DType dtype = DType::Float;
  int64_t planes = 0, id = 1, ih = 0, iw = 0, od = 1, oh = 0, ow = 0; // 2-D ops: id = od = 1
  int kd = 1, kh = 1, kw = 1, sd = 1, sh = 1, sw = 1, pd = 0, ph = 0, pw = 0, dd = 1, dh = 1, dw = 1;
  bool count_include_pad = true;
  int64_t divisor = 0; // avg pool divisor_override (0: none)
  bool align_corners = false;
  double scale_h = 1, scale_w = 1; // nearest/bilinear: source index per output index
  const void* in = nullptr; // forward input; backward: grad_output
  void* out = nullptr; // forward output; backward: grad_input
  int64_t* indices = nullptr; // max pools: written forward, read backward
};

namespace sp {

MT_HOST_DEVICE inline int64_t nearest_src(int64_t o, int64_t in, int64_t out, double scale) {
  if (out == in) return o;
  if (out == 2 * in) return o >> 1;
  const int64_t s = static_cast<int64_t>(std::floor(static_cast<float>(o) * static_cast<float>(scale)));
  return s < in - 1 ? s : in - 1;
}

// Bilinear source: lower index, whether an upper neighbour exists, and the weight of the upper one.
template <typename A>
MT_HOST_DEVICE inline void bilinear_src(int64_t o, int64_t in, double scale, bool align, int64_t* i0, int64_t* step,
                                        A* l1) {
  A r =
      align ? static_cast<A>(scale) * static_cast<A>(o) : static_cast<A>(scale) * (static_cast<A>(o) + A(0.5)) - A(0.5);
  if (r < A(0)) r = A(0);
  *i0 = static_cast<int64_t>(r);
  *step = *i0 < in - 1 ? 1 : 0;
  *l1 = r - static_cast<A>(*i0);
}

// The bilinear value from the four corners (top-left, top-right, bottom-left, bottom-right) and the upper weights:
// one expression for every path that interpolates (forward_at, upsample_rows), so they give the same bits.
template <typename A>
MT_HOST_DEVICE inline A bilinear_mix(A lh, A lw, A tl, A tr, A bl, A br) {
  return (A(1) - lh) * ((A(1) - lw) * tl + lw * tr) + lh * ((A(1) - lw) * bl + lw * br);
}
// The weight a bilinear tap (lower index i0, step to the upper one, upper weight l) gives input index i: (1 - l) at
// i0, l at i0 + step, both added in that order where they coincide (backward_at, upsample_taps).
template <typename A>
MT_HOST_DEVICE inline A bilinear_weight(int64_t i0, int64_t step, A l, int64_t i) {
  A w = 0;
  if (i0 == i) w += A(1) - l;
  if (i0 + step == i) w += l;
  return w;
}

// One axis of an average pooling window: [*lo, *hi) clipped to the input, and its size with the padding (ATen's rule:
// the window clipped to input + padding).
MT_HOST_DEVICE inline int64_t avg_axis(int64_t o, int k, int s, int p, int64_t in, int64_t* lo, int64_t* hi) {
  *lo = o * s - p;
  *hi = *lo + k < in + p ? *lo + k : in + p;
  const int64_t padded = *hi - *lo;
  *lo = *lo > 0 ? *lo : 0;
  *hi = *hi < in ? *hi : in;
  return padded;
}

// Average pooling's window for output (z, y, x) and its divisor: divisor_override, or the window's size with or
// without the padding.
MT_HOST_DEVICE inline int64_t avg_window(const SpatialArgs& a, int64_t z, int64_t y, int64_t x, int64_t* d0,
                                         int64_t* d1, int64_t* h0, int64_t* h1, int64_t* w0, int64_t* w1) {
  const int64_t pool = avg_axis(z, a.kd, a.sd, a.pd, a.id, d0, d1) * avg_axis(y, a.kh, a.sh, a.ph, a.ih, h0, h1) *
                       avg_axis(x, a.kw, a.sw, a.pw, a.iw, w0, w1);
  return a.divisor ? a.divisor : (a.count_include_pad ? pool : (*d1 - *d0) * (*h1 - *h0) * (*w1 - *w0));
}

// The value below every other: -inf for the floating types, the minimum for the integers.
template <typename A>
MT_HOST_DEVICE inline A lowest() {
  if constexpr (std::is_floating_point_v<A>) return A(-INFINITY);
  else if constexpr (std::is_signed_v<A>) return static_cast<A>(A(1) << (sizeof(A) * 8 - 1));
  else return A(0);
}

MT_HOST_DEVICE inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
MT_HOST_DEVICE inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) {
  return ((o + 1) * in + out - 1) / out;
}
// The outputs [lo, hi) whose adaptive windows may hold input index i (a superset: each is checked exactly).
MT_HOST_DEVICE inline void adaptive_range(int64_t i, int64_t in, int64_t out, int64_t* lo, int64_t* hi) {
  const int64_t l = (i * out) / in - 1, h = ((i + 1) * out + in - 1) / in + 1;
  *lo = l > 0 ? l : 0;
  *hi = h < out ? h : out;
}

// ATen's running maximum of a window: a larger value or any NaN replaces the best so far (the last NaN wins).
template <typename A>
MT_HOST_DEVICE inline void take_max(A v, int64_t i, A* bv, int64_t* best) {
  if (v > *bv || v != v) {
    *bv = v;
    *best = i;
  }
}

// Max pooling's forward of output element e = (plane p, z, y, x) (take_max's rule).
template <typename T>
MT_HOST_DEVICE inline void max_forward_at(const SpatialArgs& a, int64_t e, int64_t p, int64_t z, int64_t y, int64_t x) {
  using A = ew::opmath_t<T>;
  const T* in = static_cast<const T*>(a.in) + p * a.id * a.ih * a.iw;
  T* out = static_cast<T*>(a.out);
  int64_t d0 = z * a.sd - a.pd, h0 = y * a.sh - a.ph, w0 = x * a.sw - a.pw;
  while (d0 < 0) d0 += a.dd; // a window with no element keeps this index (ATen's), and the lowest value
  while (h0 < 0) h0 += a.dh;
  while (w0 < 0) w0 += a.dw;
  int64_t best = (d0 * a.ih + h0) * a.iw + w0;
  A bv = lowest<A>();
  for (int k = 0; k < a.kd; ++k) {
    const int64_t d = z * a.sd - a.pd + int64_t(k) * a.dd;
    if (d < 0 || d >= a.id) continue;
    for (int i = 0; i < a.kh; ++i) {
      const int64_t h = y * a.sh - a.ph + int64_t(i) * a.dh;
      if (h < 0 || h >= a.ih) continue;
      for (int j = 0; j < a.kw; ++j) {
        const int64_t w = x * a.sw - a.pw + int64_t(j) * a.dw;
        if (w < 0 || w >= a.iw) continue;
        const int64_t at = (d * a.ih + h) * a.iw + w;
        take_max(static_cast<A>(in[at]), at, &bv, &best);
      }
    }
  }
  out[e] = static_cast<T>(bv);
  a.indices[e] = best;
}

// Average pooling's forward of output element e = (plane p, z, y, x). Integers (int64 only, sp::dispatch) are the
// CPU's: the window summed in the type, wrapping (here without overflow's undefined behaviour), and the quotient
// truncated (ew::int_div: no trap for INT64_MIN / -1).
template <typename T>
MT_HOST_DEVICE inline void avg_forward_at(const SpatialArgs& a, int64_t e, int64_t p, int64_t z, int64_t y, int64_t x) {
  const int64_t hw = a.ih * a.iw;
  const T* in = static_cast<const T*>(a.in) + p * a.id * hw;
  int64_t d0, d1, h0, h1, w0, w1;
  const int64_t div = avg_window(a, z, y, x, &d0, &d1, &h0, &h1, &w0, &w1);
  using A = std::conditional_t<std::is_integral_v<T>, uint64_t, ew::opmath_t<T>>;
  A sum = 0;
  for (int64_t d = d0; d < d1; ++d)
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += static_cast<A>(in[d * hw + h * a.iw + w]);
  if constexpr (std::is_integral_v<T>) {
    static_cast<T*>(a.out)[e] = ew::int_div(static_cast<T>(sum), static_cast<T>(div));
  } else {
    static_cast<T*>(a.out)[e] = static_cast<T>(div != 0 ? sum / static_cast<A>(div) : A(0)); // override may be < 0
  }
}

// The adaptive average of one window [d0, d1) x [h0, h1) x [w0, w1) of plane `in`: the one sum (forward_at's and
// adaptive_avg_rows', so both give the same bits).
template <typename T>
MT_HOST_DEVICE inline T adaptive_avg_window(const SpatialArgs& a, const T* in, int64_t d0, int64_t d1, int64_t h0,
                                            int64_t h1, int64_t w0, int64_t w1) {
  using A = ew::opmath_t<T>;
  const int64_t hw = a.ih * a.iw;
  A sum = 0;
  for (int64_t d = d0; d < d1; ++d)
    for (int64_t h = h0; h < h1; ++h)
      for (int64_t w = w0; w < w1; ++w) sum += static_cast<A>(in[d * hw + h * a.iw + w]);
  return static_cast<T>(sum / static_cast<A>((d1 - d0) * (h1 - h0) * (w1 - w0)));
}

// Forward of output element e = (plane p, z, y, x); the upsamplings are 2-D (z = 0).
template <typename T>
MT_HOST_DEVICE inline void forward_at(const SpatialArgs& a, int64_t e, int64_t p, int64_t z, int64_t y, int64_t x) {
  using A = ew::opmath_t<T>;
  const int64_t hw = a.ih * a.iw;
  const T* in = static_cast<const T*>(a.in) + p * a.id * hw;
  T* out = static_cast<T*>(a.out);
  if (a.op == SpatialOp::MaxPool) {
    max_forward_at<T>(a, e, p, z, y, x);
  } else if (a.op == SpatialOp::AvgPool) {
    avg_forward_at<T>(a, e, p, z, y, x);
  } else if (a.op == SpatialOp::AdaptiveMax || a.op == SpatialOp::AdaptiveAvg) {
    const int64_t d0 = adaptive_start(z, a.id, a.od), d1 = adaptive_end(z, a.id, a.od);
    const int64_t h0 = adaptive_start(y, a.ih, a.oh), h1 = adaptive_end(y, a.ih, a.oh);
    const int64_t w0 = adaptive_start(x, a.iw, a.ow), w1 = adaptive_end(x, a.iw, a.ow);
    if (a.op == SpatialOp::AdaptiveMax) { // ATen's rule: the first maximum, the last NaN
      int64_t best = d0 * hw + h0 * a.iw + w0;
      A bv = A(-INFINITY);
      for (int64_t d = d0; d < d1; ++d)
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) {
            const int64_t at = d * hw + h * a.iw + w;
            take_max(static_cast<A>(in[at]), at, &bv, &best);
          }
      out[e] = static_cast<T>(bv);
      a.indices[e] = best;
    } else {
      out[e] = adaptive_avg_window<T>(a, in, d0, d1, h0, h1, w0, w1);
    }
  } else if (a.op == SpatialOp::Nearest) {
    out[e] = in[nearest_src(y, a.ih, a.oh, a.scale_h) * a.iw + nearest_src(x, a.iw, a.ow, a.scale_w)];
  } else {
    int64_t h0, hs, w0, ws;
    A lh, lw;
    bilinear_src<A>(y, a.ih, a.scale_h, a.align_corners, &h0, &hs, &lh);
    bilinear_src<A>(x, a.iw, a.scale_w, a.align_corners, &w0, &ws, &lw);
    out[e] = static_cast<T>(
        bilinear_mix<A>(lh, lw, static_cast<A>(in[h0 * a.iw + w0]), static_cast<A>(in[h0 * a.iw + w0 + ws]),
                        static_cast<A>(in[(h0 + hs) * a.iw + w0]), static_cast<A>(in[(h0 + hs) * a.iw + w0 + ws])));
  }
}

// Candidate output range [lo, hi) along one axis for input index i of a stencil whose source index is
// about o * scale (nearest, bilinear): generous, every candidate is checked exactly.
MT_HOST_DEVICE inline void interp_range(int64_t i, int64_t out, double scale, int64_t* lo, int64_t* hi) {
  if (!(scale > 0)) {
    *lo = 0;
    *hi = out;
    return;
  }
  const double l = std::floor((static_cast<double>(i) - 2) / scale) - 2,
               h = std::ceil((static_cast<double>(i) + 2) / scale) + 2;
  *lo = l < 0 ? 0 : static_cast<int64_t>(l);
  *hi = h > static_cast<double>(out) ? out : static_cast<int64_t>(h);
}

// Backward of input element e = (plane p, d, h, w): the sum over the outputs that read it; the upsamplings are 2-D.
template <typename T>
MT_HOST_DEVICE inline void backward_at(const SpatialArgs& a, int64_t e, int64_t p, int64_t d, int64_t h, int64_t w) {
  using A = ew::opmath_t<T>;
  const int64_t ohw = a.oh * a.ow;
  const T* g = static_cast<const T*>(a.in) + p * a.od * ohw;
  const int64_t self = (d * a.ih + h) * a.iw + w;
  A acc = 0;
  if (a.op == SpatialOp::MaxPool || a.op == SpatialOp::AvgPool) {
    const int64_t* idx = a.indices ? a.indices + p * a.od * ohw : nullptr;
    int64_t zlo, zhi; // the depth taps ascending (outputs descending), then the 2-D gather's order within each
    covering_range(d + a.pd, a.kd, a.sd, a.dd, a.od, &zlo, &zhi);
    for (int64_t z = zhi; z >= zlo; --z) {
      if (a.dd != 1 && (d + a.pd - z * a.sd) % a.dd) continue;
      for_each_covering_output(h, w, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.dh, a.dw, a.oh, a.ow,
                               [&](int, int, int64_t y, int64_t x) {
                                 const int64_t o = z * ohw + y * a.ow + x;
                                 if (a.op == SpatialOp::MaxPool) {
                                   if (idx[o] == self) acc += static_cast<A>(g[o]);
                                 } else {
                                   int64_t d0, d1, h0, h1, w0, w1;
                                   const int64_t div = avg_window(a, z, y, x, &d0, &d1, &h0, &h1, &w0, &w1);
                                   if (div != 0) acc += static_cast<A>(g[o]) / static_cast<A>(div);
                                 }
                               });
    }
  } else if (a.op == SpatialOp::AdaptiveAvg || a.op == SpatialOp::AdaptiveMax) {
    int64_t zlo, zhi, ylo, yhi, xlo, xhi;
    adaptive_range(d, a.id, a.od, &zlo, &zhi);
    adaptive_range(h, a.ih, a.oh, &ylo, &yhi);
    adaptive_range(w, a.iw, a.ow, &xlo, &xhi);
    const int64_t* idx = a.op == SpatialOp::AdaptiveMax ? a.indices + p * a.od * ohw : nullptr;
    for (int64_t z = zlo; z < zhi; ++z) {
      const int64_t d0 = adaptive_start(z, a.id, a.od), d1 = adaptive_end(z, a.id, a.od);
      if (d < d0 || d >= d1) continue;
      for (int64_t y = ylo; y < yhi; ++y) {
        const int64_t h0 = adaptive_start(y, a.ih, a.oh), h1 = adaptive_end(y, a.ih, a.oh);
        if (h < h0 || h >= h1) continue;
        for (int64_t x = xlo; x < xhi; ++x) {
          const int64_t w0 = adaptive_start(x, a.iw, a.ow), w1 = adaptive_end(x, a.iw, a.ow);
          if (w < w0 || w >= w1) continue;
          const int64_t o = z * ohw + y * a.ow + x;
          if (idx) {
            if (idx[o] == self) acc += static_cast<A>(g[o]);
          } else {
            acc += static_cast<A>(g[o]) / static_cast<A>((d1 - d0) * (h1 - h0) * (w1 - w0));
          }
        }
      }
    }
  } else {
    int64_t ylo, yhi, xlo, xhi;
    interp_range(h, a.oh, a.scale_h, &ylo, &yhi);
    interp_range(w, a.ow, a.scale_w, &xlo, &xhi);
    if (a.oh == a.ih && a.op == SpatialOp::Nearest) {
      ylo = h;
      yhi = h + 1;
    }
    if (a.ow == a.iw && a.op == SpatialOp::Nearest) {
      xlo = w;
      xhi = w + 1;
    }
    for (int64_t y = ylo; y < yhi; ++y) {
      A wy = 0;
      if (a.op == SpatialOp::Nearest) {
        wy = nearest_src(y, a.ih, a.oh, a.scale_h) == h ? A(1) : A(0);
      } else {
        int64_t h0, hs;
        A lh;
        bilinear_src<A>(y, a.ih, a.scale_h, a.align_corners, &h0, &hs, &lh);
        wy = bilinear_weight<A>(h0, hs, lh, h);
      }
      if (wy == A(0)) continue;
      for (int64_t x = xlo; x < xhi; ++x) {
        A wx = 0;
        if (a.op == SpatialOp::Nearest) {
          wx = nearest_src(x, a.iw, a.ow, a.scale_w) == w ? A(1) : A(0);
        } else {
          int64_t w0, ws;
          A lw;
          bilinear_src<A>(x, a.iw, a.scale_w, a.align_corners, &w0, &ws, &lw);
          wx = bilinear_weight<A>(w0, ws, lw, w);
        }
        if (wx != A(0)) acc += wy * wx * static_cast<A>(g[y * a.ow + x]);
      }
    }
  }
  static_cast<T*>(a.out)[e] = static_cast<T>(acc);
}

// The work item at (plane p, z, y, x), index e: an output element forward, an input element backward; integers run
// forwards only (sp::dispatch).
template <typename T>
MT_HOST_DEVICE inline void item_at(const SpatialArgs& a, int64_t e, int64_t p, int64_t z, int64_t y, int64_t x) {
  if constexpr (std::is_integral_v<T>) {
    if (a.op == SpatialOp::AvgPool) avg_forward_at<T>(a, e, p, z, y, x);
    else max_forward_at<T>(a, e, p, z, y, x);
  } else if (a.backward) {
    backward_at<T>(a, e, p, z, y, x);
  } else {
    forward_at<T>(a, e, p, z, y, x);
  }
}

// The sizes items are laid out over: the input's backward, the output's forward.
template <typename T>
MT_HOST_DEVICE inline void item_dims(const SpatialArgs& a, int64_t* D, int64_t* H, int64_t* W) {
  const bool back = a.backward && !std::is_integral_v<T>;
  *D = back ? a.id : a.od;
  *H = back ? a.ih : a.oh;
  *W = back ? a.iw : a.ow;
}

// Work item e of a launch (a thread each on CUDA; the sim walks rows, Note [Spatial family]).
template <typename T>
MT_HOST_DEVICE inline void item(const SpatialArgs& a, int64_t e) {
  int64_t D, H, W;
  item_dims<T>(a, &D, &H, &W);
  const int64_t row = e / W, zp = row / H;
  item_at<T>(a, e, zp / D, zp % D, row % H, e % W);
}

// The forward of the 2-D upsamplings over output rows [begin, end): each column's source (and bilinear weight) found
// once for the rows, each row's once for its columns; the arithmetic and its order are forward_at's (the same bits).
template <typename T>
inline void upsample_rows(const SpatialArgs& a, int64_t begin, int64_t end) {
  using A = ew::opmath_t<T>;
  const int64_t H = a.oh, W = a.ow, hw = a.ih * a.iw;
  std::vector<int64_t> x0(static_cast<size_t>(W)), xs(static_cast<size_t>(W), 0);
  std::vector<A> lw(static_cast<size_t>(W));
  for (int64_t x = 0; x < W; ++x) {
    if (a.op == SpatialOp::Nearest) x0[x] = nearest_src(x, a.iw, a.ow, a.scale_w);
    else bilinear_src<A>(x, a.iw, a.scale_w, a.align_corners, &x0[x], &xs[x], &lw[x]);
  }
  for (int64_t r = begin; r < end; ++r) {
    const int64_t y = r % H, p = r / (H * a.od);
    const T* in = static_cast<const T*>(a.in) + p * a.id * hw;
    T* out = static_cast<T*>(a.out) + r * W;
    if (a.op == SpatialOp::Nearest) {
      const T* src = in + nearest_src(y, a.ih, a.oh, a.scale_h) * a.iw;
      for (int64_t x = 0; x < W; ++x) out[x] = src[x0[x]];
      continue;
    }
    int64_t h0, hs;
    A lh;
    bilinear_src<A>(y, a.ih, a.scale_h, a.align_corners, &h0, &hs, &lh);
    const T *top = in + h0 * a.iw, *bottom = in + (h0 + hs) * a.iw;
    for (int64_t x = 0; x < W; ++x) {
      const int64_t w0 = x0[x], ws = xs[x];
      const A l = lw[x];
      out[x] = static_cast<T>(bilinear_mix<A>(lh, l, static_cast<A>(top[w0]), static_cast<A>(top[w0 + ws]),
                                              static_cast<A>(bottom[w0]), static_cast<A>(bottom[w0 + ws])));
    }
  }
}

// The adaptive average pooling forward over output rows [begin, end): each row's depth and height window found
// once for its columns; forward_at's sums in its order (the same bits).
template <typename T>
inline void adaptive_avg_rows(const SpatialArgs& a, int64_t begin, int64_t end) {
  const int64_t hw = a.ih * a.iw;
  T* out = static_cast<T*>(a.out);
  for (int64_t r = begin; r < end; ++r) {
    const int64_t y = r % a.oh, z = (r / a.oh) % a.od, p = r / (a.oh * a.od);
    const T* in = static_cast<const T*>(a.in) + p * a.id * hw;
    const int64_t d0 = adaptive_start(z, a.id, a.od), d1 = adaptive_end(z, a.id, a.od);
    const int64_t h0 = adaptive_start(y, a.ih, a.oh), h1 = adaptive_end(y, a.ih, a.oh);
    for (int64_t x = 0; x < a.ow; ++x) {
      const int64_t w0 = adaptive_start(x, a.iw, a.ow), w1 = adaptive_end(x, a.iw, a.ow);
      out[r * a.ow + x] = adaptive_avg_window<T>(a, in, d0, d1, h0, h1, w0, w1);
    }
  }
}

// The items of rows [begin, end) (planes * depth * height rows): the plane, depth and row found once per row, not
// four 64-bit divisions per element.
template <typename T>
inline void rows(const SpatialArgs& a, int64_t begin, int64_t end) {
  if (!a.backward && (a.op == SpatialOp::Nearest || a.op == SpatialOp::Bilinear))
    return upsample_rows<T>(a, begin, end);
  if constexpr (!std::is_integral_v<T>)
    if (!a.backward && a.op == SpatialOp::AdaptiveAvg) return adaptive_avg_rows<T>(a, begin, end);
  int64_t D, H, W;
  item_dims<T>(a, &D, &H, &W);
  for (int64_t r = begin; r < end; ++r) {
    const int64_t y = r % H, z = (r / H) % D, p = r / (H * D);
    for (int64_t x = 0; x < W; ++x) item_at<T>(a, r * W + x, p, z, y, x);
  }
}

// Max pooling's backward over plane p as a scatter of the gradients to their indices, for a host that runs a plane
// per thread (the sim): O(outputs) where the gather tests every covering output. The outputs are taken in the
// gather's order (z, y, then x, descending), so every input's sum is the same sequence of additions, in A, and the
// bits are the gather's. acc: id*ih*iw elements of scratch.
template <typename T>
inline void max_backward_plane(const SpatialArgs& a, int64_t p, ew::opmath_t<T>* acc) {
  using A = ew::opmath_t<T>;
  const int64_t n_in = a.id * a.ih * a.iw, n_out = a.od * a.oh * a.ow;
  const T* g = static_cast<const T*>(a.in) + p * n_out;
  const int64_t* idx = a.indices + p * n_out;
  for (int64_t i = 0; i < n_in; ++i) acc[i] = A(0);
  for (int64_t o = n_out - 1; o >= 0; --o) {
    const int64_t i = idx[o];
    if (i >= 0 && i < n_in) acc[i] += static_cast<A>(g[o]);
  }
  T* out = static_cast<T*>(a.out) + p * n_in;
  for (int64_t i = 0; i < n_in; ++i) out[i] = static_cast<T>(acc[i]);
}

// acc[d0:d1, h0:h1, w0:w1] += v in an input plane (the pooling backwards that scatter an output's share).
template <typename A>
inline void add_to_box(const SpatialArgs& a, A* acc, int64_t d0, int64_t d1, int64_t h0, int64_t h1, int64_t w0,
                       int64_t w1, A v) {
  for (int64_t d = d0; d < d1; ++d)
    for (int64_t h = h0; h < h1; ++h) {
      A* row = acc + (d * a.ih + h) * a.iw;
      for (int64_t w = w0; w < w1; ++w) row[w] += v;
    }
}

// The output gradient of plane p; its input-gradient accumulator zeroed.
template <typename T>
inline const T* plane_start(const SpatialArgs& a, int64_t p, ew::opmath_t<T>* acc) {
  const int64_t n_in = a.id * a.ih * a.iw;
  for (int64_t i = 0; i < n_in; ++i) acc[i] = ew::opmath_t<T>(0);
  return static_cast<const T*>(a.in) + p * a.od * a.oh * a.ow;
}

// Input-gradient plane p from its accumulator.
template <typename T>
inline void plane_out(const SpatialArgs& a, int64_t p, const ew::opmath_t<T>* acc) {
  const int64_t n_in = a.id * a.ih * a.iw;
  T* out = static_cast<T*>(a.out) + p * n_in;
  for (int64_t i = 0; i < n_in; ++i) out[i] = static_cast<T>(acc[i]);
}

// Average pooling's backward of plane p, scattered: each output's share g / divisor added to its window's inputs,
// outputs in descending order (backward_at's order for an input: depth, row and column of the covering outputs
// descending), so each input sums the same terms in the same order (the same bits); a gather per input found its
// covering outputs and their divisors per element (avg_pool2d 2/2's backward at 0.17x the CPU).
template <typename T>
inline void avg_backward_plane(const SpatialArgs& a, int64_t p, ew::opmath_t<T>* acc) {
  using A = ew::opmath_t<T>;
  const T* g = plane_start<T>(a, p, acc);
  for (int64_t z = a.od - 1; z >= 0; --z)
    for (int64_t y = a.oh - 1; y >= 0; --y)
      for (int64_t x = a.ow - 1; x >= 0; --x) {
        int64_t d0, d1, h0, h1, w0, w1;
        const int64_t div = avg_window(a, z, y, x, &d0, &d1, &h0, &h1, &w0, &w1);
        if (div == 0) continue;
        const A v = static_cast<A>(g[(z * a.oh + y) * a.ow + x]) / static_cast<A>(div);
        add_to_box(a, acc, d0, d1, h0, h1, w0, w1, v);
      }
  plane_out<T>(a, p, acc);
}

// Adaptive average pooling's backward of plane p, scattered: each output's share g / window size added to its
// window's inputs, outputs in ascending order, so each input sums the same terms in backward_at's order (the same
// bits); a gather per input found its covering outputs by divisions (0.03x the CPU on a 56 x 56 -> 7 x 7 plane).
template <typename T>
inline void adaptive_avg_backward_plane(const SpatialArgs& a, int64_t p, ew::opmath_t<T>* acc) {
  using A = ew::opmath_t<T>;
  const T* g = plane_start<T>(a, p, acc);
  for (int64_t z = 0; z < a.od; ++z) {
    const int64_t d0 = adaptive_start(z, a.id, a.od), d1 = adaptive_end(z, a.id, a.od);
    for (int64_t y = 0; y < a.oh; ++y) {
      const int64_t h0 = adaptive_start(y, a.ih, a.oh), h1 = adaptive_end(y, a.ih, a.oh);
      for (int64_t x = 0; x < a.ow; ++x) {
        const int64_t w0 = adaptive_start(x, a.iw, a.ow), w1 = adaptive_end(x, a.iw, a.ow);
        const A v = static_cast<A>(g[(z * a.oh + y) * a.ow + x]) / static_cast<A>((d1 - d0) * (h1 - h0) * (w1 - w0));
        add_to_box(a, acc, d0, d1, h0, h1, w0, w1, v);
      }
    }
  }
  plane_out<T>(a, p, acc);
}

// One axis of the upsamplings' backward: for output index o, the input indices it reads and their weights
// (bilinear_weight, as backward_at), zero weights left out. Returns the count.
template <typename A>
inline int upsample_taps(const SpatialArgs& a, int64_t o, int64_t in, int64_t out, double scale, int64_t idx[2],
                         A wt[2]) {
  if (a.op == SpatialOp::Nearest) {
    idx[0] = nearest_src(o, in, out, scale);
    wt[0] = A(1);
    return 1;
  }
  int64_t i0, step;
  A l;
  bilinear_src<A>(o, in, scale, a.align_corners, &i0, &step, &l);
  int n = 0;
  for (int t = 0; t < (step == 0 ? 1 : 2); ++t) { // the tap's inputs, each with backward_at's weight
    idx[n] = i0 + t * step;
    wt[n] = bilinear_weight<A>(i0, step, l, idx[n]);
    n += wt[n] != A(0);
  }
  return n;
}

// The upsamplings' backward over plane p as a scatter of the output gradients, for a host that runs a plane per
// thread (the sim): O(outputs) where the gather scans candidate outputs per input. Outputs are taken in the gather's
// order (y, then x, ascending) with its weights, so every input's sum is the same sequence of additions and the bits
// are the gather's. acc: ih*iw elements of scratch.
template <typename T>
inline void upsample_backward_plane(const SpatialArgs& a, int64_t p, ew::opmath_t<T>* acc) {
  using A = ew::opmath_t<T>;
  const int64_t n_in = a.ih * a.iw, n_out = a.oh * a.ow;
  const T* g = static_cast<const T*>(a.in) + p * n_out;
  for (int64_t i = 0; i < n_in; ++i) acc[i] = A(0);
  std::vector<int64_t> xi(static_cast<size_t>(2 * a.ow));
  std::vector<A> xw(static_cast<size_t>(2 * a.ow));
  std::vector<int> xn(static_cast<size_t>(a.ow));
  for (int64_t x = 0; x < a.ow; ++x) xn[x] = upsample_taps<A>(a, x, a.iw, a.ow, a.scale_w, &xi[2 * x], &xw[2 * x]);
  for (int64_t y = 0; y < a.oh; ++y) {
    int64_t yi[2];
    A yw[2];
    const int yn = upsample_taps<A>(a, y, a.ih, a.oh, a.scale_h, yi, yw);
    const T* row = g + y * a.ow;
    for (int t = 0; t < yn; ++t) {
      A* dst = acc + yi[t] * a.iw;
      for (int64_t x = 0; x < a.ow; ++x) {
        const A gv = static_cast<A>(row[x]);
        for (int u = 0; u < xn[x]; ++u) dst[xi[2 * x + u]] += yw[t] * xw[2 * x + u] * gv;
      }
    }
  }
  T* out = static_cast<T*>(a.out) + p * n_in;
  for (int64_t i = 0; i < n_in; ++i) out[i] = static_cast<T>(acc[i]);
}

// f(T{}) for the dtypes a spatial op runs on: the floating types; for max pooling's forward the integers too, and
// for average pooling's forward int64 (the one integer type the CPU averages).
template <typename F>
inline bool dispatch(const SpatialArgs& a, F&& f) {
  if (dispatch_floating(a.dtype, f)) return true;
  const bool integers = a.op == SpatialOp::MaxPool || (a.op == SpatialOp::AvgPool && a.dtype == DType::Int64);
  return integers && !a.backward && dispatch_integer(a.dtype, f);
}

} // namespace sp

MT_LAUNCHER(spatial, (const SpatialArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
