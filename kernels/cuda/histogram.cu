// CUDA histogram family (Note [histc bins]): a thread per element, int64 atomics into the bins.
#include "common.cuh"
#include "mytorch/histogram.h"

namespace mytorch::cuda {
namespace {

template <typename T>
__global__ void histc_kernel(HistcArgs a) {
  using A = histc_acc_t<T>;
  const T* in = static_cast<const T*>(a.in);
  const A lo = static_cast<A>(a.lo), hi = static_cast<A>(a.hi);
  for (const int64_t i : grid_stride(a.n)) {
    const int64_t b = histc_bin<A>(static_cast<A>(in[i]), lo, hi, a.bins);
    if (b >= 0) atomicAdd(reinterpret_cast<unsigned long long*>(a.counts + b), 1ull);
  }
}

__global__ void bincount_kernel(BincountArgs a) {
  for (const int64_t i : grid_stride(a.n)) {
    if (a.weights) atomicAdd(a.sums + a.in[i], a.weights[i]);
    else atomicAdd(reinterpret_cast<unsigned long long*>(a.counts + a.in[i]), 1ull);
  }
}

} // namespace

rt::Status bincount(const BincountArgs& a, rt::Stream stream) {
  if (a.n == 0) return rt::Status::Success;
  bincount_kernel<<<grid_for(a.n), kThreads, 0, native(stream)>>>(a);
  return check_launch("bincount");
}

rt::Status histc(const HistcArgs& a, rt::Stream stream) {
  if (a.n == 0) return rt::Status::Success;
  bool ok = dispatch_dtype(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!is_complex_t<T>::value && !std::is_same<T, bool>::value)
      histc_kernel<T><<<grid_for(a.n), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "histc: unsupported dtype");
  return check_launch("histc");
}

} // namespace mytorch::cuda
