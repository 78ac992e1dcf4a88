// Fused recurrent cells (Note [Fused RNN cells]): the LSTM and GRU cells torch's RNN code picks for every non-CPU
// device (_thnn_fused_lstm_cell, _thnn_fused_gru_cell) and their backwards, one launch each.
#pragma once

#include <cmath>
#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"
#include "mytorch/ops_math.h"

namespace mytorch {

// Note [Fused RNN cells]
// Elementwise over [batch, hidden]: element (b, j) reads gate j of each chunk of its gate rows (LSTM: i, f, g, o;
// GRU: r, z, n) and writes its state and workspace entries, with the math of ATen's CUDA kernels (RNN.cu) in the
// opmath type, each output rounded once to the tensors' dtype:
//   LSTM: p_k = input_gates + hidden_gates (+ input_bias) (+ hidden_bias); i, f, o = sigmoid, g = tanh;
//         cy = f cx + i g; hy = o tanh(cy); workspace [batch, 4 hidden] = the activated [i, f, g, o].
//   GRU:  r = sigmoid(ir + hr), z = sigmoid(iz + hz), n = tanh(in + r hn), each side with its bias;
//         hy = n + z (hx - n); workspace [batch, 5 hidden] = [r, z, n, hx, hn].
// The backwards take the workspace (and the LSTM's cx, cy) and give the gates' gradients (the GRU's input and hidden
// gates differ in the n chunk only) and the state's; the biases' gradients are the gates' summed over the batch (the
// glue's reduction). A missing incoming gradient (null) counts as zeros. Every tensor is dense, of one dtype.
enum class RnnCell : int { Lstm, Gru };

struct RnnCellArgs {
  RnnCell cell = RnnCell::Lstm;
  DType dtype = DType::Float;
  int64_t batch = 0, hidden = 0;
  // forward
  const void* input_gates = nullptr;   // [batch, G hidden], G = 4 (LSTM) or 3 (GRU)
  const void* hidden_gates = nullptr;  // [batch, G hidden]
  const void* input_bias = nullptr;    // [G hidden] or null
  const void* hidden_bias = nullptr;   // [G hidden] or null
  const void* state = nullptr;         // cx (LSTM) or hx (GRU) [batch, hidden]
  void* hy = nullptr;                  // [batch, hidden]
  void* cy = nullptr;                  // LSTM [batch, hidden]
  void* workspace = nullptr;           // LSTM [batch, 4 hidden], GRU [batch, 5 hidden]
};

struct RnnCellBackwardArgs {
  RnnCell cell = RnnCell::Lstm;
  DType dtype = DType::Float;
  int64_t batch = 0, hidden = 0;
  const void* grad_hy = nullptr;       // [batch, hidden] or null
  const void* grad_cy = nullptr;       // LSTM [batch, hidden] or null
  const void* cx = nullptr;            // LSTM
  const void* cy = nullptr;            // LSTM
  const void* workspace = nullptr;     // the forward's
  void* grad_gates = nullptr;          // LSTM: the gates' [batch, 4 hidden]; GRU: the input gates' [batch, 3 hidden]
  void* grad_hidden_gates = nullptr;   // GRU [batch, 3 hidden]
  void* grad_state = nullptr;          // cx's (LSTM) or hx's (GRU) [batch, hidden]
};

namespace rnn {

template <typename A>
MT_HOST_DEVICE inline A sigmoid(A x) {
  return A(1) / (A(1) + std::exp(-x));
}

// The LSTM cell from its four pre-activations: act = [i, f, g, o], and the new states.
template <typename A>
MT_HOST_DEVICE inline void lstm_forward(A pi, A pf, A pg, A po, A cx, A* act, A& cy, A& hy) {
  act[0] = sigmoid(pi), act[1] = sigmoid(pf), act[2] = std::tanh(pg), act[3] = sigmoid(po);
  cy = act[1] * cx + act[0] * act[2];
  hy = act[3] * std::tanh(cy);
}

// Its backward: the four gates' gradients and cx's, from act = [i, f, g, o], cx, cy and the incoming gradients.
template <typename A>
MT_HOST_DEVICE inline void lstm_backward(const A* act, A cx, A cy, A ghy, A gcy, A* ggates, A& gcx) {
  const A i = act[0], f = act[1], g = act[2], o = act[3], t = std::tanh(cy);
  const A gc = ghy * o * (A(1) - t * t) + gcy;
  ggates[0] = gc * g * (A(1) - i) * i;
  ggates[1] = gc * cx * (A(1) - f) * f;
  ggates[2] = gc * i * (A(1) - g * g);
  ggates[3] = ghy * t * (A(1) - o) * o;
  gcx = gc * f;
}

// The GRU cell from the input side's and the hidden side's gates (biases added): ws = [r, z, n, hx, hn].
template <typename A>
MT_HOST_DEVICE inline A gru_forward(A ir, A iz, A in, A hr, A hz, A hn, A hx, A* ws) {
  const A r = sigmoid(ir + hr), z = sigmoid(iz + hz), n = std::tanh(in + r * hn);
  ws[0] = r, ws[1] = z, ws[2] = n, ws[3] = hx, ws[4] = hn;
  return n + z * (hx - n);
}

// Its backward: gi = the input gates' gradients [r, z, n], the hidden gates' are [r, z, ghn]; ghx the state's.
template <typename A>
MT_HOST_DEVICE inline void gru_backward(const A* ws, A ghy, A* gi, A& ghn, A& ghx) {
  const A r = ws[0], z = ws[1], n = ws[2], hx = ws[3], hn = ws[4];
  const A gin = ghy * (A(1) - z) * (A(1) - n * n);
  gi[0] = gin * hn * (A(1) - r) * r;
  gi[1] = ghy * (hx - n) * (A(1) - z) * z;
  gi[2] = gin;
  ghn = gin * r;
  ghx = ghy * z;
}

} // namespace rnn

MT_LAUNCHER(rnn_cell_forward, (const RnnCellArgs& a, rt::Stream stream), (a, stream))
MT_LAUNCHER(rnn_cell_backward, (const RnnCellBackwardArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
