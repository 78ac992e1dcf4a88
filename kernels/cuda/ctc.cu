// CUDA CTC family (Note [CTC]): a block per sample for the alpha and beta recursions (threads over the
// extended target, a barrier per time step), a thread per (sample, time) row for the gradient.
#include "common.cuh"
#include "mytorch/ctc.h"

namespace mytorch::cuda {
namespace {

template <typename A>
__global__ void alpha_kernel(CtcArgs a) {
  const int64_t b = blockIdx.x, T = a.input_lengths[b], L = a.target_lengths[b];
  A* la = static_cast<A*>(a.log_alpha) + b * a.max_t * a.max_s;
  if (T == 0) {
    if (threadIdx.x == 0) static_cast<A*>(a.nll)[b] = L == 0 ? A(0) : A(INFINITY);
    return;
  }
  for (int64_t s = threadIdx.x; s < a.max_s; s += blockDim.x) {
    A v = A(-INFINITY);
    if (s == 0) v = ctc::lp<A>(a, 0, b, a.blank);
    else if (s == 1 && L > 0) v = ctc::lp<A>(a, 0, b, ctc::prime(a, b, 1));
    la[s] = v;
  }
  __syncthreads();
  for (int64_t t = 1; t < T; ++t) {
    for (int64_t s = threadIdx.x; s <= 2 * L; s += blockDim.x)
      la[t * a.max_s + s] = ctc::alpha_step<A>(a, la + (t - 1) * a.max_s, b, t, s);
    __syncthreads();
  }
  if (threadIdx.x == 0) static_cast<A*>(a.nll)[b] = ctc::nll_of<A>(la + (T - 1) * a.max_s, L);
}

template <typename A>
__global__ void beta_kernel(CtcArgs a) {
  const int64_t b = blockIdx.x, T = a.input_lengths[b], L = a.target_lengths[b];
  if (T == 0) return;
  A* lb = static_cast<A*>(a.log_beta) + b * a.max_t * a.max_s;
  A* last = lb + (T - 1) * a.max_s;
  for (int64_t s = threadIdx.x; s < a.max_s; s += blockDim.x) {
    A v = A(-INFINITY);
    if (s == 2 * L) v = ctc::lp<A>(a, T - 1, b, a.blank);
    else if (L > 0 && s == 2 * L - 1) v = ctc::lp<A>(a, T - 1, b, ctc::prime(a, b, 2 * L - 1));
    last[s] = v;
  }
  __syncthreads();
  for (int64_t t = T - 2; t >= 0; --t) {
    for (int64_t s = threadIdx.x; s <= 2 * L; s += blockDim.x)
      lb[t * a.max_s + s] = ctc::beta_step<A>(a, lb + (t + 1) * a.max_s, b, t, s, L);
    __syncthreads();
  }
}

template <typename A>
__global__ void grad_kernel(CtcArgs a) {
  const int64_t rows = a.n * a.max_t;
  for (const int64_t r : grid_stride(rows)) ctc::grad_row<A>(a, r / a.max_t, r % a.max_t);
}

} // namespace

rt::Status ctc_forward(const CtcArgs& a, rt::Stream stream) {
  if (a.n == 0) return rt::Status::Success;
  const bool ok = dispatch_float_double(a.dtype, [&](auto tag) {
    alpha_kernel<decltype(tag)><<<static_cast<unsigned>(a.n), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "ctc_loss: expected float or double log probabilities");
  return check_launch("ctc_loss");
}

rt::Status ctc_backward(const CtcArgs& a, rt::Stream stream) {
  if (a.n == 0) return rt::Status::Success;
  const bool ok = dispatch_float_double(a.dtype, [&](auto tag) {
    beta_kernel<decltype(tag)><<<static_cast<unsigned>(a.n), kThreads, 0, native(stream)>>>(a);
    grad_kernel<decltype(tag)><<<grid_for(a.n * a.max_t), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "ctc_loss_backward: expected float or double log probabilities");
  return check_launch("ctc_loss_backward");
}

} // namespace mytorch::cuda
