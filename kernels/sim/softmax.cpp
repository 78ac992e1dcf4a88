// sim softmax (Note [Softmax family]): lines in parallel; a contiguous line (inner == 1) through the row loops of
// Note [Sim row loops], lines along an outer dimension a block of adjacent lines at a time, so that every loop
// runs over consecutive elements. Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"
#include "mytorch/sim_vmath.h"
#include "mytorch/softmax.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// A short contiguous line (up to vec::kShort elements): the reference line function's order (smx::forward_line,
// smx::backward_line), with the C library's scalar exp. The CPU runs such rows in scalar loops, and this gives its
// bits; the vector path's lanes and libmvec would round differently, where a log-softmax gradient cancels.
template <typename A>
void forward_short(const SoftmaxArgs& s, const A* x, A* y, int64_t n) {
  A mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = (x[j] != x[j] || x[j] > mx) ? x[j] : mx;
  A sum = 0;
  if (!s.log) {  // each exp once: kept in y, then divided
    for (int64_t j = 0; j < n; ++j) sum += (y[j] = vec::scalar_exp(x[j] - mx));
    for (int64_t j = 0; j < n; ++j) y[j] = y[j] / sum;
    return;
  }
  for (int64_t j = 0; j < n; ++j) sum += vec::scalar_exp(x[j] - mx);
  const A lse = std::log(sum);
  for (int64_t j = 0; j < n; ++j) y[j] = (x[j] - mx) - lse;
}

// R consecutive short rows of the backward (row r at r * n): each row's sum in its own accumulator, added in the
// row's order, so every row gets the one-row loop's bits (whatever R: the thread count, which sets the chunks,
// never changes a result); the R dependent chains of additions overlap (one row at a
// time, a chain of n dependent adds per row ran rows of 60 floats at 0.2x the CPU's vectorised loop).
template <int R, typename A>
void backward_short(const SoftmaxArgs& s, const A* g, const A* y, A* gi, int64_t n) {
  A sum[R] = {};
  if (s.log) {
    for (int64_t j = 0; j < n; ++j)
      for (int r = 0; r < R; ++r) sum[r] += g[r * n + j];
    for (int r = 0; r < R; ++r)
      for (int64_t j = 0; j < n; ++j) gi[r * n + j] = g[r * n + j] - vec::scalar_exp(y[r * n + j]) * sum[r];
    return;
  }
  for (int64_t j = 0; j < n; ++j)  // fma written out: a contraction GCC may make in one form and not the other
    for (int r = 0; r < R; ++r) sum[r] = std::fma(g[r * n + j], y[r * n + j], sum[r]);
  for (int r = 0; r < R; ++r)
    for (int64_t j = 0; j < n; ++j) gi[r * n + j] = y[r * n + j] * (g[r * n + j] - sum[r]);
}
constexpr int kShortRows = 8;  // rows per backward_short<kShortRows> call
// The backward's rows longer than this take the row loops (lanes, libmvec's exp): the CPU's backward is its
// vectorised map2_reduce_all at every length, so sequential sums gave its bits at no length above a vector's
// width, and rows of 60 floats ran at 0.2x (0.45x in kShortRows chains). The alignment samples' rows (5, 10) stay.
constexpr int64_t kShortBackward = 16;

// One contiguous line of n elements; buf: room for 2n opmath values. Rows already in opmath are read and written
// in place.
template <typename I, typename O, typename A>
void forward_row(const SoftmaxArgs& s, const I* x, O* y, int64_t n, A* buf) {
  const A* v = buf;
  if constexpr (std::is_same_v<I, A>) v = x;
  else vec::to_opmath(x, buf, n);
  A* e = buf + n;
  if constexpr (std::is_same_v<O, A>) e = y;
  const A mx = vec::max_nan(v, n);
  if (s.log) {
    vec::exp_shifted(v, mx, e, n);
    const A shift = mx + std::log(vec::sum(e, n));
    for (int64_t j = 0; j < n; ++j) e[j] = v[j] - shift;
  } else {
    vec::exp_shifted(v, mx, e, n);
    const A inv = A(1) / vec::sum(e, n);
    for (int64_t j = 0; j < n; ++j) e[j] *= inv;
  }
  if constexpr (!std::is_same_v<O, A>) vec::from_opmath(e, y, n);
}

template <typename G, typename O, typename A>
void backward_row(const SoftmaxArgs& s, const G* g, const G* y, O* gi, int64_t n, A* buf) {
  const A* gv = buf;
  const A* yv = buf + n;
  if constexpr (std::is_same_v<G, A>) gv = g, yv = y;
  else vec::to_opmath(g, buf, n), vec::to_opmath(y, buf + n, n);
  A* r = buf;
  if constexpr (std::is_same_v<O, A>) r = gi;
  if (s.log) {
    const A sum = vec::lanes_sum_of<A>(n, [gv](int64_t i) { return gv[i]; });
    for (int64_t j = 0; j < n; ++j) r[j] = gv[j] - std::exp(yv[j]) * sum;
  } else {
    const A sum = vec::lanes_sum_of<A>(n, [gv, yv](int64_t i) { return gv[i] * yv[i]; });
    for (int64_t j = 0; j < n; ++j) r[j] = yv[j] * (gv[j] - sum);
  }
  if constexpr (!std::is_same_v<O, A>) vec::from_opmath(r, gi, n);
}

constexpr int64_t kCols = 64;  // adjacent lines per block when the softmax runs along an outer dimension

// Lines (o, i0 .. i0 + nb) of an [outer, dim, inner] tensor, inner > 1: the line function of Note [Softmax
// family] with its loops over j outermost, so each step reads nb consecutive elements.
template <typename I, typename O, typename A>
void forward_cols(const SoftmaxArgs& s, int64_t o, int64_t i0, int64_t nb) {
  const I* x = static_cast<const I*>(s.in) + o * s.dim * s.inner + i0;
  O* y = static_cast<O*>(s.out) + o * s.dim * s.inner + i0;
  A mx[kCols], sum[kCols], v[kCols];
  for (int64_t c = 0; c < nb; ++c) mx[c] = -INFINITY, sum[c] = 0;
  for (int64_t j = 0; j < s.dim; ++j) {
    vec::to_opmath(x + j * s.inner, v, nb);
    for (int64_t c = 0; c < nb; ++c) mx[c] = (v[c] != v[c] || v[c] > mx[c]) ? v[c] : mx[c];
  }
  for (int64_t j = 0; j < s.dim; ++j) {
    vec::to_opmath(x + j * s.inner, v, nb);
    for (int64_t c = 0; c < nb; ++c) sum[c] += std::exp(v[c] - mx[c]);
  }
  for (int64_t c = 0; c < nb; ++c) sum[c] = s.log ? mx[c] + std::log(sum[c]) : A(1) / sum[c];
  for (int64_t j = 0; j < s.dim; ++j) {
    vec::to_opmath(x + j * s.inner, v, nb);
    for (int64_t c = 0; c < nb; ++c) v[c] = s.log ? v[c] - sum[c] : std::exp(v[c] - mx[c]) * sum[c];
    vec::from_opmath(v, y + j * s.inner, nb);
  }
}

template <typename G, typename O, typename A>
void backward_cols(const SoftmaxArgs& s, int64_t o, int64_t i0, int64_t nb) {
  const int64_t base = o * s.dim * s.inner + i0;
  const G* g = static_cast<const G*>(s.in) + base;
  const G* y = static_cast<const G*>(s.out_saved) + base;
  O* gi = static_cast<O*>(s.out) + base;
  A sum[kCols], gv[kCols], yv[kCols];
  for (int64_t c = 0; c < nb; ++c) sum[c] = 0;
  for (int64_t j = 0; j < s.dim; ++j) {
    vec::to_opmath(g + j * s.inner, gv, nb);
    vec::to_opmath(y + j * s.inner, yv, nb);
    for (int64_t c = 0; c < nb; ++c) sum[c] += s.log ? gv[c] : gv[c] * yv[c];
  }
  for (int64_t j = 0; j < s.dim; ++j) {
    vec::to_opmath(g + j * s.inner, gv, nb);
    vec::to_opmath(y + j * s.inner, yv, nb);
    for (int64_t c = 0; c < nb; ++c) gv[c] = s.log ? gv[c] - std::exp(yv[c]) * sum[c] : yv[c] * (gv[c] - sum[c]);
    vec::from_opmath(gv, gi + j * s.inner, nb);
  }
}

template <typename I, typename O>
void run(const SoftmaxArgs& s) {
  using A = ew::opmath_t<I>;
  if (s.inner == 1) {
    // the backward's short rows go kShortRows at a time: room for that many rows only there
    const int64_t group = s.backward && s.dim <= kShortBackward ? kShortRows : 1;
    par::parallel_for(s.outer, par::grain_for(4 * s.dim), [&](int64_t b, int64_t e) {
      std::vector<A> buf(static_cast<size_t>(3 * group * s.dim));
      for (int64_t l = b; l < e;) {
        const int64_t off = l * s.dim;
        if (s.dim <= (s.backward ? kShortBackward : vec::kShort)) {
          // a group of rows where this chunk has as many left, else one
          const int64_t rows = e - l >= group ? group : 1, len = rows * s.dim;
          const I* x = static_cast<const I*>(s.in) + off;
          const I* y = static_cast<const I*>(s.out_saved) + off;
          O* out = static_cast<O*>(s.out) + off;
          // half types: the rows converted once with the vector conversions (c10's bits), the same scalar loops on
          // opmath values, converted back (one scalar conversion per element each way was 2 ns an element)
          auto opmath = [&](const I* p, A* room) -> const A* {
            if constexpr (std::is_same_v<I, A>) return p;
            else return vec::to_opmath(p, room, len), room;
          };
          const A* xa = opmath(x, buf.data());
          const A* ya = s.backward ? opmath(y, buf.data() + len) : nullptr;
          A* ra = buf.data() + 2 * len;
          if constexpr (std::is_same_v<O, A>) ra = out;
          if (rows == kShortRows) backward_short<kShortRows, A>(s, xa, ya, ra, s.dim);
          else if (s.backward) backward_short<1, A>(s, xa, ya, ra, s.dim);
          else forward_short<A>(s, xa, ra, s.dim);
          if constexpr (!std::is_same_v<O, A>) vec::from_opmath(ra, out, len);
          l += rows;
          continue;
        }
        if (s.backward)
          backward_row<I, O, A>(s, static_cast<const I*>(s.in) + off, static_cast<const I*>(s.out_saved) + off,
                                static_cast<O*>(s.out) + off, s.dim, buf.data());
        else
          forward_row<I, O, A>(s, static_cast<const I*>(s.in) + off, static_cast<O*>(s.out) + off, s.dim, buf.data());
        ++l;
      }
    });
    return;
  }
  const int64_t blocks = (s.inner + kCols - 1) / kCols;
  par::parallel_for(s.outer * blocks, par::grain_for(4 * s.dim * std::min(s.inner, kCols)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / blocks, i0 = (t % blocks) * kCols, nb = std::min(kCols, s.inner - i0);
      if (s.backward) backward_cols<I, O, A>(s, o, i0, nb);
      else forward_cols<I, O, A>(s, o, i0, nb);
    }
  });
}

} // namespace

MT_SIM_ENTRY rt::Status softmax(const SoftmaxArgs& s, rt::Stream) {
  if (s.outer * s.inner == 0 || s.dim == 0) return rt::Status::Success;
  bool ok = false;
  dispatch_floating(s.in_dtype, [&](auto in_tag) {
    using I = decltype(in_tag);
    ok = dispatch_floating(s.out_dtype, [&](auto out_tag) { run<I, decltype(out_tag)>(s); });
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "softmax: expected floating dtypes");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, softmax, (const SoftmaxArgs& s, rt::Stream st), (s, st))
} // namespace mytorch::sim
#endif
