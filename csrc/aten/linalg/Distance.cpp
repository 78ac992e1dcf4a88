// Op table: pairwise distances on mytorch — torch.cdist's _cdist_forward/_cdist_backward and torch.pdist's
// _pdist_forward/_pdist_backward (torch.cdist with p = 2 on large inputs is ATen's _euclidean_dist, already native
// GEMMs) — on the pairwise-distance kernels (kernels/include/mytorch/distance.h, Note [Pairwise distances]) for
// float32 and float64; the half types take the CPU fallback, as before.
#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_cdist_backward_ops.h>
#include <ATen/ops/_cdist_forward_ops.h>
#include <ATen/ops/_pdist_backward_ops.h>
#include <ATen/ops/_pdist_forward_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <vector>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Runtime.h"
#include "mytorch/distance.h"

namespace mytorch {
namespace {

using at::Tensor;

bool floating(const Tensor& t) { return t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble; }

DistanceArgs distanceArgs(const Tensor& x1, double p) {
  DistanceArgs a;
  a.dtype = toKernelDType(x1.scalar_type());
  a.norm = dist_norm_of(p);
  a.p = p;
  return a;
}

void launchDistance(const DistanceArgs& a, bool forward, const Tensor& like) {
  c10::DeviceGuard guard(like.device());
  if (forward) MT_RT_CHECK(kernels::distance_forward(a, streamFor(like)));
  else MT_RT_CHECK(kernels::distance_backward(a, streamFor(like)));
}

// ---- cdist: x1 [*, P, M], x2 [*, R, M] -> [*, P, R] ------------------------------------------------------------

void cdistChecks(const Tensor& x1, const Tensor& x2, double p) {
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
}

// The operands with their batch dimensions broadcast (ATen's expand_batch_portion), flattened to [B, rows, M] and
// contiguous, and the result's shape [*, P, R].
struct CdistOperands {
  Tensor x1, x2;
  std::vector<int64_t> shape;
  int64_t batch = 1;
};

CdistOperands cdistOperands(const Tensor& x1, const Tensor& x2) {
  const int64_t r1 = x1.size(-2), r2 = x2.size(-2), m = x1.size(-1);
  CdistOperands o;
  o.shape = at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  o.batch = c10::multiply_integers(o.shape);
  std::vector<int64_t> e1 = o.shape, e2 = o.shape;
  e1.insert(e1.end(), {r1, m});
  e2.insert(e2.end(), {r2, m});
  o.x1 = x1.expand(e1).reshape({o.batch, r1, m}).contiguous();
  o.x2 = x2.expand(e2).reshape({o.batch, r2, m}).contiguous();
  o.shape.insert(o.shape.end(), {r1, r2});
  return o;
}

// The kernels' arguments for the operands (the output and, for the backward, grad and dist left to the caller).
DistanceArgs cdistArgs(const CdistOperands& o, const Tensor& x1, const Tensor& x2, double p) {
  DistanceArgs a = distanceArgs(x1, p);
  a.x1 = o.x1.const_data_ptr();
  a.x2 = o.x2.const_data_ptr();
  a.batch = o.batch;
  a.r1 = x1.size(-2);
  a.r2 = x2.size(-2);
  a.m = x1.size(-1);
  return a;
}

Tensor cdistForward(const Tensor& x1, const Tensor& x2, double p, std::optional<int64_t> compute_mode) {
  if (!floating(x1) || x1.scalar_type() != x2.scalar_type())
    return Fallback<at::_ops::_cdist_forward>::call(x1, x2, p, compute_mode);
  cdistChecks(x1, x2, p);
  const CdistOperands o = cdistOperands(x1, x2);
  Tensor out = at::empty(o.shape, x1.options());
  if (out.numel() == 0) return out;
  DistanceArgs a = cdistArgs(o, x1, x2, p);
  a.out = out.data_ptr();
  launchDistance(a, /*forward=*/true, x1);
  return out;
}

// The gradient of x1, of the broadcast batch shape [*, P, M] (a zero distance contributes nothing).
Tensor cdistBackward(const Tensor& grad, const Tensor& x1, const Tensor& x2, double p, const Tensor& cdist) {
  if (!floating(x1) || x1.scalar_type() != x2.scalar_type() || grad.scalar_type() != x1.scalar_type() ||
      cdist.scalar_type() != x1.scalar_type())
    return Fallback<at::_ops::_cdist_backward>::call(grad, x1, x2, p, cdist);
  cdistChecks(x1, x2, p);
  if (p == 0 || x1.numel() == 0 || x2.size(-2) == 0) return at::zeros_like(x1);
  const CdistOperands o = cdistOperands(x1, x2);
  const Tensor g = grad.expand(o.shape).contiguous(), d = cdist.expand(o.shape).contiguous();
  std::vector<int64_t> shape(o.shape.begin(), o.shape.end() - 1);
  shape.push_back(x1.size(-1));
  Tensor out = at::empty(shape, x1.options());
  DistanceArgs a = cdistArgs(o, x1, x2, p);
  a.grad = g.const_data_ptr();
  a.dist = d.const_data_ptr();
  a.out = out.data_ptr();
  launchDistance(a, /*forward=*/false, x1);
  return out;
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

// pdist's operand as the kernels take it: one batch of n rows paired with themselves, the pairs i < j.
DistanceArgs pdistArgs(const Tensor& self, double p) {
  DistanceArgs a = distanceArgs(self, p);
  a.x1 = a.x2 = self.const_data_ptr();
  a.r1 = a.r2 = self.size(0);
  a.m = self.size(1);
  a.pairs = true;
  return a;
}

Tensor pdistForward(const Tensor& self, double p) {
  if (!floating(self)) return Fallback<at::_ops::_pdist_forward>::call(self, p);
  pdistChecks(self, p);
  const int64_t n = self.size(0);
  Tensor out = at::empty({n > 1 ? n * (n - 1) / 2 : 0}, self.options());
  if (out.numel() == 0) return out;
  DistanceArgs a = pdistArgs(self, p);
  a.out = out.data_ptr();
  launchDistance(a, /*forward=*/true, self);
  return out;
}

Tensor pdistBackward(const Tensor& grad, const Tensor& self, double p, const Tensor& pdist) {
  if (!floating(self) || grad.scalar_type() != self.scalar_type() || pdist.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::_pdist_backward>::call(grad, self, p, pdist);
  TORCH_CHECK(self.is_contiguous(), "_pdist_backward requires self to be contiguous");
  TORCH_CHECK(pdist.is_contiguous(), "_pdist_backward requires pdist to be contiguous");
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  const int64_t n = self.size(0), pairs = n > 1 ? n * (n - 1) / 2 : 0;
  TORCH_CHECK(pdist.numel() == pairs, "_pdist_backward: expected pdist of ", pairs, " elements (the pairs of ", n,
              " rows), got ", pdist.numel());
  if (p == 0 || pairs == 0 || self.size(1) == 0) return at::zeros_like(self, at::MemoryFormat::Contiguous);
  const Tensor g = grad.reshape({-1}).expand({pairs}).contiguous();
  Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  DistanceArgs a = pdistArgs(self, p);
  a.grad = g.const_data_ptr();
  a.dist = pdist.const_data_ptr();
  a.out = out.data_ptr();
  launchDistance(a, /*forward=*/false, self);
  return out;
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
