// Op table: the glue of the Special group's rows marked Hand in the pointwise table (polygamma's order n, logit's
// eps and its backward), and of angle, whose real case is the Angle row and whose complex case is the CPU
// fallback's. The Table rows (digamma, zeta, i0, erfcx, ndtri, xlogy...) register in PointwiseTable.cpp.
#include <ATen/core/Tensor.h>
#include <ATen/ops/angle_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/logit_backward_ops.h>
#include <ATen/ops/logit_ops.h>
#include <ATen/ops/polygamma_ops.h>
#include <torch/library.h>

#include <optional>

#include "csrc/core/Checked.h"
#include "csrc/aten/Glue.h"
#include "csrc/aten/Pointwise.h"

namespace mytorch {
namespace {

using at::Tensor;

Tensor& polygamma_out(int64_t n, const Tensor& self, Tensor& out) {
  EwParams p;
  p.ialpha = n;
  // a negative order: ATen's own message, from the fallback
  if (n < 0 || !ewTry(EwOp::Polygamma, {self}, out, p)) return Fallback<at::_ops::polygamma_out>::call(n, self, out);
  return out;
}

// eps: clamp the input to [eps, 1 - eps] first (ATen ignores a negative eps).
EwParams logitParams(std::optional<double> eps) {
  EwParams p;
  p.has_lo = eps.has_value() && *eps >= 0;
  p.lo = p.has_lo ? *eps : 0;
  return p;
}
Tensor& logit_out(const Tensor& self, std::optional<double> eps, Tensor& out) {
  return ewOr(EwOp::Logit, {self}, out, logitParams(eps),
              [&]() -> Tensor& { return Fallback<at::_ops::logit_out>::call(self, eps, out); });
}
Tensor logit(const Tensor& self, std::optional<double> eps) {
  Tensor out = at::empty({0}, self.options().dtype(ewComputeType(EwOp::Logit, {self})));
  if (!ewTry(EwOp::Logit, {self}, out, logitParams(eps))) return Fallback<at::_ops::logit>::call(self, eps);
  return out;
}
Tensor& logit_(Tensor& self, std::optional<double> eps) {
  return ewOr(EwOp::Logit, {self}, self, logitParams(eps),
              [&]() -> Tensor& { return Fallback<at::_ops::logit_>::call(self, eps); });
}
Tensor& logit_backward_out(const Tensor& grad, const Tensor& self, std::optional<double> eps, Tensor& gi) {
  return ewOr(EwOp::LogitBackward, {grad, self}, gi, logitParams(eps),
              [&]() -> Tensor& { return Fallback<at::_ops::logit_backward_grad_input>::call(grad, self, eps, gi); });
}

// angle of a real tensor: pi below zero, 0 elsewhere, in the floating dtype; complex through the fallback.
Tensor& angle_out(const Tensor& self, Tensor& out) {
  if (self.is_complex()) return Fallback<at::_ops::angle_out>::call(self, out);
  return ewOr(EwOp::Angle, {self}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::angle_out>::call(self, out); });
}
Tensor angle(const Tensor& self) {
  if (self.is_complex()) return Fallback<at::_ops::angle>::call(self);
  Tensor out = at::empty({0}, self.options().dtype(ewComputeType(EwOp::Angle, {self})));
  if (!ewTry(EwOp::Angle, {self}, out)) return Fallback<at::_ops::angle>::call(self);
  return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "polygamma.out", polygamma_out);
  MT_IMPL(m, "logit.out", logit_out);
  MT_IMPL(m, "logit", logit);
  MT_IMPL(m, "logit_", logit_);
  MT_IMPL(m, "logit_backward.grad_input", logit_backward_out);
  MT_IMPL(m, "angle.out", angle_out);
  MT_IMPL(m, "angle", angle);
}

} // namespace mytorch
