// Sim twin of cuda/histogram.cu (Note [histc bins]).
#include "mytorch/histogram.h"

namespace mytorch::sim {

rt::Status histc(const HistcArgs& a, rt::Stream) {
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value && !std::is_same<T, bool>::value) {
      using A = histc_acc_t<T>;
      const T* in = static_cast<const T*>(a.in);
      const A lo = static_cast<A>(a.lo), hi = static_cast<A>(a.hi);
      for (int64_t i = 0; i < a.n; ++i) {
        const int64_t b = histc_bin<A>(static_cast<A>(in[i]), lo, hi, a.bins);
        if (b >= 0) ++a.counts[b];
      }
    }
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "histc: unsupported dtype");
}

rt::Status bincount(const BincountArgs& a, rt::Stream) {
  for (int64_t i = 0; i < a.n; ++i) {
    if (a.weights) a.sums[a.in[i]] += a.weights[i];
    else ++a.counts[a.in[i]];
  }
  return rt::Status::Success;
}

} // namespace mytorch::sim
