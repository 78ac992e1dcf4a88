// Sim twin of cuda/segment.cu (Note [Segment reduce]): the segments (and blocks of kBlock inner elements) split over
// threads; a segment's positions in order, each a vector loop over the block's inner elements.
#include "mytorch/segment.h"

#include <algorithm>

#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"

namespace mytorch::sim::MT_SIM_ISA_NS {

namespace {

constexpr int64_t kBlock = 256;  // inner elements a task's accumulators hold

// Every row's boundaries into the workspace (a row each: a running sum and maximum).
void fill_bounds(const SegmentArgs& a) {
  par::parallel_for(a.outer, par::grain_for(a.count + 1), [&](int64_t ob, int64_t oe) {
    for (int64_t o = ob; o < oe; ++o) seg::row_bounds(a, o);
  });
}

// Calls f(o, s, i0, w) for every segment s of every row o and block [i0, i0 + w) of the inner dimension.
template <typename F>
void for_each_segment(const SegmentArgs& a, int64_t work_per_segment, const F& f) {
  const int64_t blocks = (a.inner + kBlock - 1) / kBlock;
  par::parallel_for(a.outer * a.count * blocks, par::grain_for(work_per_segment + 8), [&](int64_t tb, int64_t te) {
    for (int64_t t = tb; t < te; ++t) {
      const int64_t os = t / blocks, i0 = (t % blocks) * kBlock;
      f(os / a.count, os % a.count, i0, std::min(kBlock, a.inner - i0));
    }
  });
}

template <SegmentOp op, typename T>
void forward(const SegmentArgs& a) {
  using A = ew::opmath_t<T>;
  const T* x = static_cast<const T*>(a.data);
  T* out = static_cast<T*>(a.out);
  const A init = seg::start<op, A>(a);
  const int64_t per = a.length / std::max<int64_t>(a.count, 1) * std::min(a.inner, kBlock);
  for_each_segment(a, per, [&](int64_t o, int64_t s, int64_t i0, int64_t w) {
    const seg::Span sp = seg::span(a, o, s);
    const T* src = x + o * a.length * a.inner + i0;
    T* dst = out + (o * a.count + s) * a.inner + i0;
    if (w == 1) {  // inner == 1: one accumulator along the row
      A acc = init;
      for (int64_t p = sp.lo; p < sp.hi; ++p) acc = seg::step<op>(acc, mt_cast<A>(src[p * a.inner]));
      dst[0] = mt_cast<T>(seg::finish<op>(a, acc, sp.n));
      return;
    }
    A acc[kBlock];
    for (int64_t i = 0; i < w; ++i) acc[i] = init;
    for (int64_t p = sp.lo; p < sp.hi; ++p) {
      const T* row = src + p * a.inner;
      for (int64_t i = 0; i < w; ++i) acc[i] = seg::step<op>(acc[i], mt_cast<A>(row[i]));
    }
    for (int64_t i = 0; i < w; ++i) dst[i] = mt_cast<T>(seg::finish<op>(a, acc[i], sp.n));
  });
}

template <SegmentOp op, typename T>
void backward(const SegmentArgs& a) {
  using A = ew::opmath_t<T>;
  const T* x = static_cast<const T*>(a.data);
  const T* grad = static_cast<const T*>(a.grad);
  const T* output = static_cast<const T*>(a.output);
  T* out = static_cast<T*>(a.out);
  const int64_t per = 2 * a.length / std::max<int64_t>(a.count, 1) * std::min(a.inner, kBlock);
  for_each_segment(a, per, [&](int64_t o, int64_t s, int64_t i0, int64_t w) {
    const seg::Span sp = seg::span(a, o, s);
    const int64_t row0 = o * a.length * a.inner + i0, at = (o * a.count + s) * a.inner + i0;
    const T* src = x + row0;
    T* dst = out + row0;
    const auto zero = [&](int64_t pb, int64_t pe) {
      for (int64_t p = pb; p < pe; ++p)
        for (int64_t i = 0; i < w; ++i) dst[p * a.inner + i] = T(0);
    };
    if (s == 0) zero(0, sp.lo);  // positions before the first segment and after the last (Note [Segment reduce])
    if (s == a.count - 1) zero(sp.hi, a.length);
    A g[kBlock], v[kBlock];
    for (int64_t i = 0; i < w; ++i) g[i] = mt_cast<A>(grad[at + i]);
    if constexpr (op == SegmentOp::Sum || op == SegmentOp::Mean) {
      T each[kBlock];
      for (int64_t i = 0; i < w; ++i)
        each[i] = op == SegmentOp::Mean ? mt_cast<T>(g[i] / static_cast<A>(sp.n)) : mt_cast<T>(g[i]);
      for (int64_t p = sp.lo; p < sp.hi; ++p) std::copy(each, each + w, dst + p * a.inner);
    } else if constexpr (op == SegmentOp::Max || op == SegmentOp::Min) {
      for (int64_t i = 0; i < w; ++i) v[i] = mt_cast<A>(output[at + i]);
      A ties[kBlock] = {};
      for (int64_t p = sp.lo; p < sp.hi; ++p) {
        const T* row = src + p * a.inner;
        for (int64_t i = 0; i < w; ++i) {
          const A d = mt_cast<A>(row[i]);
          ties[i] += (d != d || d == v[i]) ? A(1) : A(0);
        }
      }
      for (int64_t p = sp.lo; p < sp.hi; ++p) {
        const T* row = src + p * a.inner;
        T* put = dst + p * a.inner;
        for (int64_t i = 0; i < w; ++i) {
          const A d = mt_cast<A>(row[i]);
          put[i] = mt_cast<T>(seg::extreme_grad(d != d || d == v[i], g[i], ties[i]));
        }
      }
    } else {  // Prod
      A others[kBlock];
      int64_t nans[kBlock] = {}, zeros[kBlock] = {};
      const A init = seg::start<op, A>(a);
      for (int64_t i = 0; i < w; ++i) {
        others[i] = init;
        v[i] = mt_cast<A>(mt_cast<T>(g[i] * mt_cast<A>(output[at + i])));  // g * output in the data's dtype
      }
      for (int64_t p = sp.lo; p < sp.hi; ++p) {
        const T* row = src + p * a.inner;
        for (int64_t i = 0; i < w; ++i) {
          const A d = mt_cast<A>(row[i]);
          nans[i] += d != d;
          zeros[i] += d == A(0);
          if (!seg::special(d)) others[i] *= d;
        }
      }
      for (int64_t p = sp.lo; p < sp.hi; ++p) {
        const T* row = src + p * a.inner;
        T* put = dst + p * a.inner;
        for (int64_t i = 0; i < w; ++i)
          put[i] = mt_cast<T>(seg::prod_grad(mt_cast<A>(row[i]), g[i], v[i], others[i], nans[i], zeros[i]));
      }
    }
  });
}

template <bool Forward>
rt::Status run(const SegmentArgs& a, const char* name) {
  if (!seg::bounds_dtype_ok(a))
    return rt::report(rt::Status::InvalidValue, "segment_reduce: int32 or int64 lengths/offsets expected");
  fill_bounds(a);
  return dispatch_floating(a.dtype,
                           [&](auto tag) {
                             using T = decltype(tag);
                             seg::dispatch_segment_op(a.op, [&](auto op) {
                               if constexpr (Forward) forward<decltype(op)::value, T>(a);
                               else backward<decltype(op)::value, T>(a);
                             });
                           })
             ? rt::Status::Success
             : rt::report(rt::Status::InvalidValue, name);
}

} // namespace

MT_SIM_ENTRY rt::Status segment_reduce_forward(const SegmentArgs& a, rt::Stream) {
  return run<true>(a, "segment_reduce_forward: a floating dtype expected");
}

MT_SIM_ENTRY rt::Status segment_reduce_backward(const SegmentArgs& a, rt::Stream) {
  return run<false>(a, "segment_reduce_backward: a floating dtype expected");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, segment_reduce_forward, (const SegmentArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, segment_reduce_backward, (const SegmentArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim
#endif
