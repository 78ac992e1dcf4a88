// CUDA segment reductions (Note [Segment reduce]): a thread per row writes the row's boundaries, then a thread per
// (segment, inner element) takes the segment's positions in order through the header's step/finish (forward) and
// extreme_grad/prod_grad (backward): the sim twin's operations in its order. A segment's positions are one
// thread's, so a few long segments over a small inner dimension leave most of the device idle (a split of long
// segments over blocks is not written).
#include "common.cuh"
#include "mytorch/segment.h"

namespace mytorch::cuda {
namespace {

// Thread t's segment s of row o at inner element i: the segment's positions and the offset of (o, 0, i).
struct Lane {
  int64_t s;
  seg::Span sp;
  int64_t row0;
};
__device__ inline Lane lane_of(const SegmentArgs& a, int64_t t) {
  const int64_t i = t % a.inner, os = t / a.inner, o = os / a.count, s = os % a.count;
  return {s, seg::span(a, o, s), o * a.length * a.inner + i};
}

__global__ void bounds_kernel(SegmentArgs a) {
  for (const int64_t o : grid_stride(a.outer)) seg::row_bounds(a, o);
}

template <SegmentOp op, typename T>
__global__ void forward_kernel(SegmentArgs a, int64_t total) {
  using A = ew::opmath_t<T>;
  for (const int64_t t : grid_stride(total)) {
    const Lane l = lane_of(a, t);
    const T* src = static_cast<const T*>(a.data) + l.row0;
    A acc = seg::start<op, A>(a);
    for (int64_t p = l.sp.lo; p < l.sp.hi; ++p) acc = seg::step<op>(acc, mt_cast<A>(src[p * a.inner]));
    static_cast<T*>(a.out)[t] = mt_cast<T>(seg::finish<op>(a, acc, l.sp.n));
  }
}

template <SegmentOp op, typename T>
__global__ void backward_kernel(SegmentArgs a, int64_t total) {
  using A = ew::opmath_t<T>;
  const T* x = static_cast<const T*>(a.data);
  T* out = static_cast<T*>(a.out);
  for (const int64_t t : grid_stride(total)) {
    const Lane l = lane_of(a, t);
    const seg::Span sp = l.sp;
    const T* src = x + l.row0;
    T* dst = out + l.row0;
    if (l.s == 0)
      for (int64_t p = 0; p < sp.lo; ++p) dst[p * a.inner] = T(0);
    if (l.s == a.count - 1)
      for (int64_t p = sp.hi; p < a.length; ++p) dst[p * a.inner] = T(0);
    const A g = mt_cast<A>(static_cast<const T*>(a.grad)[t]);
    const A v = mt_cast<A>(static_cast<const T*>(a.output)[t]);
    if constexpr (op == SegmentOp::Sum || op == SegmentOp::Mean) {
      const T each = op == SegmentOp::Mean ? mt_cast<T>(g / static_cast<A>(sp.n)) : mt_cast<T>(g);
      for (int64_t p = sp.lo; p < sp.hi; ++p) dst[p * a.inner] = each;
    } else if constexpr (op == SegmentOp::Max || op == SegmentOp::Min) {
      A ties = A(0);
      for (int64_t p = sp.lo; p < sp.hi; ++p) {
        const A d = mt_cast<A>(src[p * a.inner]);
        ties += (d != d || d == v) ? A(1) : A(0);
      }
      for (int64_t p = sp.lo; p < sp.hi; ++p) {
        const A d = mt_cast<A>(src[p * a.inner]);
        dst[p * a.inner] = mt_cast<T>(seg::extreme_grad(d != d || d == v, g, ties));
      }
    } else {  // Prod
      A others = seg::start<op, A>(a);
      int64_t nans = 0, zeros = 0;
      for (int64_t p = sp.lo; p < sp.hi; ++p) {
        const A d = mt_cast<A>(src[p * a.inner]);
        nans += d != d;
        zeros += d == A(0);
        if (!seg::special(d)) others *= d;
      }
      const A go = mt_cast<A>(mt_cast<T>(g * v));
      for (int64_t p = sp.lo; p < sp.hi; ++p)
        dst[p * a.inner] = mt_cast<T>(seg::prod_grad(mt_cast<A>(src[p * a.inner]), g, go, others, nans, zeros));
    }
  }
}

template <bool Forward>
rt::Status launch(const SegmentArgs& a, rt::Stream stream, const char* name) {
  if (!seg::bounds_dtype_ok(a))
    return rt::report(rt::Status::InvalidValue, "segment_reduce: int32 or int64 lengths/offsets expected");
  const int64_t total = a.outer * a.count * a.inner;
  if (a.outer <= 0) return rt::Status::Success;
  bounds_kernel<<<grid_for(a.outer), kThreads, 0, native(stream)>>>(a);
  if (total <= 0) return check_launch("segment_reduce_bounds");
  bool typed = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    seg::dispatch_segment_op(a.op, [&](auto op) {
      constexpr SegmentOp kOp = decltype(op)::value;
      if constexpr (Forward) forward_kernel<kOp, T><<<grid_for(total), kThreads, 0, native(stream)>>>(a, total);
      else backward_kernel<kOp, T><<<grid_for(total), kThreads, 0, native(stream)>>>(a, total);
    });
  });
  if (!typed) return rt::report(rt::Status::InvalidValue, name);
  return check_launch(Forward ? "segment_reduce_forward" : "segment_reduce_backward");
}

} // namespace

rt::Status segment_reduce_forward(const SegmentArgs& a, rt::Stream stream) {
  return launch<true>(a, stream, "segment_reduce_forward: a floating dtype expected");
}

rt::Status segment_reduce_backward(const SegmentArgs& a, rt::Stream stream) {
  return launch<false>(a, stream, "segment_reduce_backward: a floating dtype expected");
}

} // namespace mytorch::cuda
