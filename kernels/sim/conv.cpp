// sim convolution (Note [Convolution family]): im2col / col2im in rows, and the sim's convolution passes as blocked
// im2col + GEMM (Note [Sim convolution]). Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "mytorch/conv.h"
#include "mytorch/ops_math.h"
#include "mytorch/parallel.h"
#include "mytorch/sim_blas.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// Note [Sim convolution]
// The sim answers the glue's convolution passes itself (the role cuDNN has on cuda), one image at a time, so the
// columns of an image ([C kd kh kw, OD OH OW] in the accumulation type, a few MB at most for the usual layers) stay in
// cache between im2col and the GEMM instead of a batch's columns going through memory:
// - forward: columns of image n, then y_n = W . cols per group (one GEMM, the CPU BLAS: Note [Sim GEMM]);
// - backward data: cols = W^T . dy_n per group, then col2im adds each column row into the image row it reads,
//   channel by channel (each channel's taps in a fixed order: deterministic);
// - backward filter: dW += dy_n . cols_n^T per group, images in order. The filter gradient is the longest sum in a
//   network (over every image and position); with float accumulation (A = float) it is summed in blocks of at most
//   kSumBlock positions, each block's GEMM into a float slot, the slots added into a double accumulator in block
//   order and rounded once at the end: the error is that of a kSumBlock-term sum, not of an n * positions-term one.
//   Measured on an AMD EPYC: conv3d's OpInfo sample with 'same' padding and dilation 3 (1320 positions, one image)
//   had an element of the weight's gradient 2.97x farther from float64 than the CPU's with one float32 GEMM per
//   image, 0.84-1.15x with the blocks; over 65,536 positions 2.5e-7 -> 5.1e-8 relative (test_conv_native.py). The
//   blocks' GEMMs span a tile of columns as wide as the whole-image ones' (kTileWork), several blocks at once over
//   the threads: the weight-gradient pass took 0.81-1.04x the time of one GEMM per image (conv2d 3x3 8x32x56x56 and
//   8x64x28x28, conv1d k5 16x64x1024, 1x1 and bfloat16 convolutions; 15 interleaved rounds, one process).
// im2col and col2im work in rows of output positions: a row of a stride-1 convolution is one copy of consecutive
// input elements with zeros at the padded edges. The forward and backward-data GEMMs run on the BLAS's threads, the
// row loops on ours. The filter gradient's GEMM sums over an image's positions, which MKL split between its threads at
// 4 threads (not at 1 or 2): it is cut into tiles of weight columns of at least kTileWork multiply-adds, fixed by the
// sizes, the tiles split over our threads, each a GEMM on its thread (Note [Block GEMMs on the calling thread]), so
// the weight gradient does not depend on the thread count.

// Geometry of one row (c, q, i, j) of the columns (q the depth tap): where output row (z, y) reads.
struct Tap { int64_t c, q, i, j; };

// The input row (depth, height) that output row zy = z * oh + y of tap t reads; false in the padding.
inline bool input_row(const Im2ColArgs& a, const Tap& t, int64_t zy, int64_t* d, int64_t* h) {
  *d = (zy / a.oh) * a.sd - a.pd + t.q * a.dd;
  *h = (zy % a.oh) * a.sh - a.ph + t.i * a.dh;
  return *d >= 0 && *d < a.id && *h >= 0 && *h < a.ih;
}

inline Tap tap_of(const Im2ColArgs& a, int64_t c, int64_t t) {
  return Tap{c, t / (int64_t(a.kh) * a.kw), (t / a.kw) % a.kh, t % a.kw};
}

// Row `zy` of tap (c, q, i, j) of image x into out[0, ow): zeros where the window is in the padding.
template <typename T, typename A>
void im2col_row(const Im2ColArgs& a, const T* x, const Tap& t, int64_t zy, A* out) {
  int64_t d, h;
  if (!input_row(a, t, zy, &d, &h)) {
    std::fill(out, out + a.ow, A(0));
    return;
  }
  const T* row = x + ((t.c * a.id + d) * a.ih + h) * a.iw;
  const int64_t w0 = t.j * a.dw - a.pw;  // input column of output 0
  if (a.sw == 1) {
    const int64_t lo = std::clamp<int64_t>(-w0, 0, a.ow), hi = std::clamp<int64_t>(a.iw - w0, lo, a.ow);
    // (plain loops: a row is tens of elements, a memcpy call per row cost more than the copy)
    for (int64_t x0 = 0; x0 < lo; ++x0) out[x0] = A(0);
    for (int64_t x0 = lo; x0 < hi; ++x0) out[x0] = static_cast<A>(row[w0 + x0]);
    for (int64_t x0 = hi; x0 < a.ow; ++x0) out[x0] = A(0);
    return;
  }
  for (int64_t x0 = 0; x0 < a.ow; ++x0) {
    const int64_t w = w0 + x0 * a.sw;
    out[x0] = (w >= 0 && w < a.iw) ? static_cast<A>(row[w]) : A(0);
  }
}

// cols[c kd kh kw, od oh ow] of image x.
template <typename T, typename A>
void im2col_image(const Im2ColArgs& a, const T* x, A* cols) {
  const int64_t k = a.taps(), l = a.positions(), rows = a.od * a.oh;
  par::parallel_for(a.c * k * rows, par::grain_for(a.ow), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t zy = r % rows, row = r / rows;
      im2col_row<T, A>(a, x, tap_of(a, row / k, row % k), zy, cols + row * l + zy * a.ow);
    }
  });
}

// image x[c, id, ih, iw] := the sum of the column entries that read each element (col2im), channels in
// parallel; within a channel the taps add in order.
template <typename T, typename A>
void col2im_image(const Im2ColArgs& a, const A* cols, T* x) {
  const int64_t k = a.taps(), l = a.positions(), plane = a.id * a.ih * a.iw, rows = a.od * a.oh;
  par::parallel_for(a.c, par::grain_for(k * l), [&](int64_t cb, int64_t ce) {
    std::vector<A> acc(static_cast<size_t>(plane));
    for (int64_t c = cb; c < ce; ++c) {
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t t = 0; t < k; ++t) {
        const Tap tap = tap_of(a, 0, t);
        const int64_t j = tap.j;
        const A* src = cols + (c * k + t) * l;
        for (int64_t zy = 0; zy < rows; ++zy) {
          int64_t d, h;
          if (!input_row(a, tap, zy, &d, &h)) continue;
          A* dst = acc.data() + (d * a.ih + h) * a.iw;
          const int64_t w0 = j * a.dw - a.pw;
          const A* s = src + zy * a.ow;
          if (a.sw == 1) {
            const int64_t lo = std::clamp<int64_t>(-w0, 0, a.ow), hi = std::clamp<int64_t>(a.iw - w0, lo, a.ow);
            for (int64_t x0 = lo; x0 < hi; ++x0) dst[w0 + x0] += s[x0];
          } else {
            for (int64_t x0 = 0; x0 < a.ow; ++x0) {
              const int64_t w = w0 + x0 * a.sw;
              if (w >= 0 && w < a.iw) dst[w] += s[x0];
            }
          }
        }
      }
      vec::from_opmath(acc.data(), x + c * plane, plane);
    }
  });
}

// Positions per block of the filter gradient's sum (Note [Sim convolution]).
constexpr int64_t kSumBlock = 128;
// Blocks whose partial sums are computed at once (each into its own slot of cout x kg floats), as many as fit in
// kSumScratch floats, at most kSumRound.
constexpr int64_t kSumScratch = int64_t(1) << 20, kSumRound = 8;

template <typename A>
bool blocked_filter_sum(const ConvArgs& c) {
  return c.pass == ConvPass::BackwardFilter && std::is_same_v<A, float>;
}

inline int64_t sum_round(const ConvArgs& c) {
  const int64_t w = std::max<int64_t>(c.cout * (c.geom.c / c.groups) * c.geom.taps(), 1);
  return std::clamp<int64_t>(kSumScratch / w, 1, kSumRound);
}

// The workspace of a pass, in accumulation-type elements: the columns of one image, the weight and one image's
// output (or its gradient) in the accumulation type when T is narrower.
template <typename T, typename A>
int64_t workspace_elems(const ConvArgs& c) {
  const Im2ColArgs& a = c.geom;
  const int64_t cols = a.c * a.taps() * a.positions();
  const int64_t w = c.cout * (a.c / c.groups) * a.taps();
  const int64_t img = std::max(c.cout * a.positions(), a.image());
  // the filter gradient's float scratch and double accumulator (Note [Sim convolution]), after an alignment pad
  const int64_t blocked = blocked_filter_sum<A>(c) ? sum_round(c) * w + 1 + 2 * w : 0;
  return cols + (std::is_same_v<T, A> ? 0 : w + img) + blocked;
}

// A tile's multiply-adds: at least kTileWork (the library's per-call set-up amortised), in widths of 32 columns.
constexpr int64_t kTileWork = int64_t(1) << 21;

// The width of a tile of `extent` columns whose GEMMs do `work` multiply-adds per column.
inline int64_t tile_width(int64_t extent, int64_t work) {
  const int64_t want = (kTileWork + work - 1) / std::max<int64_t>(work, 1);
  return std::min(extent, std::max<int64_t>(32, (want + 31) / 32 * 32));
}

// f(group, first, width) for the tiles of `extent` columns of each group, over the threads; work: multiply-adds per
// column. The tiles depend on the sizes only.
template <typename F>
void gemm_tiles(int64_t groups, int64_t extent, int64_t work, const F& f) {
  const int64_t width = tile_width(extent, work);
  const int64_t nt = (extent + width - 1) / width;
  par::parallel_for(groups * nt, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t c0 = (t % nt) * width;
      f(t / nt, c0, std::min(width, extent - c0));
    }
  });
}

// dacc[g][cg, kg] += dy[g][cg, l] . cols[g][kg, l]^T in blocks of kSumBlock positions (Note [Sim convolution]):
// `round` blocks at a time, their tiles' GEMMs over the threads, each block's partial sums into its slot of `part`
// (dacc's layout), then added into dacc in block order. The blocks and tiles depend on the sizes only.
template <typename A>
void filter_sum_blocked(int64_t g, int64_t cg, int64_t kg, int64_t l, int64_t round, const A* dy, const A* cols,
                        A* part, double* dacc) {
  // blocks of at most kSumBlock positions, of equal length but the last
  const int64_t nb = (l + kSumBlock - 1) / kSumBlock, bs = (l + nb - 1) / nb, slot = g * cg * kg;
  const int64_t width = tile_width(kg, cg * bs);
  const int64_t nt = (kg + width - 1) / width;
  for (int64_t b0 = 0; b0 < nb; b0 += round) {
    const int64_t rb = std::min(round, nb - b0);
    par::parallel_for(rb * g * nt, 1, [&](int64_t s, int64_t e) {
      for (int64_t t = s; t < e; ++t) {
        const int64_t q = t / (g * nt), gi = (t / nt) % g, c0 = (t % nt) * width, w = std::min(width, kg - c0);
        const int64_t p0 = (b0 + q) * bs, pb = std::min(bs, l - p0);
        blas::gemm<A>(false, true, cg, w, pb, A(1), dy + gi * cg * l + p0, l, cols + (gi * kg + c0) * l + p0, l, A(0),
                      part + q * slot + gi * cg * kg + c0, kg, blas::Threads::Calling);
      }
    });
    par::parallel_for(slot, par::grain_for(rb), [&](int64_t s, int64_t e) {
      for (int64_t q = 0; q < rb; ++q) {
        const A* src = part + q * slot;
        for (int64_t i = s; i < e; ++i) dacc[i] += static_cast<double>(src[i]);
      }
    });
  }
}

template <typename T, typename A>
void run_pass(const ConvArgs& c) {
  const Im2ColArgs& a = c.geom;
  const int64_t g = c.groups, cg = c.cout / g, kg = (a.c / g) * a.taps(), l = a.positions();
  const int64_t in_img = a.image(), out_img = c.cout * l;
  A* cols = static_cast<A*>(c.workspace);
  A* wbuf = cols + a.c * a.taps() * l;
  A* ibuf = wbuf + c.cout * kg;  // one image (output, its gradient, or the input's gradient) in A
  // The weight (or its gradient) in A.
  const A* W = nullptr;
  if (c.pass != ConvPass::BackwardFilter) {
    W = vec::as_opmath(static_cast<const T*>(c.w), wbuf, c.cout * kg);
  }
  A* dW = nullptr;
  A* part = nullptr;      // the blocked filter sum's float scratch, dW's layout
  double* dacc = nullptr; // and its double accumulator (Note [Sim convolution])
  if (c.pass == ConvPass::BackwardFilter) {
    dW = std::is_same_v<T, A> ? reinterpret_cast<A*>(c.out) : wbuf;
    if (!blocked_filter_sum<A>(c)) {
      std::fill(dW, dW + c.cout * kg, A(0));  // the GEMMs below add into it (the blocked sum writes it at the end)
    } else {
      part = wbuf + (std::is_same_v<T, A> ? 0 : c.cout * kg + std::max(out_img, in_img));  // (workspace_elems)
      void* p = part + sum_round(c) * c.cout * kg;
      size_t room = (2 * c.cout * kg + 1) * sizeof(A);
      dacc = static_cast<double*>(std::align(alignof(double), c.cout * kg * sizeof(double), p, room));
      std::fill(dacc, dacc + c.cout * kg, 0.0);
    }
  }
  for (int64_t n = 0; n < a.n; ++n) {
    switch (c.pass) {
      case ConvPass::Forward: {
        im2col_image<T, A>(a, static_cast<const T*>(c.x) + n * in_img, cols);
        T* y = static_cast<T*>(c.out) + n * out_img;
        A* yo = std::is_same_v<T, A> ? reinterpret_cast<A*>(y) : ibuf;
        for (int64_t gi = 0; gi < g; ++gi)
          blas::gemm<A>(false, false, cg, l, kg, A(1), W + gi * cg * kg, kg, cols + gi * kg * l, l, A(0),
                        yo + gi * cg * l, l);
        if constexpr (!std::is_same_v<T, A>) vec::from_opmath(yo, y, out_img);
        break;
      }
      case ConvPass::BackwardData: {
        const A* dy = vec::as_opmath(static_cast<const T*>(c.dy) + n * out_img, ibuf, out_img);
        for (int64_t gi = 0; gi < g; ++gi)
          blas::gemm<A>(true, false, kg, l, cg, A(1), W + gi * cg * kg, kg, dy + gi * cg * l, l, A(0),
                        cols + gi * kg * l, l);
        col2im_image<T, A>(a, cols, static_cast<T*>(c.out) + n * in_img);
        break;
      }
      case ConvPass::BackwardFilter: {
        im2col_image<T, A>(a, static_cast<const T*>(c.x) + n * in_img, cols);
        const A* dy = vec::as_opmath(static_cast<const T*>(c.dy) + n * out_img, ibuf, out_img);
        if (dacc) {
          filter_sum_blocked<A>(g, cg, kg, l, sum_round(c), dy, cols, part, dacc);
          break;
        }
        gemm_tiles(g, kg, cg * l, [&](int64_t gi, int64_t c0, int64_t w) {
          blas::gemm<A>(false, true, cg, w, l, A(1), dy + gi * cg * l, l, cols + (gi * kg + c0) * l, l, A(1),
                        dW + gi * cg * kg + c0, kg, blas::Threads::Calling);
        });
        break;
      }
    }
  }
  if (dacc) {
    for (int64_t i = 0; i < c.cout * kg; ++i) dW[i] = static_cast<A>(dacc[i]);
  }
  if constexpr (!std::is_same_v<T, A>) {
    if (c.pass == ConvPass::BackwardFilter) vec::from_opmath(dW, static_cast<T*>(c.out), c.cout * kg);
  }
}

template <typename T>
using conv_acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

} // namespace

// Every dtype: integer convolutions and unfold/fold of bool and complex use them too.
MT_SIM_ENTRY rt::Status im2col(const Im2ColArgs& a, rt::Stream) {
  const bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = conv::col2im_acc_t<T>;
    const int64_t k = a.taps(), l = a.positions();
    for (int64_t n = 0; n < a.n; ++n) {
      if (a.col2im) {
        std::vector<A> cols(static_cast<size_t>(a.c * k * l));
        vec::to_opmath(static_cast<const T*>(a.in) + n * a.c * k * l, cols.data(), a.c * k * l);
        col2im_image<T, A>(a, cols.data(), static_cast<T*>(a.out) + n * a.image());
      } else {
        im2col_image<T, T>(a, static_cast<const T*>(a.in) + n * a.image(), static_cast<T*>(a.out) + n * a.c * k * l);
      }
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "im2col: unsupported dtype");
}

// The sim's convolution passes (Note [Sim convolution]); with workspace_bytes set, only the workspace it needs.
MT_SIM_ENTRY rt::Status convolution(const ConvArgs& c, size_t* workspace_bytes, rt::Stream) {
  bool ok = dispatch_floating(c.geom.dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = conv_acc_t<T>;
    if (workspace_bytes) *workspace_bytes = static_cast<size_t>(workspace_elems<T, A>(c)) * sizeof(A);
    else if (c.geom.n > 0) run_pass<T, A>(c);
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "convolution: expected a floating dtype");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, im2col, (const Im2ColArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, convolution, (const ConvArgs& c, size_t* w, rt::Stream s), (c, w, s))
} // namespace mytorch::sim
#endif
