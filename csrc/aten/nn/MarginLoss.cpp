// Op table: multi_margin_loss and multilabel_margin_loss, forward and backward, composed from native kernels
// (Note [Composed ops]).
//
// Per sample n with target y: sum over classes i != y of max(0, margin - x[y] + x[i])^p, times weight[y], over
// the number of classes C; then ATen's reduction. The backward is ATen's: each active class i gets
// (p == 1 ? 1 : 2 z) * weight[y] / C (and / N for a mean), the target class minus their sum, times the incoming
// gradient. Computed in double (ATen's CPU kernel accumulates in its acc_type) and rounded once. What the
// composition does not cover takes the CPU's kernel, counted as a fallback: the half types (the CPU has no
// kernel for them: its refusal), p other than 1 and 2, inconsistent shapes, an empty batch, targets out of range
// (found with one host read, as ATen's CUDA kernel asserts on the device) -- each the CPU's error or result.
//
// multilabel_margin_loss: sample n's targets are the entries of target[n] before the first -1; its loss
// is the sum over those targets y_j (repeats counted again, as ATen's loop does) and over the classes i that are no
// target of max(0, 1 - x[y_j] + x[i]), over C, in double; is_target marks the target classes (the input's dtype).
// The backward gives each such active pair +g to x[i] and -g to x[y_j] (g = 1 / C, / N for a mean, times the
// incoming gradient). The pairs are a (N, C targets, C classes) tensor: memory C times the input's.
#include <ATen/TensorOperators.h>
#include <ATen/core/Reduction.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/multi_margin_loss_backward_ops.h>
#include <ATen/ops/multi_margin_loss_ops.h>
#include <ATen/ops/multilabel_margin_loss_backward_ops.h>
#include <ATen/ops/multilabel_margin_loss_forward_ops.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Checked.h"

namespace mytorch {
namespace {

using at::Tensor;

struct Margin {
  int64_t frames = 0, classes = 0;
  Tensor x, target, weight;  // x: (frames, classes) double; target: (frames, 1) int64; weight: (frames, 1) or none
  Tensor z, active;          // margin - x[y] + x[i], and where it counts (z > 0, i != y)
};

// The composition's view of the arguments, or nullopt where the CPU's kernel must answer.
std::optional<Margin> marginOf(const Tensor& self, const Tensor& target, const c10::Scalar& p,
                               const c10::Scalar& margin, const std::optional<Tensor>& weight) {
  const auto dtype = self.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) return std::nullopt;
  if (p.toDouble() != 1.0 && p.toDouble() != 2.0) return std::nullopt;
  Margin m;
  if (self.dim() == 2 && self.size(1) != 0) {
    m.frames = self.size(0);
    m.classes = self.size(1);
  } else if (self.dim() <= 1 && self.numel() != 0) {
    m.frames = 1;
    m.classes = self.dim() == 0 ? 1 : self.size(0);
  } else {
    return std::nullopt;
  }
  if (m.frames == 0 || target.dim() > 1 || target.numel() != m.frames || target.scalar_type() != at::kLong)
    return std::nullopt;
  const bool weighted = weight.has_value() && weight->defined();
  if (weighted && (weight->dim() > 1 || weight->numel() != m.classes || weight->device() != self.device()))
    return std::nullopt;
  m.target = target.reshape({m.frames, 1});
  if (at::logical_or(m.target < 0, m.target >= m.classes).any().item<bool>()) return std::nullopt;
  m.x = self.reshape({m.frames, m.classes}).to(at::kDouble);
  if (weighted)
    m.weight = weight->reshape({m.classes}).to(at::kDouble).index_select(0, m.target.view({-1})).view({-1, 1});
  m.z = m.x.gather(1, m.target).neg_().add_(margin.toDouble()) + m.x;
  const Tensor classes = at::arange(m.classes, m.target.options()).view({1, m.classes});
  m.active = (m.z > 0).logical_and_(classes != m.target);
  return m;
}

Tensor multiMarginLoss(const Tensor& self, const Tensor& target, const c10::Scalar& p, const c10::Scalar& margin,
                       const std::optional<Tensor>& weight, int64_t reduction) {
  const auto m = marginOf(self, target, p, margin, weight);
  if (!m || reduction < 0 || reduction > 2)
    return Fallback<at::_ops::multi_margin_loss>::call(self, target, p, margin, weight, reduction);
  Tensor h = at::where(m->active, p.toDouble() == 1.0 ? m->z : m->z * m->z, 0.0);
  if (m->weight.defined()) h = h * m->weight;
  Tensor loss = h.sum(1) / static_cast<double>(m->classes);
  if (reduction == at::Reduction::Mean) loss = loss.sum() / static_cast<double>(m->frames);
  else if (reduction == at::Reduction::Sum) loss = loss.sum();
  else if (target.dim() == 0) loss = loss.reshape({});
  return loss.to(self.scalar_type());
}

Tensor multiMarginLossBackward(const Tensor& grad, const Tensor& self, const Tensor& target, const c10::Scalar& p,
                               const c10::Scalar& margin, const std::optional<Tensor>& weight, int64_t reduction) {
  const auto m = marginOf(self, target, p, margin, weight);
  const bool perFrame = reduction == at::Reduction::None && target.dim() > 0;
  if (!m || reduction < 0 || reduction > 2 || grad.numel() != (perFrame ? m->frames : 1))
    return Fallback<at::_ops::multi_margin_loss_backward>::call(grad, self, target, p, margin, weight, reduction);
  const double g = 1.0 / static_cast<double>(m->classes * (reduction == at::Reduction::Mean ? m->frames : 1));
  Tensor h = at::where(m->active, p.toDouble() == 1.0 ? at::ones_like(m->z) * g : m->z * (2.0 * g), 0.0);
  if (m->weight.defined()) h = h * m->weight;
  Tensor gi = h.scatter_add(1, m->target, h.sum(1, true).neg_());
  gi = gi * grad.to(at::kDouble).reshape({perFrame ? m->frames : 1, 1});
  return gi.to(self.scalar_type()).reshape(self.sizes());
}

struct Multilabel {
  int64_t frames = 0, classes = 0;
  Tensor x, target, slot;  // x: (frames, classes) double; target: (frames, classes) clamped at 0; slot: valid
  Tensor is_target;        // (frames, classes) double
};

// The composition's view of multilabel_margin_loss's arguments, or nullopt where the CPU's kernel must answer
// (shapes ATen refuses or reads oddly, the half types, entries outside [-1, C): its error).
std::optional<Multilabel> multilabelOf(const Tensor& self, const Tensor& target) {
  const auto dtype = self.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble) return std::nullopt;
  if (target.scalar_type() != at::kLong || target.sizes() != self.sizes() || self.dim() > 2) return std::nullopt;
  Multilabel m;
  m.frames = self.dim() == 2 ? self.size(0) : 1;
  m.classes = self.dim() == 0 ? 1 : self.size(-1);
  if (m.frames == 0 || m.classes == 0) return std::nullopt;
  const Tensor t = target.reshape({m.frames, m.classes});
  // every entry in [-1, C) (ATen's check, past the end too); the targets are the entries before the first -1
  if (at::logical_or(t < -1, t >= m.classes).any().item<bool>()) return std::nullopt;
  m.slot = t.ge(0).cumprod(1).to(at::kBool);
  m.target = at::where(m.slot, t, 0);
  m.x = self.reshape({m.frames, m.classes}).to(at::kDouble);
  m.is_target = at::zeros({m.frames, m.classes}, m.x.options()).scatter_add_(1, m.target, m.slot.to(at::kDouble));
  m.is_target = m.is_target.gt(0).to(at::kDouble);
  return m;
}

// The active pairs (frames, target slot j, class i) of max(0, 1 - x[y_j] + x[i]), with their margins.
std::pair<Tensor, Tensor> multilabelPairs(const Multilabel& m, const Tensor& is_target) {
  const Tensor z = (m.x.gather(1, m.target).neg_().add_(1.0)).unsqueeze(2) + m.x.unsqueeze(1);
  const Tensor active = (z > 0).logical_and_(m.slot.unsqueeze(2)).logical_and_(is_target.eq(0).unsqueeze(1));
  return {z, active};
}

std::tuple<Tensor, Tensor> multilabelMarginLoss(const Tensor& self, const Tensor& target, int64_t reduction) {
  const auto m = multilabelOf(self, target);
  if (!m || reduction < 0 || reduction > 2)
    return Fallback<at::_ops::multilabel_margin_loss_forward>::call(self, target, reduction);
  const auto [z, active] = multilabelPairs(*m, m->is_target);
  Tensor loss = at::where(active, z, 0.0).sum({1, 2}) / static_cast<double>(m->classes);
  if (reduction == at::Reduction::Mean) loss = loss.sum() / static_cast<double>(m->frames);
  else if (reduction == at::Reduction::Sum) loss = loss.sum();
  else if (self.dim() <= 1) loss = loss.reshape({});
  return {loss.to(self.scalar_type()), m->is_target.to(self.scalar_type()).reshape(self.sizes())};
}

Tensor multilabelMarginLossBackward(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction,
                                    const Tensor& is_target) {
  const auto m = multilabelOf(self, target);
  const bool perFrame = reduction == at::Reduction::None && self.dim() == 2;
  if (!m || reduction < 0 || reduction > 2 || grad.numel() != (perFrame ? m->frames : 1) ||
      is_target.sizes() != self.sizes() || is_target.device() != self.device())
    return Fallback<at::_ops::multilabel_margin_loss_backward>::call(grad, self, target, reduction, is_target);
  const auto [z, active] = multilabelPairs(*m, is_target.reshape({m->frames, m->classes}).to(at::kDouble));
  const double g = 1.0 / static_cast<double>(m->classes * (reduction == at::Reduction::Mean ? m->frames : 1));
  const Tensor a = active.to(at::kDouble);
  Tensor gi = a.sum(1).mul_(g).scatter_add_(1, m->target, a.sum(2).mul_(-g));
  gi = gi * grad.to(at::kDouble).reshape({perFrame ? m->frames : 1, 1});
  return gi.to(self.scalar_type()).reshape(self.sizes());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "multi_margin_loss", multiMarginLoss);
  MT_IMPL(m, "multi_margin_loss_backward", multiMarginLossBackward);
  MT_IMPL(m, "multilabel_margin_loss_forward", multilabelMarginLoss);
  MT_IMPL(m, "multilabel_margin_loss_backward", multilabelMarginLossBackward);
}

} // namespace
} // namespace mytorch
