// sim grid sampler (Note [Grid sampler]): the forward splits the output locations over the workers (each writes its
// own elements); the backward splits (batch element, block of channels) tasks, each taking its locations in order,
// so every sum has the same order at any thread count. Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>

#include "mytorch/grid_sample.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"

#if defined(MT_SIM_ISA_AVX2)
#include <immintrin.h>
#endif

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

// Note [Sim bilinear blocks]
// The 2-D bilinear forward takes its locations a block of one batch element at a time, the geometry (gs::locate's
// arithmetic: source coordinates, lower corners, distances, each corner's offset, weight and whether it lies inside)
// computed for the block before the channels are walked, without branches on the data (where points fall is random,
// and mispredicted branches on it cost more than the arithmetic). float32 with zeros or border padding runs eight
// locations in AVX2 registers, each corner a masked gather (forward_bilinear8); the other dtypes, reflection padding
// and a block's last few locations run the same steps in scalar loops over the block. Found per location and walked
// per channel (the form before), the geometry ran at 0.16x the CPU's kernel (docs/speed.md at 276b448), the AVX2 form
// at 0.75x. The backward takes the same blocks (its grid gradient gathered in AVX2 across a task's channels, its
// input gradient added location by location, corner by corner, as before): 0.26x -> 0.76x. The operations are gs::forward_at's in its order, a corner outside adding a zero value times its weight
// instead of nothing, which changes no sum (a sum starts at +0 or NaN and never becomes -0, and x + +-0 is x); such a
// weight is finite but for a coordinate that is not finite under zeros padding, whose sum is NaN from the start.
constexpr int64_t kBlock = 8;  // locations a block, aligned to the batch element's first

template <typename A>
struct BilinearBlock {
  int32_t off[4][kBlock];  // within a plane (the glue's planes have fewer than 2^31 elements)
  A w[4][kBlock];
  bool in[4][kBlock];
  bool nan[kBlock];
};

// Locations [o0, o0 + m) of batch element n (m <= kBlock).
// gs::source's arithmetic written so that a loop over the block vectorises for zeros and border padding (selects, no
// branches, both align_corners forms computed); reflection calls gs::source.
template <GridPadding P, typename A>
MT_FORCE_INLINE A block_source(const GridSampleArgs& a, A coord, int64_t size) {
  if constexpr (P == GridPadding::Reflection) {
    A g;
    return gs::source(a, coord, size, &g);
  } else {
    const A n = static_cast<A>(size), aligned = ((coord + 1) / 2) * (n - 1), plain = ((coord + 1) * n - 1) / 2;
    const A x = a.align_corners ? aligned : plain;
    if constexpr (P == GridPadding::Zeros) return x;
    const A hi = n - 1, lo = x < A(0) ? A(0) : x;  // gs::clip, NaN to 0 (2-D)
    return x != x ? A(0) : (lo < hi ? lo : hi);
  }
}

template <typename T, GridPadding P>
void bilinear_block(const GridSampleArgs& a, int64_t n, int64_t o0, int64_t m, BilinearBlock<ew::opmath_t<T>>& k) {
  using A = ew::opmath_t<T>;
  const int64_t spatial = a.oh * a.ow;
  const T* grid = static_cast<const T*>(a.grid) + (n * spatial + o0) * 2;
  // Branch-free over the block (where and whether a point lies inside is data, and mispredicted branches on it
  // cost more than the arithmetic): gs::to_index's lower corner as a float, floor(s) when s is finite and within
  // +-2^40 (exact in A), else -100; the corners' inside tests on those floats (exact: the glue takes this path for
  // planes under 2^24 pixels a side).
  A coord[2][kBlock], fl[2][kBlock], w[2][2][kBlock];
  bool nan[kBlock];
  for (int64_t j = 0; j < kBlock; ++j) {
    coord[0][j] = j < m ? static_cast<A>(grid[2 * j]) : A(0);
    coord[1][j] = j < m ? static_cast<A>(grid[2 * j + 1]) : A(0);
    nan[j] = false;
  }
  for (int d = 0; d < 2; ++d) {
    const int64_t size = d == 0 ? a.iw : a.ih;
    for (int64_t j = 0; j < kBlock; ++j) {  // every value computed, then selected: nothing to speculate
      const A sd = block_source<P>(a, coord[d][j], size), fs = std::floor(sd);
      const bool valid = (sd == sd) & (sd > A(-1099511627776.0)) & (sd < A(1099511627776.0));
      const A f = valid ? fs : A(-100);
      nan[j] = nan[j] | ((P == GridPadding::Zeros) & !gs::finite(sd));
      fl[d][j] = f;
      w[d][0][j] = f + 1 - sd;
      w[d][1][j] = sd - f;
    }
  }
  const A iw = static_cast<A>(a.iw), ih = static_cast<A>(a.ih);
  const int32_t row = static_cast<int32_t>(a.iw);
  for (int64_t j = 0; j < kBlock; ++j) k.nan[j] = nan[j];
  for (int q = 0; q < 4; ++q) {
    const int dx = q & 1, dy = q >> 1;
    for (int64_t j = 0; j < kBlock; ++j) {
      const A x = fl[0][j] + A(dx), y = fl[1][j] + A(dy);
      const bool inside = (x >= A(0)) & (x < iw) & (y >= A(0)) & (y < ih) & (j < m);
      k.in[q][j] = inside;
      k.off[q][j] = static_cast<int32_t>(inside ? y : A(0)) * row + static_cast<int32_t>(inside ? x : A(0));
      k.w[q][j] = w[0][dx][j] * w[1][dy][j];
    }
  }
}

#if defined(MT_SIM_ISA_AVX2)
// The geometry of eight float32 locations [o, o + 8) of batch element n with zeros or border padding, in AVX2 (Note
// [Sim bilinear blocks]): each corner's offset, whether it lies inside, its weight and the weight's derivatives
// along x and y (gs::corners' f arguments), the sum's start (NaN for a coordinate that is not finite under zeros
// padding) and d source / d coord per axis (Point::g). Each operation is the scalar form's (block_source, the floor
// and -100, f + 1 - s and s - f, wx * wy, +-wy and +-wx), without contraction.
struct Geo8 {
  __m256i off[4];
  __m256 in[4], w[4], dwx[4], dwy[4], start, gsx, gsy;
};

template <GridPadding P>
Geo8 geo8(const GridSampleArgs& a, int64_t n, int64_t o) {
  const int64_t spatial = a.oh * a.ow;
  const float* grid = static_cast<const float*>(a.grid) + (n * spatial + o) * 2;
  const __m256 p0 = _mm256_loadu_ps(grid), p1 = _mm256_loadu_ps(grid + 8);  // x0 y0 x1 y1 ... x7 y7
  const auto pick = [](__m256 v) { return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8)); };
  const __m256 cx = pick(_mm256_shuffle_ps(p0, p1, 0x88)), cy = pick(_mm256_shuffle_ps(p0, p1, 0xDD));
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f), zero = _mm256_setzero_ps();
  Geo8 k;
  const auto source = [&](__m256 c, int64_t size, __m256* g) {  // gs::source and its derivative
    const __m256 sz = _mm256_set1_ps(static_cast<float>(size)), c1 = _mm256_add_ps(c, one);
    const __m256 hi = _mm256_sub_ps(sz, one);
    __m256 x = a.align_corners ? _mm256_mul_ps(_mm256_mul_ps(c1, half), hi)
                               : _mm256_mul_ps(_mm256_sub_ps(_mm256_mul_ps(c1, sz), one), half);
    *g = _mm256_set1_ps(static_cast<float>(a.align_corners ? size - 1 : size) / 2);
    if constexpr (P == GridPadding::Border) {  // gs::clip: the border counts as outside; NaN to 0 (max_ps's 0)
      const __m256 inner = _mm256_and_ps(_mm256_cmp_ps(x, zero, _CMP_GT_OQ), _mm256_cmp_ps(x, hi, _CMP_LT_OQ));
      *g = _mm256_mul_ps(*g, _mm256_and_ps(inner, one));
      x = _mm256_min_ps(_mm256_max_ps(x, zero), hi);
    }
    return x;
  };
  const __m256 sx = source(cx, a.iw, &k.gsx), sy = source(cy, a.ih, &k.gsy);
  const __m256 big = _mm256_set1_ps(1099511627776.0f), minus_big = _mm256_set1_ps(-1099511627776.0f);
  const auto lower = [&](__m256 s) {  // gs::to_index as a float: floor(s) if finite and within 2^40, else -100
    const __m256 valid = _mm256_and_ps(_mm256_cmp_ps(s, minus_big, _CMP_GT_OQ), _mm256_cmp_ps(s, big, _CMP_LT_OQ));
    return _mm256_blendv_ps(_mm256_set1_ps(-100.0f), _mm256_floor_ps(s), valid);
  };
  const __m256 fx = lower(sx), fy = lower(sy);
  const __m256 wx[2] = {_mm256_sub_ps(_mm256_add_ps(fx, one), sx), _mm256_sub_ps(sx, fx)};
  const __m256 wy[2] = {_mm256_sub_ps(_mm256_add_ps(fy, one), sy), _mm256_sub_ps(sy, fy)};
  const __m256 sign = _mm256_set1_ps(-0.0f);
  k.start = zero;
  if constexpr (P == GridPadding::Zeros) {  // a coordinate that is not finite samples NaN (Point::nan)
    const __m256 finite = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(sx, sx), zero, _CMP_EQ_OQ),
                                        _mm256_cmp_ps(_mm256_sub_ps(sy, sy), zero, _CMP_EQ_OQ));
    k.start = _mm256_blendv_ps(_mm256_set1_ps(NAN), zero, finite);
  }
  const __m256 iw = _mm256_set1_ps(static_cast<float>(a.iw)), ih = _mm256_set1_ps(static_cast<float>(a.ih));
  for (int q = 0; q < 4; ++q) {
    const int dx = q & 1, dy = q >> 1;
    const __m256 x = dx ? _mm256_add_ps(fx, one) : fx, y = dy ? _mm256_add_ps(fy, one) : fy;
    k.in[q] = _mm256_and_ps(_mm256_and_ps(_mm256_cmp_ps(x, zero, _CMP_GE_OQ), _mm256_cmp_ps(x, iw, _CMP_LT_OQ)),
                            _mm256_and_ps(_mm256_cmp_ps(y, zero, _CMP_GE_OQ), _mm256_cmp_ps(y, ih, _CMP_LT_OQ)));
    const __m256i xi = _mm256_cvttps_epi32(_mm256_and_ps(x, k.in[q]));
    const __m256i yi = _mm256_cvttps_epi32(_mm256_and_ps(y, k.in[q]));
    k.off[q] = _mm256_add_epi32(_mm256_mullo_epi32(yi, _mm256_set1_epi32(static_cast<int32_t>(a.iw))), xi);
    k.w[q] = _mm256_mul_ps(wx[dx], wy[dy]);
    k.dwx[q] = dx ? wy[dy] : _mm256_xor_ps(wy[dy], sign);  // (dx ? 1 : -1) * wy
    k.dwy[q] = dy ? wx[dx] : _mm256_xor_ps(wx[dx], sign);
  }
  return k;
}

// gs::forward_at for the eight locations of geo8: each corner a masked gather (a corner outside loads nothing and
// adds +0), the corners summed in gs::corners' order.
template <GridPadding P>
void forward_bilinear8(const GridSampleArgs& a, int64_t n, int64_t o) {
  const int64_t spatial = a.oh * a.ow, plane = a.ih * a.iw;
  const Geo8 k = geo8<P>(a, n, o);
  const __m256 zero = _mm256_setzero_ps();
  const float* in_n = static_cast<const float*>(a.input) + n * a.c * plane;
  float* out = static_cast<float*>(a.out) + n * a.c * spatial + o;
  for (int64_t c = 0; c < a.c; ++c) {
    const float* ip = in_n + c * plane;
    __m256 acc = k.start;
    for (int q = 0; q < 4; ++q)
      acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mask_i32gather_ps(zero, ip, k.off[q], k.in[q], 4), k.w[q]));
    _mm256_storeu_ps(out + c * spatial, acc);
  }
}

// gs::backward_at for the eight locations of geo8 and channels [c0, c1): the input gradient added location by
// location, corner by corner (the scalar form's order, so a task's sums do not change with the form), the grid
// gradient gathered across the channels in the vector and written when `grid`.
template <GridPadding P>
void backward_bilinear8(const GridSampleArgs& a, int64_t n, int64_t o, int64_t c0, int64_t c1, bool grid) {
  const int64_t spatial = a.oh * a.ow, plane = a.ih * a.iw;
  const Geo8 k = geo8<P>(a, n, o);
  const __m256 zero = _mm256_setzero_ps();
  const float* in_n = static_cast<const float*>(a.input) + n * a.c * plane;
  const float* go = static_cast<const float*>(a.grad_out) + n * a.c * spatial + o;
  float* gi = a.grad_input ? static_cast<float*>(a.grad_input) + n * a.c * plane : nullptr;
  __m256 gx = zero, gy = zero;
  alignas(32) int32_t off[4][8];
  alignas(32) float w[4][8], in[4][8];
  if (gi) {
    for (int q = 0; q < 4; ++q) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(off[q]), k.off[q]);
      _mm256_store_ps(w[q], k.w[q]);
      _mm256_store_ps(in[q], k.in[q]);
    }
  }
  for (int64_t c = c0; c < c1; ++c) {
    const __m256 g = _mm256_loadu_ps(go + c * spatial);
    if (gi) {
      alignas(32) float gv[8];
      _mm256_store_ps(gv, g);
      float* gp = gi + c * plane;
      for (int j = 0; j < 8; ++j)
        for (int q = 0; q < 4; ++q)
          if (in[q][j] != 0.0f) gp[off[q][j]] += w[q][j] * gv[j];  // in: all bits set (a NaN) or 0
    }
    if (grid) {
      const float* ip = in_n + c * plane;
      for (int q = 0; q < 4; ++q) {
        const __m256 v = _mm256_mul_ps(_mm256_mask_i32gather_ps(zero, ip, k.off[q], k.in[q], 4), g);
        gx = _mm256_add_ps(gx, _mm256_mul_ps(v, k.dwx[q]));
        gy = _mm256_add_ps(gy, _mm256_mul_ps(v, k.dwy[q]));
      }
    }
  }
  if (!grid) return;
  const __m256 nan = _mm256_cmp_ps(k.start, k.start, _CMP_UNORD_Q);
  gx = _mm256_blendv_ps(_mm256_mul_ps(k.gsx, gx), _mm256_set1_ps(NAN), nan);
  gy = _mm256_blendv_ps(_mm256_mul_ps(k.gsy, gy), _mm256_set1_ps(NAN), nan);
  float* gg = static_cast<float*>(a.grad_grid) + (n * spatial + o) * 2;
  const __m256 lo = _mm256_unpacklo_ps(gx, gy), hi = _mm256_unpackhi_ps(gx, gy);  // x0 y0 x1 y1 | x4 y4 x5 y5 ...
  _mm256_storeu_ps(gg, _mm256_permute2f128_ps(lo, hi, 0x20));
  _mm256_storeu_ps(gg + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}
#endif

// gs::forward_at for 2-D bilinear blocks [b, e) (Note [Sim bilinear blocks]): block g is locations
// [o0, o0 + kBlock) of batch element n = g / per_n, o0 = (g % per_n) kBlock, fewer at the element's end. Blocks do
// not depend on how the workers split them, so neither does the form (AVX2 or scalar) a location is computed in.
template <typename T, GridPadding P>
void forward_bilinear2d(const GridSampleArgs& a, int64_t b, int64_t e) {
  using A = ew::opmath_t<T>;
  const int64_t spatial = a.oh * a.ow, plane = a.ih * a.iw, per_n = (spatial + kBlock - 1) / kBlock;
  BilinearBlock<A> k;
  for (int64_t g = b; g < e; ++g) {
    const int64_t n = g / per_n, o0 = (g % per_n) * kBlock, m = std::min(kBlock, spatial - o0);
#if defined(MT_SIM_ISA_AVX2)
    if constexpr (std::is_same_v<T, float> && P != GridPadding::Reflection) {
      if (m == kBlock) {
        forward_bilinear8<P>(a, n, o0);
        continue;
      }
    }
#endif
    bilinear_block<T, P>(a, n, o0, m, k);
    const T* in = static_cast<const T*>(a.input) + n * a.c * plane;
    T* out = static_cast<T*>(a.out) + n * a.c * spatial + o0;
    for (int64_t c = 0; c < a.c; ++c) {
      const T* ip = in + c * plane;
      A acc[kBlock];
      for (int64_t j = 0; j < kBlock; ++j) acc[j] = k.nan[j] ? A(NAN) : A(0);
      for (int q = 0; q < 4; ++q) {  // a corner at a time: loops over the block that vectorise
        for (int64_t j = 0; j < kBlock; ++j) {
          const A v = static_cast<A>(ip[k.off[q][j]]);
          acc[j] += (k.in[q][j] ? v : A(0)) * k.w[q][j];
        }
      }
      T* op = out + c * spatial;
      for (int64_t j = 0; j < m; ++j) op[j] = static_cast<T>(acc[j]);
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

// Whether the 2-D bilinear blocks apply (Note [Sim bilinear blocks]; exact float corner tests, int32 offsets).
bool bilinear_blocks(const GridSampleArgs& a) {
  return a.dims == 2 && a.interp == GridInterp::Bilinear && a.ih < (int64_t(1) << 24) && a.iw < (int64_t(1) << 24) &&
         a.ih * a.iw < (int64_t(1) << 31);
}

// The backward of block [o0, o0 + m) of batch element n for channels [c0, c1): the AVX2 form for a whole float32
// block with zeros or border padding, else location by location.
template <typename T>
void backward_block(const GridSampleArgs& a, int64_t n, int64_t o0, int64_t m, int64_t c0, int64_t c1, bool grid) {
#if defined(MT_SIM_ISA_AVX2)
  if constexpr (std::is_same_v<T, float>) {
    if (m == kBlock && bilinear_blocks(a) && a.padding != GridPadding::Reflection) {
      if (a.padding == GridPadding::Zeros) return backward_bilinear8<GridPadding::Zeros>(a, n, o0, c0, c1, grid);
      return backward_bilinear8<GridPadding::Border>(a, n, o0, c0, c1, grid);
    }
  }
#endif
  const int64_t spatial = a.od * a.oh * a.ow;
  for (int64_t o = o0; o < o0 + m; ++o) backward_item<T>(a, n * spatial + o, c0, c1, grid);
}

} // namespace

MT_SIM_ENTRY rt::Status grid_sample(const GridSampleArgs& a, rt::Stream) {
  const int64_t spatial = a.od * a.oh * a.ow, locations = a.n * spatial;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    const int64_t per_location = workPerChannel(a) * std::max<int64_t>(a.c, 1) + 32;
    if (!a.backward) {
      if (bilinear_blocks(a)) {
        const int64_t blocks = a.n * ((spatial + kBlock - 1) / kBlock);
        par::parallel_for(blocks, par::grain_for(kBlock * per_location), [&](int64_t b, int64_t e) {
          switch (a.padding) {
            case GridPadding::Zeros: return forward_bilinear2d<T, GridPadding::Zeros>(a, b, e);
            case GridPadding::Border: return forward_bilinear2d<T, GridPadding::Border>(a, b, e);
            case GridPadding::Reflection: return forward_bilinear2d<T, GridPadding::Reflection>(a, b, e);
          }
        });
        return;
      }
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
      const int64_t per_n8 = (spatial + kBlock - 1) / kBlock;  // blocks per batch element, as the forward's
      par::parallel_for(a.n * per_n8, par::grain_for(kBlock * per_location), [&](int64_t b, int64_t e) {
        for (int64_t g = b; g < e; ++g) {
          const int64_t o0 = (g % per_n8) * kBlock;
          backward_block<T>(grid_only, g / per_n8, o0, std::min(kBlock, spatial - o0), 0, a.c, true);
        }
      });
    }
    if (!a.grad_input) return;
    par::parallel_for(a.n * blocks, par::grain_for(spatial * (workPerChannel(a) * block + 32)),
                      [&](int64_t b, int64_t e) {
                        for (int64_t task = b; task < e; ++task) {
                          const int64_t n = task / blocks, c0 = (task % blocks) * block;
                          const int64_t c1 = std::min(a.c, c0 + block);
                          for (int64_t o0 = 0; o0 < spatial; o0 += kBlock)
                            backward_block<T>(a, n, o0, std::min(kBlock, spatial - o0), c0, c1, fused);
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
