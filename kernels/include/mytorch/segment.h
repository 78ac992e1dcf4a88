// Segment reductions: torch.segment_reduce's forward and its backward (_segment_reduce_backward) over data viewed as
// (outer, length, inner), the segments given by lengths or offsets along the middle axis (Note [Segment reduce]).
//
// Note [Segment reduce]
// ATen's CPU kernel, element for element (aten/src/ATen/native/SegmentReduce.cpp): a segment's value starts at
// `initial` (rounded to the data's dtype) or the reduction's identity and takes its positions in order: sum and mean
// add, prod multiplies, max/min keep a NaN once seen (v != v ? v : max(acc, v)); a mean divides by the segment's
// length, an empty one holds `initial` or NaN. Half and bfloat16 are computed in float and rounded once (the CPU
// accumulates in the input dtype; the shared rule's tolerance covers the difference). The backward gives each
// position of a segment: sum, the segment's gradient g; mean, g / length; max/min, g where the position is NaN or
// equal to the output and 0 elsewhere, a positive g shared among the n >= 2 tied positions (g / n, as ATen's
// kernels divide only those); prod, round(g * output) / x, and at a zero or NaN x the product of the others:
// `initial` times the segment's other finite non-zero values in order, NaN if another position is NaN, else 0 if
// another is zero. Positions in no segment get 0.
// Each row's segment boundaries b[0..count] (offsets as given; lengths as 0 and their running sums) are taken with
// a running maximum and read within [0, length), so every position belongs to at most one segment and no read or
// write leaves the row: valid lengths and offsets (non-decreasing, within the axis) are unchanged by this; under
// unsafe=True, where ATen's CPU kernel reads past the data for an offset out of range and refuses a negative
// length only in the forward, a decreasing boundary makes its segment empty. A mean divides by b[s + 1] - b[s].
// The boundaries are written into a workspace by a first pass (a row each), so that both passes read them once.
// The sim splits segments (and blocks of the inner dimension) over threads, each segment's positions in order: the
// result does not depend on the thread count, and float32/float64 results are the CPU's bits. cuda/ gives each
// (segment, inner element) a thread.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"

namespace mytorch {

enum class SegmentOp : int { Sum, Mean, Max, Min, Prod };

struct SegmentArgs {
  DType dtype = DType::Float;         // the data's: Half, BFloat16, Float or Double
  SegmentOp op = SegmentOp::Sum;
  const void* data = nullptr;         // contiguous (outer, length, inner)
  int64_t outer = 1, length = 0, inner = 1, count = 0;
  const void* bounds_in = nullptr;    // contiguous (outer, count) lengths or (outer, count + 1) offsets
  DType bounds_dtype = DType::Int64;  // Int32 or Int64
  bool offsets = false;
  int64_t* bounds = nullptr;          // workspace (outer, count + 1): each row's boundaries (Note [Segment reduce])
  bool has_initial = false;
  double initial = 0;                 // already rounded to the data's dtype
  void* out = nullptr; // forward: (outer, count, inner); backward: the data's gradient (outer, length, inner)
  const void* grad = nullptr; // backward: the output's gradient, contiguous (outer, count, inner)
  const void* output = nullptr; // backward: the forward's output, contiguous (outer, count, inner)
};

namespace seg {

template <typename I>
MT_HOST_DEVICE inline void row_bounds_as(const SegmentArgs& a, int64_t o) {
  const I* in = static_cast<const I*>(a.bounds_in);
  int64_t* b = a.bounds + o * (a.count + 1);
  // in uint64 so that lengths that overflow (unsafe=True) wrap instead of being undefined
  uint64_t run = 0;
  int64_t top = 0;
  for (int64_t s = 0; s <= a.count; ++s) {
    int64_t v;
    if (a.offsets) {
      v = static_cast<int64_t>(in[o * (a.count + 1) + s]);
    } else {
      if (s > 0) run += static_cast<uint64_t>(static_cast<int64_t>(in[o * a.count + s - 1]));
      v = static_cast<int64_t>(run);
    }
    top = (s == 0 || v > top) ? v : top;
    b[s] = top;
  }
}

// The launchers' one check of the bounds' dtype (the CPU's: int32 or int64), made before any pass runs.
inline bool bounds_dtype_ok(const SegmentArgs& a) {
  return a.bounds_dtype == DType::Int32 || a.bounds_dtype == DType::Int64;
}

// Row o's boundaries into the workspace (the bounds' dtype checked by bounds_dtype_ok).
MT_HOST_DEVICE inline void row_bounds(const SegmentArgs& a, int64_t o) {
  if (a.bounds_dtype == DType::Int64) row_bounds_as<int64_t>(a, o);
  else row_bounds_as<int32_t>(a, o);
}

MT_HOST_DEVICE inline int64_t clamp_pos(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Segment s of row o: its positions [lo, hi) and its length n (for the mean).
struct Span { int64_t lo, hi, n; };
MT_HOST_DEVICE inline Span span(const SegmentArgs& a, int64_t o, int64_t s) {
  const int64_t* b = a.bounds + o * (a.count + 1);
  const int64_t lo = clamp_pos(b[s], 0, a.length);
  return {lo, clamp_pos(b[s + 1], lo, a.length), b[s + 1] - b[s]};
}

template <SegmentOp op, typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A start(const SegmentArgs& a) {
  if (a.has_initial) return static_cast<A>(a.initial);
  if constexpr (op == SegmentOp::Max) return -static_cast<A>(INFINITY);
  else if constexpr (op == SegmentOp::Min) return static_cast<A>(INFINITY);
  else if constexpr (op == SegmentOp::Prod) return A(1);
  else return A(0);
}

template <SegmentOp op, typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A step(A acc, A v) {
  if constexpr (op == SegmentOp::Max) return v != v ? v : (acc < v ? v : acc);
  else if constexpr (op == SegmentOp::Min) return v != v ? v : (v < acc ? v : acc);
  else if constexpr (op == SegmentOp::Prod) return acc * v;
  else return acc + v;
}

template <SegmentOp op, typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A finish(const SegmentArgs& a, A acc, int64_t n) {
  if constexpr (op == SegmentOp::Mean) {
    if (n > 0) return acc / static_cast<A>(n);
    return a.has_initial ? acc : static_cast<A>(NAN);
  }
  return acc;
}

template <typename A>
MT_HOST_DEVICE MT_FORCE_INLINE bool special(A x) { // a product's position whose gradient is not output / x
  return x != x || x == A(0);
}

// A max/min position's gradient: g where it is hit, shared among `ties` >= 2 hits when positive.
template <typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A extreme_grad(bool hit, A g, A ties) {
  if (!hit) return A(0);
  return (ties >= A(2) && g > A(0)) ? g / ties : g;
}

// A product's position gradient. go: g * output rounded to the data's dtype; others: `initial` times the segment's
// finite non-zero values; nans, zeros: the segment's NaN and zero positions (this one included).
template <typename A>
MT_HOST_DEVICE MT_FORCE_INLINE A prod_grad(A x, A g, A go, A others, int64_t nans, int64_t zeros) {
  if (!special(x)) return go / x;
  const bool nan = x != x;
  const A rest = nans - (nan ? 1 : 0) > 0 ? static_cast<A>(NAN) : (zeros - (nan ? 0 : 1) > 0 ? A(0) : A(1));
  return g * (others * rest);
}

// Calls f(tag) with the SegmentOp as a compile-time value (tag::value).
template <SegmentOp op>
struct SegmentOpTag {
  static constexpr SegmentOp value = op;
};
template <typename F>
inline bool dispatch_segment_op(SegmentOp op, const F& f) {
  switch (op) {
    case SegmentOp::Sum: f(SegmentOpTag<SegmentOp::Sum>{}); return true;
    case SegmentOp::Mean: f(SegmentOpTag<SegmentOp::Mean>{}); return true;
    case SegmentOp::Max: f(SegmentOpTag<SegmentOp::Max>{}); return true;
    case SegmentOp::Min: f(SegmentOpTag<SegmentOp::Min>{}); return true;
    case SegmentOp::Prod: f(SegmentOpTag<SegmentOp::Prod>{}); return true;
  }
  return false;
}

} // namespace seg

// forward: out = each segment's value; backward: out = the data's gradient. Both write the boundaries first.
MT_LAUNCHER(segment_reduce_forward, (const SegmentArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(segment_reduce_backward, (const SegmentArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
