// Sim twin of cuda/reduce.cu (Note [Reduction engine]): per output element, partial accumulators over
// runs of 256 reduced elements, combined in order.
#include "mytorch/reduce.h"

#include <type_traits>


namespace mytorch::sim {
namespace {

template <RedOp op, typename T>
rt::Status run(const ReduceArgs& r) {
  using A = red::acc_t<op, T>;
  const T* in = static_cast<const T*>(r.in);
  constexpr int64_t kChunk = 256;
  for (int64_t o = 0; o < r.out_numel; ++o) {
    int64_t rem = o, in_base = 0, out_off = 0, out2_off = 0;
    for (int d = r.out_ndim - 1; d >= 0; --d) {
      const int64_t i = rem % r.out_sizes[d];
      rem /= r.out_sizes[d];
      in_base += i * r.out_in_strides[d];
      out_off += i * r.out_strides[d];
      out2_off += i * r.out2_strides[d];
    }
    red::Acc<A> total = red::init<op, A>(r.p);
    for (int64_t c = 0; c < r.red_numel; c += kChunk) {
      red::Acc<A> part = red::init<op, A>(r.p);
      const int64_t end = c + kChunk < r.red_numel ? c + kChunk : r.red_numel;
      for (int64_t j = c; j < end; ++j) red::push<op, A>(part, static_cast<A>(in[in_base + red::red_offset(r, j)]), j, r.p);
      red::combine<op, A>(total, part, r.p);
    }
    A mean = A(0);
    const A v = red::finish<op, A>(total, r, &mean);
    if (r.want_values) {
      dispatch_dtype(r.out_dtype, [&](auto tag) {
        using O = decltype(tag);
        if constexpr (!is_complex_t<O>::value) static_cast<O*>(r.out)[out_off] = mt_cast<O, A>(v);
      });
    }
    if (r.out2 != nullptr) {
      if constexpr (op == RedOp::ArgMax || op == RedOp::ArgMin || op == RedOp::Max || op == RedOp::Min) {
        static_cast<int64_t*>(r.out2)[out2_off] = total.n < 0 ? 0 : total.n;
      } else if constexpr (op == RedOp::Var) {
        dispatch_dtype(r.out_dtype, [&](auto tag) {
          using O = decltype(tag);
          if constexpr (!is_complex_t<O>::value) static_cast<O*>(r.out2)[out2_off] = mt_cast<O, A>(mean);
        });
      }
    }
  }
  return rt::Status::Success;
}

template <RedOp op>
rt::Status run_dtype(const ReduceArgs& r) {
  rt::Status st = rt::report(rt::Status::InvalidValue, "reduce: unsupported input dtype");
  dispatch_dtype(r.in_dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value) {
      constexpr bool floating = !std::is_integral_v<T>;
      if constexpr ((op != RedOp::Norm && op != RedOp::Var && op != RedOp::Mean) || floating) st = run<op, T>(r);
    }
  });
  return st;
}

} // namespace

rt::Status reduce(const ReduceArgs& r, rt::Stream) {
  switch (r.op) {
    case RedOp::Sum: return run_dtype<RedOp::Sum>(r);
    case RedOp::Mean: return run_dtype<RedOp::Mean>(r);
    case RedOp::Prod: return run_dtype<RedOp::Prod>(r);
    case RedOp::Max: return run_dtype<RedOp::Max>(r);
    case RedOp::Min: return run_dtype<RedOp::Min>(r);
    case RedOp::ArgMax: return run_dtype<RedOp::ArgMax>(r);
    case RedOp::ArgMin: return run_dtype<RedOp::ArgMin>(r);
    case RedOp::All: return run_dtype<RedOp::All>(r);
    case RedOp::Any: return run_dtype<RedOp::Any>(r);
    case RedOp::CountNonzero: return run_dtype<RedOp::CountNonzero>(r);
    case RedOp::Norm: return run_dtype<RedOp::Norm>(r);
    case RedOp::Var: return run_dtype<RedOp::Var>(r);
  }
  return rt::report(rt::Status::InvalidValue, "reduce: unknown op");
}

rt::Status scan(const ScanArgs& s, rt::Stream) {
  bool ok = dispatch_dtype(s.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value && !std::is_same_v<T, bool>) {
      for (int64_t l = 0; l < s.lines; ++l) red::scan_line<T>(s, l);
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "scan: unsupported dtype");
}

} // namespace mytorch::sim
