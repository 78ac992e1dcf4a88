// Sim twin of cuda/reduce.cu (Note [Reduction engine]): per output element, partial accumulators over
// runs of 256 reduced elements, combined pairwise in order; each reduction's and scan's struct from reduce.h.
#include "mytorch/reduce.h"

#include <algorithm>
#include <type_traits>
#include <vector>

#include "mytorch/parallel.h"
#include "mytorch/sim_isa.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

constexpr int64_t kChunk = 256; // reduced elements per partial: the unit of the parallel split
constexpr int64_t kLeaf = 32;    // elements accumulated in sequence inside a chunk

// parts[0] := parts[0] + ... + parts[m-1], neighbours pairwise (an order fixed by m alone).
template <typename R, typename Acc>
Acc combine_pairwise(Acc* parts, int64_t m, const RedParams& p) {
  for (int64_t w = 1; w < m; w *= 2)
    for (int64_t i = 0; i + w < m; i += 2 * w) R::combine(parts[i], parts[i + w], p);
  return parts[0];
}

// The partial of the chunk [c, end) of one output: leaves of kLeaf elements in sequence, combined pairwise
// (neighbours, lower indices on the left, so argmax's first-index rule holds). A float32 sum of n elements then
// errs like n/8 sequential additions plus a tree, not like n: sequential chunks erred about 3x PyTorch's own
// cascade sum on 2048 elements.
template <typename R, typename A, typename T>
red::Acc<A> chunk_partial(const ReduceArgs& r, const T* in, int64_t in_base, int64_t c, int64_t end) {
  red::Acc<A> leaf[kChunk / kLeaf];
  int m = 0;
  for (int64_t b = c; b < end; b += kLeaf, ++m) {
    leaf[m] = R::template init<A>(r.params);
    const int64_t e = std::min(b + kLeaf, end);
    if (r.red_ndim == 1) {
      const int64_t s = r.red_in_strides[0];
      for (int64_t j = b; j < e; ++j) R::push(leaf[m], static_cast<A>(in[in_base + j * s]), j, r.params);
    } else {
      for (int64_t j = b; j < e; ++j)
        R::push(leaf[m], static_cast<A>(in[in_base + red::red_offset(r, j)]), j, r.params);
    }
  }
  return combine_pairwise<R>(leaf, m, r.params);
}

// Per output element: partials over runs of kChunk reduced elements, combined pairwise in chunk order (Note [Sim
// parallelism]: the chunks depend on the sizes only, so the bits do not depend on the thread count). Many outputs
// split over the workers by output; a few long ones by chunk, the partials combined on the calling thread.
template <RedOp op, typename T>
rt::Status run(const ReduceArgs& r) {
  using R = red::Reduction<op>;
  using A = red::acc_t<op, T>;
  const T* in = static_cast<const T*>(r.in);
  const int64_t nchunks = (r.red_numel + kChunk - 1) / kChunk;
  auto finish = [&](const red::RedOffsets& at, red::Acc<A> total) {
    A mean = A(0);
    const A v = R::project(total, r.params, &mean);
    auto store = [&](void* base, int64_t off, A value) {
      dispatch_dtype(r.out_dtype, [&](auto tag) {
        using O = decltype(tag);
        if constexpr (!is_complex_t<O>::value) static_cast<O*>(base)[off] = mt_cast<O, A>(value);
      });
    };
    if (r.want_values) store(r.out, at.out, v);
    if (r.out2 != nullptr) {
      if constexpr (R::kOut2 == red::Out2::Index) static_cast<int64_t*>(r.out2)[at.out2] = total.n < 0 ? 0 : total.n;
      else if constexpr (R::kOut2 == red::Out2::Mean) store(r.out2, at.out2, mean);
    }
  };
  // The partials of chunks [cb, ce) of the output at in_base, into parts[cb, ce); their total.
  auto fill = [&](red::Acc<A>* parts, int64_t in_base, int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c)
      parts[c] = chunk_partial<R, A>(r, in, in_base, c * kChunk, std::min((c + 1) * kChunk, r.red_numel));
  };
  auto total_of = [&](red::Acc<A>* parts) {
    return nchunks ? combine_pairwise<R>(parts, nchunks, r.params) : R::template init<A>(r.params);
  };
  const bool by_output = r.out_numel >= 4 * par::threads() || nchunks < 2 * par::threads();
  if (by_output) {
    par::parallel_for(r.out_numel, par::grain_for(r.red_numel), [&](int64_t ob, int64_t oe) {
      // a short reduction's partials stay on the stack: no allocation per call
      constexpr int64_t kOnStack = 16;
      red::Acc<A> on_stack[kOnStack];
      std::vector<red::Acc<A>> on_heap(static_cast<size_t>(nchunks > kOnStack ? nchunks : 0));
      red::Acc<A>* parts = nchunks > kOnStack ? on_heap.data() : on_stack;
      for (int64_t o = ob; o < oe; ++o) {
        const red::RedOffsets at = red::red_output_offsets(r, o);
        fill(parts, at.in_base, 0, nchunks);
        finish(at, total_of(parts));
      }
    });
    return rt::Status::Success;
  }
  std::vector<red::Acc<A>> parts(static_cast<size_t>(nchunks));
  for (int64_t o = 0; o < r.out_numel; ++o) {
    const red::RedOffsets at = red::red_output_offsets(r, o);
    par::parallel_for(nchunks, par::grain_for(kChunk),
                      [&](int64_t cb, int64_t ce) { fill(parts.data(), at.in_base, cb, ce); });
    finish(at, total_of(parts.data()));
  }
  return rt::Status::Success;
}

} // namespace

MT_SIM_ENTRY rt::Status reduce(const ReduceArgs& r, rt::Stream) {
  return red_visit(
      r.op,
      [&](auto op) {
        rt::Status st = rt::report(rt::Status::InvalidValue, "reduce: unsupported input dtype");
        dispatch_dtype(r.in_dtype, [&](auto tag) {
          if constexpr (red::supported<decltype(op)::value, decltype(tag)>())
            st = run<decltype(op)::value, decltype(tag)>(r);
        });
        return st;
      },
      [] { return rt::report(rt::Status::InvalidValue, "reduce: unknown op"); });
}

MT_SIM_ENTRY rt::Status scan(const ScanArgs& s, rt::Stream) {
  return scan_visit(
      s.op,
      [&](auto op) {
        bool ok = false;
        dispatch_dtype(s.dtype, [&](auto tag) {
          using T = decltype(tag);
          if constexpr (red::scan_supported<decltype(op)::value, T>()) {
            for (int64_t l = 0; l < s.lines; ++l) red::scan_line<decltype(op)::value, T>(s, l);
            ok = true;
          }
        });
        return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "scan: unsupported dtype");
      },
      [] { return rt::report(rt::Status::InvalidValue, "scan: unknown op"); });
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, reduce, (const ReduceArgs& r, rt::Stream s), (r, s))
MT_SIM_DISPATCH(rt::Status, scan, (const ScanArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim

namespace mytorch {

bool reduce_supported(RedOp op, DType t) {
  return red_visit(
      op,
      [&](auto op_tag) {
        bool ok = false;
        dispatch_dtype(t, [&](auto tag) { ok = red::supported<decltype(op_tag)::value, decltype(tag)>(); });
        return ok;
      },
      [] { return false; });
}

} // namespace mytorch
#endif
