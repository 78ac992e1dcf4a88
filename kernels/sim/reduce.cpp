// Sim twin of cuda/reduce.cu (Note [Reduction engine]): per output element, partial accumulators over
// runs of 256 reduced elements, combined in order; each reduction's and scan's struct from reduce.h.
#include "mytorch/reduce.h"

#include <type_traits>

namespace mytorch::sim {
namespace {

template <RedOp op, typename T>
rt::Status run(const ReduceArgs& r) {
  using R = red::Reduction<op>;
  using A = red::acc_t<op, T>;
  const T* in = static_cast<const T*>(r.in);
  constexpr int64_t kChunk = 256;
  for (int64_t o = 0; o < r.out_numel; ++o) {
    const red::RedOffsets at = red::red_output_offsets(r, o);
    const int64_t in_base = at.in_base, out_off = at.out, out2_off = at.out2;
    red::Acc<A> total = R::template init<A>(r.params);
    for (int64_t c = 0; c < r.red_numel; c += kChunk) {
      red::Acc<A> part = R::template init<A>(r.params);
      const int64_t end = c + kChunk < r.red_numel ? c + kChunk : r.red_numel;
      for (int64_t j = c; j < end; ++j) R::push(part, static_cast<A>(in[in_base + red::red_offset(r, j)]), j, r.params);
      R::combine(total, part, r.params);
    }
    A mean = A(0);
    const A v = R::project(total, r.params, &mean);
    auto store = [&](void* base, int64_t off, A value) {
      dispatch_dtype(r.out_dtype, [&](auto tag) {
        using O = decltype(tag);
        if constexpr (!is_complex_t<O>::value) static_cast<O*>(base)[off] = mt_cast<O, A>(value);
      });
    };
    if (r.want_values) store(r.out, out_off, v);
    if (r.out2 != nullptr) {
      if constexpr (R::kOut2 == red::Out2::Index) static_cast<int64_t*>(r.out2)[out2_off] = total.n < 0 ? 0 : total.n;
      else if constexpr (R::kOut2 == red::Out2::Mean) store(r.out2, out2_off, mean);
    }
  }
  return rt::Status::Success;
}

} // namespace

rt::Status reduce(const ReduceArgs& r, rt::Stream) {
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

rt::Status scan(const ScanArgs& s, rt::Stream) {
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
