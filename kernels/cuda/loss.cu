// CUDA NLL loss (Note [NLL loss]): a thread per element for reduction='none' and the backward, one block
// for the reductions (a fixed summation order, as CUDA PyTorch's kernel).
#include "common.cuh"
#include "mytorch/loss.h"

namespace mytorch::cuda {
namespace {

template <typename T>
__global__ void forward_none(NllArgs a) {
  using A = ew::opmath_t<T>;
  const int64_t count = a.n * a.inner;
  for (const int64_t e : grid_stride(count)) {
    int64_t t = 0;
    A w = 0;
    const bool used = nll::element<T, A>(a, e, &t, &w);
    static_cast<T*>(a.out)[e] =
        static_cast<T>(used ? -w * static_cast<A>(static_cast<const T*>(a.logp)[nll::offset(a, e, t)]) : A(0));
  }
}

template <typename T>
__global__ void forward_reduce(NllArgs a) {
  using A = ew::opmath_t<T>;
  __shared__ A s_total[kThreads];
  __shared__ A s_w[kThreads];
  const int64_t count = a.n * a.inner;
  A total = 0, wsum = 0;
  for (int64_t e = threadIdx.x; e < count; e += blockDim.x) {
    int64_t t = 0;
    A w = 0;
    if (nll::element<T, A>(a, e, &t, &w)) {
      total += -w * static_cast<A>(static_cast<const T*>(a.logp)[nll::offset(a, e, t)]);
      wsum += w;
    }
  }
  s_total[threadIdx.x] = total;
  s_w[threadIdx.x] = wsum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      s_total[threadIdx.x] += s_total[threadIdx.x + s];
      s_w[threadIdx.x] += s_w[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    static_cast<T*>(a.out)[0] = static_cast<T>(a.reduction == Reduction::Mean ? s_total[0] / s_w[0] : s_total[0]);
    static_cast<T*>(a.total_weight)[0] = static_cast<T>(s_w[0]);
  }
}

template <typename T>
__global__ void backward(NllArgs a) {
  using A = ew::opmath_t<T>;
  const int64_t count = a.n * a.inner;
  const T* g = static_cast<const T*>(a.grad_out);
  const A scale =
      a.reduction == Reduction::Mean ? A(1) / static_cast<A>(static_cast<const T*>(a.total_weight)[0]) : A(1);
  for (const int64_t e : grid_stride(count)) {
    int64_t t = 0;
    A w = 0;
    if (!nll::element<T, A>(a, e, &t, &w)) continue;
    const A gv = static_cast<A>(a.reduction == Reduction::None ? g[e] : g[0]);
    static_cast<T*>(a.out)[nll::offset(a, e, t)] = static_cast<T>(-w * gv * scale);
  }
}

} // namespace

rt::Status nll_loss(const NllArgs& a, rt::Stream stream) {
  const int64_t count = a.n * a.inner;
  const cudaStream_t s = native(stream);
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (a.backward) {
      if (count > 0) backward<T><<<grid_for(count), kThreads, 0, s>>>(a);
    } else if (a.reduction == Reduction::None) {
      if (count > 0) forward_none<T><<<grid_for(count), kThreads, 0, s>>>(a);
    } else {
      forward_reduce<T><<<1, kThreads, 0, s>>>(a);
    }
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "nll_loss: expected a floating dtype");
  return check_launch("nll_loss");
}

} // namespace mytorch::cuda
