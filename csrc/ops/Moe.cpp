// The MoE routing ops (Note [Fused MoE routing] in kernels/include/mytorch/moe.h): the mytorch kernels (schemas:
// Library.cpp). Autograd, the fake kernels, the CPU implementations and the permutation (a composition of native ops) are in
// python/mytorch/ops/moe.py.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <string_view>
#include <tuple>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/core/Runtime.h"
#include "mytorch/moe.h"

namespace mytorch {
namespace {

using at::Tensor;

MoeScore moeScore(std::string_view name) {
  if (name == "softmax") return MoeScore::Softmax;
  if (name == "sigmoid") return MoeScore::Sigmoid;
  TORCH_CHECK(false, "mytorch::moe_topk: expected score 'softmax' or 'sigmoid', but got '", name, "'");
}

Tensor routerLogits(const Tensor& logits, int64_t k, const char* op) {
  TORCH_CHECK(logits.dim() == 2, op, ": expected router logits [tokens, experts], but got ", logits.sizes());
  TORCH_CHECK(kernelFloating(logits.scalar_type()), op, ": expected floating logits, but got ", logits.scalar_type());
  const int64_t e = logits.size(1);
  TORCH_CHECK(e >= 1 && e <= kMoeMaxExperts, op, ": expected 1 to ", kMoeMaxExperts, " experts, but got ", e);
  TORCH_CHECK(k >= 1 && k <= e && k <= kMoeMaxTopk, op, ": expected 1 <= k <= min(experts, ", kMoeMaxTopk,
              "), but got k = ", k, " with ", e, " experts");
  return logits.stride(1) == 1 ? logits : logits.contiguous();
}

MoeTopkArgs topkArgs(const Tensor& x, int64_t k, c10::string_view score, bool renormalize, double scaling) {
  MoeTopkArgs a;
  a.logits = x.data_ptr();
  a.tokens = x.size(0);
  a.experts = x.size(1);
  a.ld = x.size(0) > 1 ? x.stride(0) : a.experts;
  a.dtype = toKernelDType(x.scalar_type());
  a.k = static_cast<int>(k);
  a.score = moeScore(score);
  a.renormalize = renormalize;
  a.scaling = scaling;
  return a;
}

std::tuple<Tensor, Tensor> moeTopk(const Tensor& logits, int64_t k, c10::string_view score, bool renormalize,
                                   const std::optional<Tensor>& expert_bias, int64_t n_group, int64_t topk_group,
                                   int64_t group_top, double scaling) {
  const char* op = "mytorch::moe_topk";
  const Tensor x = routerLogits(logits, k, op);
  MoeTopkArgs a = topkArgs(x, k, score, renormalize, scaling);
  TORCH_CHECK(n_group >= 1 && n_group <= 32 && a.experts % n_group == 0, op,
              ": expected n_group between 1 and 32 dividing the experts (", a.experts, "), but got ", n_group);
  TORCH_CHECK(topk_group >= 1 && topk_group <= n_group, op, ": expected 1 <= topk_group <= n_group (", n_group,
              "), but got ", topk_group);
  TORCH_CHECK(group_top == 1 || group_top == 2, op, ": expected group_top 1 (max) or 2 (sum of the two largest)");
  TORCH_CHECK(n_group == 1 || a.experts / n_group >= group_top, op, ": expected at least ", group_top,
              " experts per group");
  Tensor bias;
  if (expert_bias.has_value() && expert_bias->defined()) {
    TORCH_CHECK(expert_bias->dim() == 1 && expert_bias->size(0) == a.experts && expert_bias->device() == x.device(), op,
                ": expected expert_bias [", a.experts, "] on ", x.device(), ", but got ", expert_bias->sizes(), " on ",
                expert_bias->device());
    bias = expert_bias->to(at::kFloat).contiguous();
    a.bias = bias.data_ptr<float>();
  }
  a.n_group = static_cast<int>(n_group);
  a.topk_group = static_cast<int>(topk_group);
  a.group_top = static_cast<int>(group_top);
  Tensor weights = at::empty({a.tokens, k}, x.options().dtype(at::kFloat));
  Tensor ids = at::empty({a.tokens, k}, x.options().dtype(at::kLong));
  a.weights = weights.data_ptr<float>();
  a.ids = ids.data_ptr<int64_t>();
  c10::DeviceGuard guard(x.device());
  MT_RT_CHECK(kernels::moe_topk(a, streamFor(weights)));
  return {weights, ids};
}

Tensor moeTopkBackward(const Tensor& grad_weights, const Tensor& logits, const Tensor& ids, int64_t k,
                       c10::string_view score, bool renormalize, double scaling) {
  const char* op = "mytorch::moe_topk_backward";
  const Tensor x = routerLogits(logits, k, op);
  const std::vector<int64_t> shape{x.size(0), k};
  TORCH_CHECK(grad_weights.sizes() == at::IntArrayRef(shape) && ids.sizes() == at::IntArrayRef(shape) &&
                  ids.scalar_type() == at::kLong && grad_weights.device() == x.device() && ids.device() == x.device(),
              op, ": expected grad_weights and Long ids of shape ", at::IntArrayRef(shape), " on ", x.device());
  MoeTopkArgs a = topkArgs(x, k, score, renormalize, scaling);
  const Tensor g = grad_weights.to(at::kFloat).contiguous(), id = ids.contiguous();
  Tensor dx = at::empty({a.tokens, a.experts}, x.options());
  a.dweights = g.data_ptr<float>();
  a.ids_in = id.data_ptr<int64_t>();
  a.dlogits = dx.data_ptr();
  c10::DeviceGuard guard(x.device());
  MT_RT_CHECK(kernels::moe_topk_backward(a, streamFor(dx)));
  return dx;
}

// rows [S, cols] (contiguous), pos [tokens, k] (Long), weights [tokens, k] (float) or absent.
MoeCombineArgs combineArgs(const Tensor& rows, const Tensor& pos, const std::optional<Tensor>& weights, Tensor* keep_w,
                           const char* op) {
  TORCH_CHECK(rows.dim() == 2, op, ": expected rows [S, hidden], but got ", rows.sizes());
  TORCH_CHECK(kernelFloating(rows.scalar_type()), op, ": expected floating rows, but got ", rows.scalar_type());
  TORCH_CHECK(pos.dim() == 2 && pos.scalar_type() == at::kLong && pos.device() == rows.device(), op,
              ": expected Long positions [tokens, k] on ", rows.device(), ", but got ", pos.scalar_type(), " ",
              pos.sizes(), " on ", pos.device());
  TORCH_CHECK(pos.size(1) <= kMoeMaxTopk, op, ": expected at most ", kMoeMaxTopk, " slots a token, but got ",
              pos.size(1));
  MoeCombineArgs a;
  if (weights.has_value() && weights->defined()) {
    TORCH_CHECK(weights->sizes() == pos.sizes() && weights->device() == rows.device(), op, ": expected weights of ",
                "the positions' shape ", pos.sizes(), " on ", rows.device(), ", but got ", weights->sizes(), " on ",
                weights->device());
    *keep_w = weights->to(at::kFloat).contiguous();
    a.weights = keep_w->data_ptr<float>();
  }
  a.pos = pos.data_ptr<int64_t>();
  a.tokens = pos.size(0);
  a.k = pos.size(1);
  a.cols = rows.size(1);
  a.num_rows = rows.size(0);
  a.dtype = toKernelDType(rows.scalar_type());
  a.error = deviceErrorSite(rows.device(), op, DeviceErrorFormat::IndexOutOfBounds, true, 0, a.num_rows);
  return a;
}

Tensor moeCombine(const Tensor& rows_in, const Tensor& pos_in, const std::optional<Tensor>& weights) {
  const char* op = "mytorch::moe_combine";
  const Tensor rows = rows_in.contiguous(), pos = pos_in.contiguous();
  Tensor w;
  MoeCombineArgs a = combineArgs(rows, pos, weights, &w, op);
  Tensor out = at::empty({a.tokens, a.cols}, rows.options());
  a.rows = rows.data_ptr();
  a.out = out.data_ptr();
  c10::DeviceGuard guard(rows.device());
  MT_RT_CHECK(kernels::moe_combine(a, streamFor(out)));
  afterErrorCheckedLaunch(rows.device()); // Note [Device-side errors]
  return out;
}

std::tuple<Tensor, Tensor> moeCombineBackward(const Tensor& grad_in, const Tensor& rows_in, const Tensor& pos_in,
                                              const std::optional<Tensor>& weights, bool rows_grad, bool weights_grad) {
  const char* op = "mytorch::moe_combine_backward";
  const Tensor rows = rows_in.contiguous(), pos = pos_in.contiguous(), grad = grad_in.contiguous();
  Tensor w;
  MoeCombineArgs a = combineArgs(rows, pos, weights, &w, op);
  TORCH_CHECK(grad.dim() == 2 && grad.size(0) == a.tokens && grad.size(1) == a.cols &&
                  grad.scalar_type() == rows.scalar_type() && grad.device() == rows.device(),
              op, ": expected grad [", a.tokens, ", ", a.cols, "] like rows, but got ", grad.sizes());
  // (an output not asked for is empty; rows no slot names keep a zero gradient)
  const bool want_dw = weights_grad && a.weights;
  Tensor drows = rows_grad ? at::zeros(rows.sizes(), rows.options()) : at::empty({0}, rows.options());
  Tensor dw = at::empty({want_dw ? a.tokens : 0, want_dw ? a.k : 0}, rows.options().dtype(at::kFloat));
  a.rows = rows.data_ptr();
  a.dout = grad.data_ptr();
  a.drows = rows_grad ? drows.data_ptr() : nullptr;
  a.dweights = want_dw ? dw.data_ptr<float>() : nullptr;
  c10::DeviceGuard guard(rows.device());
  MT_RT_CHECK(kernels::moe_combine_backward(a, streamFor(rows)));
  afterErrorCheckedLaunch(rows.device());
  return {drows, dw};
}

} // namespace

TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) {
  m.impl("moe_topk", TORCH_FN(moeTopk));
  m.impl("moe_topk_backward", TORCH_FN(moeTopkBackward));
  m.impl("moe_combine", TORCH_FN(moeCombine));
  m.impl("moe_combine_backward", TORCH_FN(moeCombineBackward));
}

} // namespace mytorch
