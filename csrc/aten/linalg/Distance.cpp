// Op table: pairwise distances on mytorch — torch.cdist's _cdist_forward/_cdist_backward and torch.pdist's
// _pdist_forward/_pdist_backward (torch.cdist with p = 2 on large inputs is ATen's _euclidean_dist, already native
// GEMMs) — composed from native tensor ops (Note [Composed ops]): the pairs' differences broadcast, a vector norm
// over the feature dimension, and for the gradients ATen's per-p formulas (Distance.h's one / lt_two / two / gt /
// inf, a zero distance giving a zero gradient) summed over the pairs.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_cdist_backward_ops.h>
#include <ATen/ops/_cdist_forward_ops.h>
#include <ATen/ops/_pdist_backward_ops.h>
#include <ATen/ops/_pdist_forward_ops.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/triu_indices.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Checked.h"

namespace mytorch {
namespace {

using at::Tensor;

bool floating(const Tensor& t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble; }

// d/d(diff) of |diff|_p, times grad, for every pair: ATen's CPU formulas (a zero distance contributes nothing).
Tensor pairGradient(const Tensor& grad, const Tensor& diff, const Tensor& dist, double p) {
  const Tensor zero = at::zeros({}, diff.options());
  const Tensor no_dist = dist.eq(0);
  if (p == 0) return at::zeros_like(diff);
  if (p == 1) return at::sign(diff) * grad;
  if (std::isinf(p)) return at::sign(diff) * at::eq(at::abs(diff), dist).to(diff.scalar_type()) * grad;
  if (p < 2) {
    Tensor g = at::sign(diff) * at::pow(at::abs(diff), p - 1) * grad / at::pow(dist, p - 1);
    Tensor skip = p < 1 ? (no_dist | diff.eq(0)) : no_dist.expand_as(g);
    return at::where(skip, zero, g);
  }
  if (p == 2) return at::where(no_dist, zero, grad * diff / dist);
  return at::where(no_dist, zero, diff * at::pow(at::abs(diff), p - 2) * grad / at::pow(dist, p - 1));
}

// ---- cdist: x1 [*, P, M], x2 [*, R, M] -> [*, P, R] ------------------------------------------------------------

void cdistChecks(const Tensor& x1, const Tensor& x2, double p) {
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
}

Tensor cdistForward(const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> compute_mode) {
  if (!floating(x1) || x1.scalar_type() != x2.scalar_type())
    return Fallback<at::_ops::_cdist_forward>::call(x1, x2, p, compute_mode);
  cdistChecks(x1, x2, p);
  const Tensor diff = x1.unsqueeze(-2) - x2.unsqueeze(-3);  // [*, P, R, M]
  return at::linalg_vector_norm(diff, p, {-1}, false, std::nullopt);
}

Tensor cdistBackward(const Tensor& grad, const Tensor& x1, const Tensor& x2, double p, const Tensor& cdist) {
  if (!floating(x1) || x1.scalar_type() != x2.scalar_type() || grad.scalar_type() != x1.scalar_type())
    return Fallback<at::_ops::_cdist_backward>::call(grad, x1, x2, p, cdist);
  cdistChecks(x1, x2, p);
  if (x1.numel() == 0 || x2.size(-2) == 0) return at::zeros_like(x1);
  const Tensor diff = x1.unsqueeze(-2) - x2.unsqueeze(-3);
  const Tensor g = pairGradient(grad.unsqueeze(-1), diff, cdist.unsqueeze(-1), p);
  return g.sum(-2).to(x1.scalar_type()).contiguous();
}

Tensor& cdistForwardOut(const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> compute_mode,
                        Tensor& out) {
  if (!floating(x1) || x1.scalar_type() != x2.scalar_type())
    return Fallback<at::_ops::_cdist_forward_out>::call(x1, x2, p, compute_mode, out);
  return assignExactOut(out, cdistForward(x1, x2, p, compute_mode));
}

Tensor& cdistBackwardOut(const Tensor& grad, const Tensor& x1, const Tensor& x2, double p, const Tensor& cdist,
                         Tensor& out) {
  if (!floating(x1) || x1.scalar_type() != x2.scalar_type() || grad.scalar_type() != x1.scalar_type())
    return Fallback<at::_ops::_cdist_backward_out>::call(grad, x1, x2, p, cdist, out);
  return assignExactOut(out, cdistBackward(grad, x1, x2, p, cdist));
}

// ---- pdist: x [N, M] -> the N (N - 1) / 2 distances of rows i < j, row-major -----------------------------------

void pdistChecks(const Tensor& self, double p) {
  TORCH_CHECK(self.is_contiguous(), "_pdist_forward requires contiguous input");
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
}

// The pairs (i, j), i < j, in the order of ATen's result.
std::pair<Tensor, Tensor> pairs(const Tensor& self) {
  const int64_t n = self.size(0);
  const Tensor ij = at::triu_indices(n, n, 1, self.options().dtype(at::kLong));
  return {ij[0], ij[1]};
}

Tensor pdistForward(const Tensor& self, double p) {
  if (!floating(self)) return Fallback<at::_ops::_pdist_forward>::call(self, p);
  pdistChecks(self, p);
  auto [i, j] = pairs(self);
  if (i.numel() == 0) return at::empty({0}, self.options());
  const Tensor diff = at::index_select(self, 0, i) - at::index_select(self, 0, j);
  return at::linalg_vector_norm(diff, p, {-1}, false, std::nullopt);
}

Tensor pdistBackward(const Tensor& grad, const Tensor& self, double p, const Tensor& pdist) {
  if (!floating(self) || grad.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::_pdist_backward>::call(grad, self, p, pdist);
  TORCH_CHECK(self.is_contiguous(), "_pdist_backward requires self to be contiguous");
  TORCH_CHECK(pdist.is_contiguous(), "_pdist_backward requires pdist to be contiguous");
  auto [i, j] = pairs(self);
  Tensor result = at::zeros_like(self, at::MemoryFormat::Contiguous);
  if (i.numel() == 0) return result;
  const Tensor diff = at::index_select(self, 0, i) - at::index_select(self, 0, j);
  const Tensor g = pairGradient(grad.unsqueeze(-1), diff, pdist.unsqueeze(-1), p);
  result.index_add_(0, i, g);
  result.index_add_(0, j, g, -1);
  return result;
}

Tensor& pdistForwardOut(const Tensor& self, double p, Tensor& out) {
  if (!floating(self)) return Fallback<at::_ops::_pdist_forward_out>::call(self, p, out);
  return assignExactOut(out, pdistForward(self, p));
}

Tensor& pdistBackwardOut(const Tensor& grad, const Tensor& self, double p, const Tensor& pdist, Tensor& out) {
  if (!floating(self) || grad.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::_pdist_backward_out>::call(grad, self, p, pdist, out);
  return assignExactOut(out, pdistBackward(grad, self, p, pdist));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_cdist_forward", cdistForward);
  MT_IMPL(m, "_cdist_forward.out", cdistForwardOut);
  MT_IMPL(m, "_cdist_backward", cdistBackward);
  MT_IMPL(m, "_cdist_backward.out", cdistBackwardOut);
  MT_IMPL(m, "_pdist_forward", pdistForward);
  MT_IMPL(m, "_pdist_forward.out", pdistForwardOut);
  MT_IMPL(m, "_pdist_backward", pdistBackward);
  MT_IMPL(m, "_pdist_backward.out", pdistBackwardOut);
}

} // namespace mytorch
