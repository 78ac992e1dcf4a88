// Sim twin of cuda/rnn.cu (Note [Fused RNN cells]): batch rows in parallel, each row through opmath buffers, so the
// AVX2 variant's loops over the hidden units vectorise over libmvec (Note [Sim vector math]). Each element is
// computed alone: the same bits at any thread count. Compiled for each ISA variant (Note [Sim ISA variants]).
#include <algorithm>
#include <vector>

#include "mytorch/parallel.h"
#include "mytorch/rnn.h"
#include "mytorch/sim_isa.h"
#include "mytorch/sim_vec.h"
#include "mytorch/sim_vmath.h"

namespace mytorch::sim::MT_SIM_ISA_NS {
namespace {

// Row r (n elements at r * n) of p in A: through buf unless T is A; zeros when p is null.
template <typename T, typename A>
const A* row(const void* p, int64_t r, int64_t n, A* buf) {
  if (p == nullptr) {
    std::fill(buf, buf + n, A(0));
    return buf;
  }
  return vec::as_opmath(static_cast<const T*>(p) + r * n, buf, n);
}

template <typename T, typename A>
void store(const A* s, void* p, int64_t r, int64_t n) {
  vec::from_opmath(s, static_cast<T*>(p) + r * n, n);
}

// The rows' element loops, their operands distinct (restrict: else GCC cannot tell the buffers apart and keeps
// the transcendental calls scalar).
template <typename A>
void lstm_row(const A* __restrict pre, const A* __restrict cx, A* __restrict act, A* __restrict cy, A* __restrict hy,
              int64_t h) {
  for (int64_t j = 0; j < h; ++j) {
    A ac[4], c, y;
    rnn::lstm_forward<A>(pre[j], pre[h + j], pre[2 * h + j], pre[3 * h + j], cx[j], ac, c, y);
    act[j] = ac[0], act[h + j] = ac[1], act[2 * h + j] = ac[2], act[3 * h + j] = ac[3];
    cy[j] = c, hy[j] = y;
  }
}

template <typename A>
void gru_row(const A* __restrict is, const A* __restrict hs, const A* __restrict hx, A* __restrict ws, A* __restrict hy,
             int64_t h) {
  for (int64_t j = 0; j < h; ++j) {
    A w[5];
    hy[j] = rnn::gru_forward<A>(is[j], is[h + j], is[2 * h + j], hs[j], hs[h + j], hs[2 * h + j], hx[j], w);
    for (int k = 0; k < 5; ++k) ws[k * h + j] = w[k];
  }
}

template <typename A>
void lstm_backward_row(const A* __restrict act, const A* __restrict cx, const A* __restrict cy, const A* __restrict ghy,
                       const A* __restrict gcy, A* __restrict gg, A* __restrict gcx, int64_t h) {
  for (int64_t j = 0; j < h; ++j) {
    const A ac[4] = {act[j], act[h + j], act[2 * h + j], act[3 * h + j]};
    A d[4], dc;
    rnn::lstm_backward<A>(ac, cx[j], cy[j], ghy[j], gcy[j], d, dc);
    gg[j] = d[0], gg[h + j] = d[1], gg[2 * h + j] = d[2], gg[3 * h + j] = d[3];
    gcx[j] = dc;
  }
}

template <typename A>
void gru_backward_row(const A* __restrict ws, const A* __restrict ghy, A* __restrict gi, A* __restrict gh,
                      A* __restrict ghx, int64_t h) {
  for (int64_t j = 0; j < h; ++j) {
    const A w[5] = {ws[j], ws[h + j], ws[2 * h + j], ws[3 * h + j], ws[4 * h + j]};
    A d[3], dhn, dx;
    rnn::gru_backward<A>(w, ghy[j], d, dhn, dx);
    gi[j] = gh[j] = d[0], gi[h + j] = gh[h + j] = d[1], gi[2 * h + j] = d[2], gh[2 * h + j] = dhn;
    ghx[j] = dx;
  }
}

// Per row: the gates' pre-activations (input + hidden gates, then each bias, in ATen's order), the cell, its outputs.
template <typename T>
void lstm_forward(const RnnCellArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t h = a.hidden, g = 4 * h;
  std::vector<A> bias(static_cast<size_t>(2 * g));
  const A* bi = a.input_bias ? row<T, A>(a.input_bias, 0, g, bias.data()) : nullptr;
  const A* bh = a.hidden_bias ? row<T, A>(a.hidden_bias, 0, g, bias.data() + g) : nullptr;
  par::parallel_for(a.batch, par::grain_for(24 * g), [&](int64_t rb, int64_t re) {
    std::vector<A> buf(static_cast<size_t>(4 * g + 3 * h));
    A *ib = buf.data(), *hb = ib + g, *pre = hb + g, *act = pre + g, *cb = act + g, *cy = cb + h, *hy = cy + h;
    for (int64_t r = rb; r < re; ++r) {
      const A *ig = row<T, A>(a.input_gates, r, g, ib), *hg = row<T, A>(a.hidden_gates, r, g, hb);
      for (int64_t k = 0; k < g; ++k) pre[k] = ig[k] + hg[k];
      if (bi)
        for (int64_t k = 0; k < g; ++k) pre[k] += bi[k];
      if (bh)
        for (int64_t k = 0; k < g; ++k) pre[k] += bh[k];
      const A* cx = row<T, A>(a.state, r, h, cb);
      lstm_row<A>(pre, cx, act, cy, hy, h);
      store<T>(act, a.workspace, r, g);
      store<T>(cy, a.cy, r, h);
      store<T>(hy, a.hy, r, h);
    }
  });
}

template <typename T>
void gru_forward(const RnnCellArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t h = a.hidden, g = 3 * h;
  std::vector<A> bias(static_cast<size_t>(2 * g));
  const A* bi = a.input_bias ? row<T, A>(a.input_bias, 0, g, bias.data()) : nullptr;
  const A* bh = a.hidden_bias ? row<T, A>(a.hidden_bias, 0, g, bias.data() + g) : nullptr;
  par::parallel_for(a.batch, par::grain_for(24 * g), [&](int64_t rb, int64_t re) {
    std::vector<A> buf(static_cast<size_t>(4 * g + 7 * h));
    A *ib = buf.data(), *hb = ib + g, *is = hb + g, *hs = is + g, *xb = hs + g, *ws = xb + h, *hy = ws + 5 * h;
    for (int64_t r = rb; r < re; ++r) {
      const A *ig = row<T, A>(a.input_gates, r, g, ib), *hg = row<T, A>(a.hidden_gates, r, g, hb);
      for (int64_t k = 0; k < g; ++k) is[k] = bi ? ig[k] + bi[k] : ig[k], hs[k] = bh ? hg[k] + bh[k] : hg[k];
      const A* hx = row<T, A>(a.state, r, h, xb);
      gru_row<A>(is, hs, hx, ws, hy, h);
      store<T>(ws, a.workspace, r, 5 * h);
      store<T>(hy, a.hy, r, h);
    }
  });
}

template <typename T>
void lstm_backward(const RnnCellBackwardArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t h = a.hidden, g = 4 * h;
  par::parallel_for(a.batch, par::grain_for(16 * g), [&](int64_t rb, int64_t re) {
    std::vector<A> buf(static_cast<size_t>(2 * g + 5 * h));
    A *wb = buf.data(), *gg = wb + g, *xb = gg + g, *cb = xb + h, *hb = cb + h, *ccb = hb + h, *gcx = ccb + h;
    for (int64_t r = rb; r < re; ++r) {
      const A* act = row<T, A>(a.workspace, r, g, wb);
      const A *cx = row<T, A>(a.cx, r, h, xb), *cy = row<T, A>(a.cy, r, h, cb);
      const A *ghy = row<T, A>(a.grad_hy, r, h, hb), *gcy = row<T, A>(a.grad_cy, r, h, ccb);
      lstm_backward_row<A>(act, cx, cy, ghy, gcy, gg, gcx, h);
      store<T>(gg, a.grad_gates, r, g);
      store<T>(gcx, a.grad_state, r, h);
    }
  });
}

template <typename T>
void gru_backward(const RnnCellBackwardArgs& a) {
  using A = ew::opmath_t<T>;
  const int64_t h = a.hidden, g = 3 * h;
  par::parallel_for(a.batch, par::grain_for(8 * g), [&](int64_t rb, int64_t re) {
    std::vector<A> buf(static_cast<size_t>(2 * g + 7 * h));
    A *wb = buf.data(), *gi = wb + 5 * h, *gh = gi + g, *hb = gh + g, *ghx = hb + h;
    for (int64_t r = rb; r < re; ++r) {
      const A* ws = row<T, A>(a.workspace, r, 5 * h, wb);
      const A* ghy = row<T, A>(a.grad_hy, r, h, hb);
      gru_backward_row<A>(ws, ghy, gi, gh, ghx, h);
      store<T>(gi, a.grad_gates, r, g);
      store<T>(gh, a.grad_hidden_gates, r, g);
      store<T>(ghx, a.grad_state, r, h);
    }
  });
}

} // namespace

MT_SIM_ENTRY rt::Status rnn_cell_forward(const RnnCellArgs& a, rt::Stream) {
  if (a.batch == 0 || a.hidden == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    if (a.cell == RnnCell::Lstm) lstm_forward<decltype(tag)>(a);
    else gru_forward<decltype(tag)>(a);
  });
  return ok ? rt::Status::Success : rt::report(rt::Status::InvalidValue, "rnn_cell_forward: expected a floating dtype");
}

MT_SIM_ENTRY rt::Status rnn_cell_backward(const RnnCellBackwardArgs& a, rt::Stream) {
  if (a.batch == 0 || a.hidden == 0) return rt::Status::Success;
  const bool ok = dispatch_floating(a.dtype, [&](auto tag) {
    if (a.cell == RnnCell::Lstm) lstm_backward<decltype(tag)>(a);
    else gru_backward<decltype(tag)>(a);
  });
  return ok ? rt::Status::Success
            : rt::report(rt::Status::InvalidValue, "rnn_cell_backward: expected a floating dtype");
}

} // namespace mytorch::sim::MT_SIM_ISA_NS

#if !defined(MT_SIM_ISA_AVX2)
namespace mytorch::sim {
MT_SIM_DISPATCH(rt::Status, rnn_cell_forward, (const RnnCellArgs& a, rt::Stream s), (a, s))
MT_SIM_DISPATCH(rt::Status, rnn_cell_backward, (const RnnCellBackwardArgs& a, rt::Stream s), (a, s))
} // namespace mytorch::sim
#endif
