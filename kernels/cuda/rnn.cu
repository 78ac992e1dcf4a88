// CUDA fused recurrent cells (Note [Fused RNN cells]): a thread per (batch, hidden) element, as ATen's RNN.cu.
#include "common.cuh"
#include "mytorch/rnn.h"

namespace mytorch::cuda {
namespace {

template <typename T, typename A>
__device__ inline A val(const void* p, int64_t i) {
  return p ? static_cast<A>(static_cast<const T*>(p)[i]) : A(0);
}

template <typename T>
__global__ void lstm_forward_kernel(RnnCellArgs a) {
  using A = ew::opmath_t<T>;
  const int64_t h = a.hidden;
  for (const int64_t e : grid_stride(a.batch * h)) {
    const int64_t b = e / h, j = e - b * h, g0 = b * 4 * h + j;
    A p[4], act[4], cy, hy;
    for (int k = 0; k < 4; ++k) {
      A v = val<T, A>(a.input_gates, g0 + k * h) + val<T, A>(a.hidden_gates, g0 + k * h);
      if (a.input_bias) v += val<T, A>(a.input_bias, j + k * h);
      if (a.hidden_bias) v += val<T, A>(a.hidden_bias, j + k * h);
      p[k] = v;
    }
    rnn::lstm_forward<A>(p[0], p[1], p[2], p[3], val<T, A>(a.state, e), act, cy, hy);
    for (int k = 0; k < 4; ++k) static_cast<T*>(a.workspace)[g0 + k * h] = static_cast<T>(act[k]);
    static_cast<T*>(a.cy)[e] = static_cast<T>(cy);
    static_cast<T*>(a.hy)[e] = static_cast<T>(hy);
  }
}

template <typename T>
__global__ void gru_forward_kernel(RnnCellArgs a) {
  using A = ew::opmath_t<T>;
  const int64_t h = a.hidden;
  for (const int64_t e : grid_stride(a.batch * h)) {
    const int64_t b = e / h, j = e - b * h, g0 = b * 3 * h + j;
    A ig[3], hg[3], ws[5];
    for (int k = 0; k < 3; ++k) {
      ig[k] = val<T, A>(a.input_gates, g0 + k * h);
      if (a.input_bias) ig[k] += val<T, A>(a.input_bias, j + k * h);
      hg[k] = val<T, A>(a.hidden_gates, g0 + k * h);
      if (a.hidden_bias) hg[k] += val<T, A>(a.hidden_bias, j + k * h);
    }
    const A hy = rnn::gru_forward<A>(ig[0], ig[1], ig[2], hg[0], hg[1], hg[2], val<T, A>(a.state, e), ws);
    for (int k = 0; k < 5; ++k) static_cast<T*>(a.workspace)[b * 5 * h + j + k * h] = static_cast<T>(ws[k]);
    static_cast<T*>(a.hy)[e] = static_cast<T>(hy);
  }
}

template <typename T>
__global__ void lstm_backward_kernel(RnnCellBackwardArgs a) {
  using A = ew::opmath_t<T>;
  const int64_t h = a.hidden;
  for (const int64_t e : grid_stride(a.batch * h)) {
    const int64_t b = e / h, j = e - b * h, g0 = b * 4 * h + j;
    A act[4], gg[4], gcx;
    for (int k = 0; k < 4; ++k) act[k] = val<T, A>(a.workspace, g0 + k * h);
    rnn::lstm_backward<A>(act, val<T, A>(a.cx, e), val<T, A>(a.cy, e), val<T, A>(a.grad_hy, e), val<T, A>(a.grad_cy, e),
                          gg, gcx);
    for (int k = 0; k < 4; ++k) static_cast<T*>(a.grad_gates)[g0 + k * h] = static_cast<T>(gg[k]);
    static_cast<T*>(a.grad_state)[e] = static_cast<T>(gcx);
  }
}

template <typename T>
__global__ void gru_backward_kernel(RnnCellBackwardArgs a) {
  using A = ew::opmath_t<T>;
  const int64_t h = a.hidden;
  for (const int64_t e : grid_stride(a.batch * h)) {
    const int64_t b = e / h, j = e - b * h, g0 = b * 3 * h + j;
    A ws[5], gi[3], ghn, ghx;
    for (int k = 0; k < 5; ++k) ws[k] = val<T, A>(a.workspace, b * 5 * h + j + k * h);
    rnn::gru_backward<A>(ws, val<T, A>(a.grad_hy, e), gi, ghn, ghx);
    for (int k = 0; k < 3; ++k) {
      static_cast<T*>(a.grad_gates)[g0 + k * h] = static_cast<T>(gi[k]);
      static_cast<T*>(a.grad_hidden_gates)[g0 + k * h] = static_cast<T>(k == 2 ? ghn : gi[k]);
    }
    static_cast<T*>(a.grad_state)[e] = static_cast<T>(ghx);
  }
}

} // namespace

rt::Status rnn_cell_forward(const RnnCellArgs& a, rt::Stream stream) {
  const int64_t n = a.batch * a.hidden;
  if (n == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (a.cell == RnnCell::Lstm) lstm_forward_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(a);
    else gru_forward_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "rnn_cell_forward: expected a floating dtype");
  return check_launch("rnn_cell_forward");
}

rt::Status rnn_cell_backward(const RnnCellBackwardArgs& a, rt::Stream stream) {
  const int64_t n = a.batch * a.hidden;
  if (n == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (a.cell == RnnCell::Lstm) lstm_backward_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(a);
    else gru_backward_kernel<T><<<grid_for(n), kThreads, 0, native(stream)>>>(a);
  });
  if (!ok) return rt::report(rt::Status::InvalidValue, "rnn_cell_backward: expected a floating dtype");
  return check_launch("rnn_cell_backward");
}

} // namespace mytorch::cuda
