// CUDA normalisation (Note [Normalisation family]): a block per group for statistics and dx, a block per
// channel for the weight/bias gradients, a thread per element for the apply.
#include "common.cuh"
#include "mytorch/norm.h"

namespace mytorch::cuda {
namespace {

template <typename A>
struct Sum2 {
  A a, b;
};

// Two block-wide sums at once; every thread gets both.
template <typename A>
__device__ inline void block_sum2(A* v1, A* v2) {
  __shared__ Sum2<A> parts[kThreads];
  parts[threadIdx.x] = {*v1, *v2};
  block_tree(parts, [](Sum2<A>& x, const Sum2<A>& y) {
    x.a += y.a;
    x.b += y.b;
  });
  *v1 = parts[0].a;
  *v2 = parts[0].b;
  __syncthreads();
}

template <typename T, typename P, typename A>
__global__ void stats_kernel(NormArgs a) {
  __shared__ red::Acc<A> parts[kThreads];
  const int64_t groups = nrm::group_count(a);
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    if (a.kind == NormKind::Batch && !a.training) {
      if (threadIdx.x == 0) nrm::eval_stats<P, A>(a, g);
      continue;
    }
    parts[threadIdx.x] = nrm::lane_stats<T, A>(a, g, threadIdx.x, blockDim.x);
    block_tree(parts, [](red::Acc<A>& x, const red::Acc<A>& y) { red::Reduction<RedOp::Var>::combine(x, y, {}); });
    if (threadIdx.x == 0) nrm::finish_stats<T, P, A>(a, g, parts[0]);
    __syncthreads();
  }
}

template <typename T, typename P, typename A>
__global__ void apply_kernel(NormArgs a, int64_t total) {
  for (int64_t off = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; off < total;
       off += int64_t(gridDim.x) * blockDim.x)
    nrm::apply<T, P, A>(a, off);
}

template <typename T, typename P, typename A>
__global__ void dx_kernel(NormArgs a) {
  const int64_t groups = nrm::group_count(a), len = nrm::group_len(a);
  const bool eval = a.kind == NormKind::Batch && !a.training;
  for (int64_t g = blockIdx.x; g < groups; g += gridDim.x) {
    A s1 = 0, s2 = 0;
    if (!eval) {
      nrm::lane_dx_sums<T, P, A>(a, g, threadIdx.x, blockDim.x, &s1, &s2);
      block_sum2(&s1, &s2);
    }
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) nrm::dx_element<T, P, A>(a, g, j, s1, s2);
  }
}

template <typename T, typename P, typename A>
__global__ void dw_kernel(NormArgs a) {
  for (int64_t ch = blockIdx.x; ch < a.c; ch += gridDim.x) {
    A dw = 0, db = 0;
    nrm::lane_dw_terms<T, A>(a, ch, threadIdx.x, blockDim.x, &dw, &db);
    block_sum2(&dw, &db);
    if (threadIdx.x == 0) {
      if (a.dweight) static_cast<P*>(a.dweight)[ch] = static_cast<P>(dw);
      if (a.dbias) static_cast<P*>(a.dbias)[ch] = static_cast<P>(db);
    }
  }
}

template <typename T, typename P>
void forward(const NormArgs& a, cudaStream_t s) {
  using A = ew::opmath_t<T>;
  const int64_t groups = nrm::group_count(a), total = groups * nrm::group_len(a);
  stats_kernel<T, P, A><<<grid_blocks(groups), kThreads, 0, s>>>(a);
  if (total > 0) apply_kernel<T, P, A><<<grid_for(total), kThreads, 0, s>>>(a, total);
}

template <typename T, typename P>
void backward(const NormArgs& a, cudaStream_t s) {
  using A = ew::opmath_t<T>;
  if (a.dx) dx_kernel<T, P, A><<<grid_blocks(nrm::group_count(a)), kThreads, 0, s>>>(a);
  if (a.dweight || a.dbias) dw_kernel<T, P, A><<<grid_blocks(a.c), kThreads, 0, s>>>(a);
}

template <bool fwd>
rt::Status run(const NormArgs& a, rt::Stream stream) {
  const bool ok = dispatch_floating_with_param(a.dtype, a.param_dtype, [&](auto t, auto p) {
    using T = decltype(t);
    using P = decltype(p);
    fwd ? forward<T, P>(a, native(stream)) : backward<T, P>(a, native(stream));
  });
  if (!ok)
    return rt::report(rt::Status::InvalidValue,
                      "norm: expected floating inputs with parameters of the same dtype or float32");
  return check_launch(fwd ? "norm forward" : "norm backward");
}

} // namespace

rt::Status norm_forward(const NormArgs& a, rt::Stream stream) { return run<true>(a, stream); }
rt::Status norm_backward(const NormArgs& a, rt::Stream stream) { return run<false>(a, stream); }

} // namespace mytorch::cuda
