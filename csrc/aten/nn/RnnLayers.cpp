// Op table: the whole-sequence LSTM and GRU (aten::lstm.input, aten::gru.input: nn.LSTM, nn.GRU).
//
// Note [Whole-sequence RNN layers]
// ATen's composite RNN (RNN.cpp) projects every step's input in one GEMM over the whole sequence only for CPU
// tensors (FullLayer: inputs.device().is_cpu()); for every other device it runs two GEMMs per step, the input's and
// the hidden state's, each of batch rows only (16 rows: half the CPU BLAS's rate of a 1024-row GEMM). Here, per
// layer and direction: the input projection of all steps is one GEMM (x @ W_ih^T), then each step one GEMM of the
// hidden state (h @ W_hh^T) and the fused cell (_thnn_fused_lstm_cell / _thnn_fused_gru_cell, Rnn.cpp), which adds
// both biases as torch.cuda's does, so the bias gradients are the cell's own. Registered at AutogradPrivateUse1
// (and PrivateUse1, for inference mode) and composed of differentiable ops, as ATen's composite is: autograd
// records the same cell nodes, and unbind/stack as the composite (one node each, not one per step). The layer
// stacking, the dropout between layers (train only), bidirectional concatenation and batch_first are ATen's. What
// this does not cover (projections, proj_size > 0; unbatched, empty or non-floating input) runs ATen's composite.
#include <ATen/core/Tensor.h>
#include <ATen/ops/_thnn_fused_gru_cell.h>
#include <ATen/ops/_thnn_fused_lstm_cell.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/dropout.h>
#include <ATen/ops/gru_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/lstm_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/unbind.h>
#include <torch/library.h>

#include <vector>

namespace mytorch {
namespace {

using at::Tensor;
using at::TensorList;

// One layer's weights for one direction: W_ih, W_hh and, with biases, b_ih and b_hh.
struct Weights { Tensor w_ih, w_hh, b_ih, b_hh; };

Weights weightsAt(TensorList params, bool has_biases, int64_t index) {
  const int64_t k = has_biases ? 4 : 2;
  return {params[index * k], params[index * k + 1], has_biases ? params[index * k + 2] : Tensor(),
          has_biases ? params[index * k + 3] : Tensor()};
}

std::optional<Tensor> opt(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

// Whether the fast layers apply: a batched floating input of at least one step, 2 or 4 tensors per layer and
// direction (no projections).
bool covered(const Tensor& input, TensorList params, bool has_biases, int64_t num_layers, bool bidirectional,
             bool batch_first) {
  const int64_t per = has_biases ? 4 : 2, dirs = bidirectional ? 2 : 1;
  return input.dim() == 3 && input.size(batch_first ? 1 : 0) > 0 && at::isFloatingType(input.scalar_type()) &&
         static_cast<int64_t>(params.size()) == num_layers * dirs * per;
}

// The layers of Note [Whole-sequence RNN layers]; State: the per-(layer, direction) hidden state(s), Step:
// (input gates of the step, weights, state) -> new state, whose first tensor is the step's output.
template <typename State, typename Step>
Tensor runLayers(const Tensor& input, const std::vector<State>& initial, TensorList params, bool has_biases,
                 int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first,
                 std::vector<State>& final_states, const Step& step) {
  const int64_t dirs = bidirectional ? 2 : 1;
  Tensor layer_input = batch_first ? input.transpose(0, 1) : input;  // [T, B, I]
  for (int64_t l = 0; l < num_layers; ++l) {
    std::vector<Tensor> outputs;
    for (int64_t d = 0; d < dirs; ++d) {
      const Weights w = weightsAt(params, has_biases, l * dirs + d);
      const std::vector<Tensor> gates = at::unbind(at::matmul(layer_input, w.w_ih.t()), 0);
      const int64_t steps = static_cast<int64_t>(gates.size());
      std::vector<Tensor> out(gates.size());
      State state = initial[l * dirs + d];
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t t = d == 0 ? s : steps - 1 - s;
        state = step(gates[t], w, state);
        out[t] = std::get<0>(state);
      }
      outputs.push_back(at::stack(out, 0));
      final_states.push_back(state);
    }
    layer_input = dirs == 1 ? outputs[0] : at::cat(outputs, -1);
    if (dropout != 0 && train && l < num_layers - 1) layer_input = at::dropout(layer_input, dropout, true);
  }
  return batch_first ? layer_input.transpose(0, 1) : layer_input;
}

std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, TensorList hx, TensorList params, bool has_biases,
                                        int64_t num_layers, double dropout, bool train, bool bidirectional,
                                        bool batch_first) {
  if (hx.size() != 2 || hx[0].sizes() != hx[1].sizes() ||
      !covered(input, params, has_biases, num_layers, bidirectional, batch_first)) {
    return at::compositeimplicitautograd::lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                               batch_first);
  }
  using State = std::tuple<Tensor, Tensor>;
  const std::vector<Tensor> h0 = at::unbind(hx[0], 0), c0 = at::unbind(hx[1], 0);
  std::vector<State> initial, final_states;
  for (size_t i = 0; i < h0.size(); ++i) initial.emplace_back(h0[i], c0[i]);
  Tensor output = runLayers(input, initial, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                            final_states, [](const Tensor& gates, const Weights& w, const State& s) {
                              auto r = at::_thnn_fused_lstm_cell(gates, at::matmul(std::get<0>(s), w.w_hh.t()),
                                                                 std::get<1>(s), opt(w.b_ih), opt(w.b_hh));
                              return State(std::get<0>(r), std::get<1>(r));
                            });
  std::vector<Tensor> hy, cy;
  for (const State& s : final_states) {
    hy.push_back(std::get<0>(s));
    cy.push_back(std::get<1>(s));
  }
  return {output, at::stack(hy, 0), at::stack(cy, 0)};
}

std::tuple<Tensor, Tensor> gru(const Tensor& input, const Tensor& hx, TensorList params, bool has_biases,
                               int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first) {
  if (!covered(input, params, has_biases, num_layers, bidirectional, batch_first)) {
    return at::compositeimplicitautograd::gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                              batch_first);
  }
  using State = std::tuple<Tensor>;
  std::vector<State> initial, final_states;
  for (const Tensor& h : at::unbind(hx, 0)) initial.emplace_back(h);
  Tensor output = runLayers(input, initial, params, has_biases, num_layers, dropout, train, bidirectional, batch_first,
                            final_states, [](const Tensor& gates, const Weights& w, const State& s) {
                              const Tensor& h = std::get<0>(s);
                              return State(std::get<0>(at::_thnn_fused_gru_cell(gates, at::matmul(h, w.w_hh.t()), h,
                                                                                opt(w.b_ih), opt(w.b_hh))));
                            });
  std::vector<Tensor> hy;
  for (const State& s : final_states) hy.push_back(std::get<0>(s));
  return {output, at::stack(hy, 0)};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("lstm.input", TORCH_FN(lstm));
  m.impl("gru.input", TORCH_FN(gru));
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("lstm.input", TORCH_FN(lstm));
  m.impl("gru.input", TORCH_FN(gru));
}

} // namespace mytorch
