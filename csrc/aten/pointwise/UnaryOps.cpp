// Op table: the glue of the unary pointwise rows marked Hand in the pointwise table (extra arguments, checks or
// overloads: neg, sgn, round with decimals, nan_to_num, signbit's bool out=, the predicates without an out= form,
// polygamma, logit, angle),
// and relu, its backward and isneginf/isposinf composed from native ops. The Table rows register in PointwiseTable.cpp.
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/le.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/div.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sgn_ops.h>
#include <ATen/ops/isfinite_ops.h>
#include <ATen/ops/isinf_ops.h>
#include <ATen/ops/isnan_ops.h>
#include <ATen/ops/nan_to_num_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/round_ops.h>
#include <ATen/ops/signbit_ops.h>
#include <ATen/ops/angle_ops.h>
#include <ATen/ops/logit_backward_ops.h>
#include <ATen/ops/logit_ops.h>
#include <ATen/ops/polygamma_ops.h>
#include <ATen/ops/threshold_backward_ops.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/Pointwise.h"

namespace mytorch {
namespace {

using at::Tensor;

// sgn is sign for real dtypes; for complex, z / |z| (Complex.cpp).
Tensor& sgnOut(const Tensor& self, Tensor& out) {
  return ewOr(EwOp::Sign, {self}, out, {}, [&]() -> Tensor& { return Fallback<at::_ops::sgn_out>::call(self, out); });
}

// round(decimals) as ATen: scale by 10^|d|, round half to even, scale back (native kernels, scalars in opmath).
Tensor& roundDecimalsOut(const Tensor& self, int64_t decimals, Tensor& out) {
  // floating only, decimals=0 included (the CPU's round(int) is the identity, its round(int, decimals=0) raises)
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "round_decimals: expected a floating point tensor, got ",
              self.scalar_type());
  if (decimals == 0) return at::round_out(out, self);
  checkExactOut(out, self.scalar_type());
  const double ten = std::pow(10.0, static_cast<double>(std::abs(decimals)));
  // three engine passes in out itself, whatever its strides (out may be self: round_(decimals))
  const c10::Scalar s(ten);
  const EwOp scale = decimals > 0 ? EwOp::Mul : EwOp::Div, unscale = decimals > 0 ? EwOp::Div : EwOp::Mul;
  if (ewTry(scale, {self, s}, out)) { // then out has self's dtype and shape: the next two passes cannot decline
    TORCH_INTERNAL_ASSERT(ewTry(EwOp::Round, {out}, out) && ewTry(unscale, {out, s}, out));
    return out;
  }
  Tensor r = decimals > 0 ? at::div(at::round(at::mul(self, ten)), ten) : at::mul(at::round(at::div(self, ten)), ten);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// relu is clamp_min(x, 0) (NaN stays NaN); fused activations with their backward come with the NN kernels.
Tensor relu(const Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min(self, 0);
}
Tensor& reluInplace(Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min_(self, 0);
}

// relu's backward (grad where self > threshold, else 0), from native kernels.
// threshold_backward (ReLU's backward): the ThresholdBackward row, one pass.
Tensor& thresholdBackwardOut(const Tensor& grad, const Tensor& self, const c10::Scalar& threshold, Tensor& grad_input) {
  EwParams p;
  p.lo = threshold.toDouble();
  return ewOr(EwOp::ThresholdBackward, {grad, self}, grad_input, p, [&]() -> Tensor& {
    return Fallback<at::_ops::threshold_backward_grad_input>::call(grad, self, threshold, grad_input);
  });
}

Tensor& negOut(const Tensor& self, Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
              "use the `~` or `logical_not()` operator instead.");
  return ewOr(EwOp::Neg, {self}, out, {}, [&]() -> Tensor& { return Fallback<at::_ops::neg_out>::call(self, out); });
}

Tensor& nanToNumOut(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                    std::optional<double> neginf, Tensor& out) {
  EwParams p;
  p.nan = nan.value_or(0.0);
  double hi = std::numeric_limits<double>::max(), lo = std::numeric_limits<double>::lowest();
  switch (self.scalar_type()) {
    case at::kFloat:
      hi = std::numeric_limits<float>::max();
      lo = std::numeric_limits<float>::lowest();
      break;
    case at::kHalf:
      hi = 65504.0;
      lo = -65504.0;
      break;
    case at::kBFloat16:
      hi = 3.3895313892515355e38;
      lo = -3.3895313892515355e38;
      break;
    default: break;
  }
  p.posinf = posinf.value_or(hi);
  p.neginf = neginf.value_or(lo);
  return ewOr(EwOp::NanToNum, {self}, out, p,
              [&]() -> Tensor& { return Fallback<at::_ops::nan_to_num_out>::call(self, nan, posinf, neginf, out); });
}

// signbit: a bool out= only (ATen refuses any other).
Tensor& signbitOut(const Tensor& self, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kBool, "signbit does not support non-boolean outputs.");
  return ewOr(EwOp::Signbit, {self}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::signbit_out>::call(self, out); });
}

// The Special group's Hand rows: polygamma's order n, logit's eps and its backward; angle, whose real case is the
// Angle row and whose complex case is the CPU fallback's.
Tensor& polygammaOut(int64_t n, const Tensor& self, Tensor& out) {
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
Tensor& logitOut(const Tensor& self, std::optional<double> eps, Tensor& out) {
  return ewOr(EwOp::Logit, {self}, out, logitParams(eps),
              [&]() -> Tensor& { return Fallback<at::_ops::logit_out>::call(self, eps, out); });
}
Tensor logit(const Tensor& self, std::optional<double> eps) {
  Tensor out = at::empty({0}, self.options().dtype(ewComputeType(EwOp::Logit, {self})));
  if (!ewTry(EwOp::Logit, {self}, out, logitParams(eps))) return Fallback<at::_ops::logit>::call(self, eps);
  return out;
}
Tensor& logitInplace(Tensor& self, std::optional<double> eps) {
  return ewOr(EwOp::Logit, {self}, self, logitParams(eps),
              [&]() -> Tensor& { return Fallback<at::_ops::logit_>::call(self, eps); });
}
Tensor& logitBackwardOut(const Tensor& grad, const Tensor& self, std::optional<double> eps, Tensor& gi) {
  return ewOr(EwOp::LogitBackward, {grad, self}, gi, logitParams(eps),
              [&]() -> Tensor& { return Fallback<at::_ops::logit_backward_grad_input>::call(grad, self, eps, gi); });
}

// angle of a real tensor: pi below zero, 0 elsewhere, in the floating dtype; complex through the fallback.
Tensor& angleOut(const Tensor& self, Tensor& out) {
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

// The predicates ATen has no out= form for: a bool tensor of self's shape.
template <EwOp op, typename AtenOp>
Tensor predicate(const Tensor& self) {
  // self's layout, as TensorIterator's result: a transposed input is then one dense pass, not a transposing walk
  Tensor out = at::empty_like(self, self.options().dtype(at::kBool));
  if (!ewTry(op, {self}, out)) return Fallback<AtenOp>::call(self);
  return out;
}
Tensor isnan(const Tensor& self) { return predicate<EwOp::IsNan, at::_ops::isnan>(self); }
Tensor isinf(const Tensor& self) { return predicate<EwOp::IsInf, at::_ops::isinf>(self); }
Tensor isfinite(const Tensor& self) { return predicate<EwOp::IsFinite, at::_ops::isfinite>(self); }

// isneginf / isposinf (used by the math SDPA path's safe softmax): comparisons with -inf / +inf on the
// native kernels; integers and bools are never infinite.
Tensor& isInfSigned(const Tensor& self, bool negative, Tensor& out) {
  TORCH_CHECK(!self.is_complex(), negative ? "isneginf" : "isposinf", " does not support complex inputs.");
  TORCH_CHECK(out.scalar_type() == at::kBool, negative ? "isneginf" : "isposinf",
              " does not support non-boolean outputs.");
  at::native::resize_output(out, self.sizes());
  if (!at::isFloatingType(self.scalar_type())) return out.fill_(false);
  return at::eq_out(out, self,
                    negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
}
Tensor& isneginfOut(const Tensor& self, Tensor& out) { return isInfSigned(self, true, out); }
Tensor& isposinfOut(const Tensor& self, Tensor& out) { return isInfSigned(self, false, out); }

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL_ENGINE_OUT(m, "neg.out", negOut);
  MT_IMPL_ENGINE_OUT(m, "sgn.out", sgnOut);
  MT_IMPL_ENGINE_OUT(m, "round.decimals_out", roundDecimalsOut);
  MT_IMPL(m, "relu", relu);
  MT_IMPL(m, "relu_", reluInplace);
  MT_IMPL_ENGINE_OUT(m, "threshold_backward.grad_input", thresholdBackwardOut);
  MT_IMPL_ENGINE_OUT(m, "nan_to_num.out", nanToNumOut);
  MT_IMPL_ENGINE_OUT(m, "signbit.out", signbitOut);
  MT_IMPL_ENGINE_OUT(m, "polygamma.out", polygammaOut);
  MT_IMPL_ENGINE_OUT(m, "logit.out", logitOut);
  MT_IMPL(m, "logit", logit);
  MT_IMPL(m, "logit_", logitInplace);
  MT_IMPL(m, "logit_backward.grad_input", logitBackwardOut);
  MT_IMPL_ENGINE_OUT(m, "angle.out", angleOut);
  MT_IMPL(m, "angle", angle);
  MT_IMPL(m, "isnan", isnan);
  MT_IMPL(m, "isinf", isinf);
  MT_IMPL(m, "isfinite", isfinite);
  MT_IMPL_ENGINE_OUT(m, "isneginf.out", isneginfOut);
  MT_IMPL_ENGINE_OUT(m, "isposinf.out", isposinfOut);
}

} // namespace mytorch
