// Op table: the fused LSTM and GRU cells, which torch's RNN code (nn.LSTM, nn.GRU, LSTMCell, GRUCell) picks for
// every non-CPU device, composed of native kernels with the math of ATen's CUDA kernels (RNN.cu), so the saved
// workspace and the gradients follow CUDA's formulas:
//   LSTM: gates = input_gates + hidden_gates (+ biases) = [i, f, g, o]; i, f, o sigmoid, g tanh;
//         cy = f * cx + i * g; hy = o * tanh(cy); workspace = the activated [i, f, g, o].
//   GRU:  r = sigmoid(ir + hr), z = sigmoid(iz + hz), n = tanh(in + r * hn) (biases added to each side);
//         hy = n + z * (hx - n); workspace = [r, z, n, hx, hn].
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/rsub.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

Tensor withBias(const Tensor& gates, const OptT& bias) {
  return bias.has_value() && bias->defined() ? at::add(gates, *bias) : gates;
}

void checkGates(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& state, int64_t chunks,
                const char* name) {
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes(), name,
              ": expected input and "
              "hidden gates of one 2-D shape, but got ",
              input_gates.sizes(), " and ", hidden_gates.sizes());
  TORCH_CHECK(input_gates.size(1) == chunks * state.size(-1) && state.size(0) == input_gates.size(0), name,
              ": expected gates of shape [batch, ", chunks, " * hidden] for a state of shape ", state.sizes(),
              ", but got ", input_gates.sizes());
}

std::tuple<Tensor, Tensor, Tensor> lstmCell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx,
                                            const OptT& input_bias, const OptT& hidden_bias) {
  checkGates(input_gates, hidden_gates, cx, 4, "_thnn_fused_lstm_cell");
  Tensor gates = withBias(withBias(at::add(input_gates, hidden_gates), input_bias), hidden_bias);
  auto c = gates.chunk(4, 1);
  Tensor i = at::sigmoid(c[0]), f = at::sigmoid(c[1]), g = at::tanh(c[2]), o = at::sigmoid(c[3]);
  Tensor cy = at::add(at::mul(f, cx), at::mul(i, g));
  Tensor hy = at::mul(o, at::tanh(cy));
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

std::tuple<Tensor, Tensor, Tensor> lstmCellBackward(const OptT& grad_hy_opt, const OptT& grad_cy_opt, const Tensor& cx,
                                                    const Tensor& cy, const Tensor& workspace, bool has_bias) {
  auto w = workspace.chunk(4, 1);
  const Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  const bool has_hy = grad_hy_opt.has_value() && grad_hy_opt->defined();
  const bool has_cy = grad_cy_opt.has_value() && grad_cy_opt->defined();
  Tensor grad_hy = has_hy ? *grad_hy_opt : at::zeros_like(cy), grad_cy = has_cy ? *grad_cy_opt : at::zeros_like(cy);
  Tensor tanh_cy = at::tanh(cy);
  Tensor gog = at::mul(grad_hy, tanh_cy);
  Tensor gcx = at::add(at::mul(at::mul(grad_hy, o), at::rsub(at::mul(tanh_cy, tanh_cy), 1)), grad_cy);
  Tensor gig = at::mul(at::mul(gcx, g), at::mul(i, at::rsub(i, 1)));
  Tensor gfg = at::mul(at::mul(gcx, cx), at::mul(f, at::rsub(f, 1)));
  Tensor gcg = at::mul(at::mul(gcx, i), at::rsub(at::mul(g, g), 1));
  gog = at::mul(gog, at::mul(o, at::rsub(o, 1)));
  Tensor grad_gates = at::cat({gig, gfg, gcg, gog}, 1);
  Tensor grad_bias = has_bias ? at::sum(grad_gates, 0) : Tensor();
  return {grad_gates, at::mul(gcx, f), grad_bias};
}

std::tuple<Tensor, Tensor> gruCell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                   const OptT& input_bias, const OptT& hidden_bias) {
  checkGates(input_gates, hidden_gates, hx, 3, "_thnn_fused_gru_cell");
  auto ic = withBias(input_gates, input_bias).chunk(3, 1);
  auto hc = withBias(hidden_gates, hidden_bias).chunk(3, 1);
  Tensor r = at::sigmoid(at::add(ic[0], hc[0])), z = at::sigmoid(at::add(ic[1], hc[1]));
  Tensor n = at::tanh(at::add(ic[2], at::mul(r, hc[2])));
  Tensor hy = at::add(n, at::mul(z, at::sub(hx, n)));
  return {hy, at::cat({r, z, n, hx, hc[2]}, 1)};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gruCellBackward(const Tensor& grad_hy, const Tensor& workspace,
                                                                   bool has_bias) {
  auto w = workspace.chunk(5, 1);
  const Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  Tensor gz = at::mul(at::mul(grad_hy, at::sub(hx, n)), at::mul(z, at::rsub(z, 1)));
  Tensor ghx = at::mul(grad_hy, z);
  Tensor gin = at::mul(at::mul(grad_hy, at::rsub(z, 1)), at::rsub(at::mul(n, n), 1));
  Tensor ghn = at::mul(gin, r);
  Tensor gr = at::mul(at::mul(gin, hn), at::mul(r, at::rsub(r, 1)));
  Tensor grad_input = at::cat({gr, gz, gin}, 1), grad_hidden = at::cat({gr, gz, ghn}, 1);
  Tensor grad_input_bias = has_bias ? at::sum(grad_input, 0) : Tensor();
  Tensor grad_hidden_bias = has_bias ? at::sum(grad_hidden, 0) : Tensor();
  return {grad_input, grad_hidden, ghx, grad_input_bias, grad_hidden_bias};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_thnn_fused_lstm_cell", lstmCell);
  MT_IMPL(m, "_thnn_fused_lstm_cell_backward_impl", lstmCellBackward);
  MT_IMPL(m, "_thnn_fused_gru_cell", gruCell);
  MT_IMPL(m, "_thnn_fused_gru_cell_backward", gruCellBackward);
}

} // namespace mytorch
