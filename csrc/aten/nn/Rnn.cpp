// Op table: the fused LSTM and GRU cells (Note [Fused RNN cells], kernels/include/mytorch/rnn.h), which torch's RNN
// code (nn.LSTM, nn.GRU, LSTMCell, GRUCell) picks for every non-CPU device: one kernel each way, with the math of
// ATen's CUDA kernels (RNN.cu), so the saved workspace and the gradients follow CUDA's formulas. The biases'
// gradients are the gates' gradients summed over the batch, as ATen's CUDA glue sums them.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <initializer_list>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "mytorch/rnn.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

Tensor valueOr(const OptT& t) { return t.has_value() ? *t : Tensor(); }

void checkGates(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& state, int64_t chunks,
                const char* name) {
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes(), name,
              ": expected input and "
              "hidden gates of one 2-D shape, but got ",
              input_gates.sizes(), " and ", hidden_gates.sizes());
  TORCH_CHECK(
      state.dim() == 2 && input_gates.size(1) == chunks * state.size(-1) && state.size(0) == input_gates.size(0), name,
      ": expected gates of shape [batch, ", chunks, " * hidden] for a state of shape ", state.sizes(), ", but got ",
      input_gates.sizes());
}

// Every defined tensor of one floating dtype and on the first one's device; a bias of [chunks * hidden].
void checkTensors(std::initializer_list<Tensor> ts, const char* name) {
  const Tensor& first = *ts.begin();
  TORCH_CHECK(kernelFloating(first.scalar_type()), name, ": expected floating point tensors, but got ",
              first.scalar_type());
  for (const Tensor& t : ts) {
    if (!t.defined()) continue;
    TORCH_CHECK(t.scalar_type() == first.scalar_type(), name, ": expected all tensors of dtype ", first.scalar_type(),
                ", but got one of ", t.scalar_type());
    TORCH_CHECK(t.device() == first.device(), name, ": expected all tensors on ", first.device(), ", but got one on ",
                t.device());
  }
}

void checkBias(const Tensor& bias, int64_t width, const char* name) {
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == width), name, ": expected a bias of shape [",
              width, "], but got ", bias.sizes());
}

RnnCellArgs forwardArgs(RnnCell cell, const Tensor& ig, const Tensor& hg, const Tensor& state, const Tensor& bi,
                        const Tensor& bh) {
  RnnCellArgs a;
  a.cell = cell;
  a.dtype = toKernelDType(ig.scalar_type());
  a.batch = state.size(0);
  a.hidden = state.size(1);
  a.input_gates = ig.const_data_ptr();
  a.hidden_gates = hg.const_data_ptr();
  a.input_bias = bi.defined() ? bi.const_data_ptr() : nullptr;
  a.hidden_bias = bh.defined() ? bh.const_data_ptr() : nullptr;
  a.state = state.const_data_ptr();
  return a;
}

std::tuple<Tensor, Tensor, Tensor> lstmCell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& cx,
                                            const OptT& input_bias, const OptT& hidden_bias) {
  const char* name = "_thnn_fused_lstm_cell";
  checkGates(input_gates, hidden_gates, cx, 4, name);
  const Tensor bi = valueOr(input_bias), bh = valueOr(hidden_bias);
  checkTensors({input_gates, hidden_gates, cx, bi, bh}, name);
  checkBias(bi, input_gates.size(1), name);
  checkBias(bh, input_gates.size(1), name);
  const Tensor ig = input_gates.contiguous(), hg = hidden_gates.contiguous(), c = cx.contiguous();
  Tensor hy = at::empty(c.sizes(), c.options()), cy = at::empty(c.sizes(), c.options());
  Tensor workspace = at::empty(ig.sizes(), ig.options());
  RnnCellArgs a =
      forwardArgs(RnnCell::Lstm, ig, hg, c, bi.defined() ? bi.contiguous() : bi, bh.defined() ? bh.contiguous() : bh);
  a.hy = hy.data_ptr();
  a.cy = cy.data_ptr();
  a.workspace = workspace.data_ptr();
  c10::DeviceGuard guard(ig.device());
  MT_RT_CHECK(kernels::rnn_cell_forward(a, streamFor(ig)));
  return {hy, cy, workspace};
}

std::tuple<Tensor, Tensor, Tensor> lstmCellBackward(const OptT& grad_hy_opt, const OptT& grad_cy_opt, const Tensor& cx,
                                                    const Tensor& cy, const Tensor& workspace, bool has_bias) {
  const char* name = "_thnn_fused_lstm_cell_backward_impl";
  const Tensor grad_hy = valueOr(grad_hy_opt), grad_cy = valueOr(grad_cy_opt);
  if (!grad_hy.defined() && !grad_cy.defined()) return {};  // ATen's: nothing flows back
  checkGates(workspace, workspace, cx, 4, name);
  checkTensors({workspace, cx, cy, grad_hy, grad_cy}, name);
  for (const Tensor& t : {cy, grad_hy, grad_cy}) {
    TORCH_CHECK(!t.defined() || t.sizes() == cx.sizes(), name, ": expected states and their gradients of shape ",
                cx.sizes(), ", but got ", t.sizes());
  }
  const Tensor ws = workspace.contiguous(), c = cx.contiguous(), cyc = cy.contiguous();
  const Tensor ghy = grad_hy.defined() ? grad_hy.contiguous() : grad_hy;
  const Tensor gcy = grad_cy.defined() ? grad_cy.contiguous() : grad_cy;
  Tensor grad_gates = at::empty(ws.sizes(), ws.options()), grad_cx = at::empty(c.sizes(), c.options());
  RnnCellBackwardArgs a;
  a.cell = RnnCell::Lstm;
  a.dtype = toKernelDType(ws.scalar_type());
  a.batch = c.size(0);
  a.hidden = c.size(1);
  a.grad_hy = dataOrNull(ghy);
  a.grad_cy = dataOrNull(gcy);
  a.cx = c.const_data_ptr();
  a.cy = cyc.const_data_ptr();
  a.workspace = ws.const_data_ptr();
  a.grad_gates = grad_gates.data_ptr();
  a.grad_state = grad_cx.data_ptr();
  c10::DeviceGuard guard(ws.device());
  MT_RT_CHECK(kernels::rnn_cell_backward(a, streamFor(ws)));
  return {grad_gates, grad_cx, has_bias ? at::sum(grad_gates, 0) : Tensor()};
}

std::tuple<Tensor, Tensor> gruCell(const Tensor& input_gates, const Tensor& hidden_gates, const Tensor& hx,
                                   const OptT& input_bias, const OptT& hidden_bias) {
  const char* name = "_thnn_fused_gru_cell";
  checkGates(input_gates, hidden_gates, hx, 3, name);
  const Tensor bi = valueOr(input_bias), bh = valueOr(hidden_bias);
  checkTensors({input_gates, hidden_gates, hx, bi, bh}, name);
  checkBias(bi, input_gates.size(1), name);
  checkBias(bh, input_gates.size(1), name);
  const Tensor ig = input_gates.contiguous(), hg = hidden_gates.contiguous(), h = hx.contiguous();
  Tensor hy = at::empty(h.sizes(), h.options()), workspace = at::empty({h.size(0), 5 * h.size(1)}, h.options());
  RnnCellArgs a =
      forwardArgs(RnnCell::Gru, ig, hg, h, bi.defined() ? bi.contiguous() : bi, bh.defined() ? bh.contiguous() : bh);
  a.hy = hy.data_ptr();
  a.workspace = workspace.data_ptr();
  c10::DeviceGuard guard(ig.device());
  MT_RT_CHECK(kernels::rnn_cell_forward(a, streamFor(ig)));
  return {hy, workspace};
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> gruCellBackward(const Tensor& grad_hy, const Tensor& workspace,
                                                                   bool has_bias) {
  const char* name = "_thnn_fused_gru_cell_backward";
  TORCH_CHECK(grad_hy.dim() == 2 && workspace.dim() == 2 && workspace.size(0) == grad_hy.size(0) &&
                  workspace.size(1) == 5 * grad_hy.size(1),
              name, ": expected a workspace of shape [batch, 5 * hidden] for a gradient of shape ", grad_hy.sizes(),
              ", but got ", workspace.sizes());
  checkTensors({grad_hy, workspace}, name);
  const Tensor g = grad_hy.contiguous(), ws = workspace.contiguous();
  const int64_t batch = g.size(0), hidden = g.size(1);
  Tensor grad_input = at::empty({batch, 3 * hidden}, g.options());
  Tensor grad_hidden = at::empty({batch, 3 * hidden}, g.options()), grad_hx = at::empty(g.sizes(), g.options());
  RnnCellBackwardArgs a;
  a.cell = RnnCell::Gru;
  a.dtype = toKernelDType(g.scalar_type());
  a.batch = batch;
  a.hidden = hidden;
  a.grad_hy = g.const_data_ptr();
  a.workspace = ws.const_data_ptr();
  a.grad_gates = grad_input.data_ptr();
  a.grad_hidden_gates = grad_hidden.data_ptr();
  a.grad_state = grad_hx.data_ptr();
  c10::DeviceGuard guard(g.device());
  MT_RT_CHECK(kernels::rnn_cell_backward(a, streamFor(g)));
  if (!has_bias) return {grad_input, grad_hidden, grad_hx, Tensor(), Tensor()};
  return {grad_input, grad_hidden, grad_hx, at::sum(grad_input, 0), at::sum(grad_hidden, 0)};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_thnn_fused_lstm_cell", lstmCell);
  MT_IMPL(m, "_thnn_fused_lstm_cell_backward_impl", lstmCellBackward);
  MT_IMPL(m, "_thnn_fused_gru_cell", gruCell);
  MT_IMPL(m, "_thnn_fused_gru_cell_backward", gruCellBackward);
}

} // namespace mytorch
