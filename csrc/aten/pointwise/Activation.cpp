// Op table: the glue of the NN rows marked Hand in the pointwise table (activations with parameters or extra
// forms, their backwards, and the pointwise losses mse, smooth_l1, huber, binary_cross_entropy and their
// backwards), on the elementwise engine (math in kernels' ops_nn.h); the losses' reductions use the native
// mean/sum. Non-floating inputs take the counted CPU fallback. The Table rows register in PointwiseTable.cpp.
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/any.h>
#include <ATen/ops/binary_cross_entropy_backward_ops.h>
#include <ATen/ops/binary_cross_entropy_ops.h>
#include <ATen/ops/elu_backward_ops.h>
#include <ATen/ops/elu_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu_backward_ops.h>
#include <ATen/ops/gelu_ops.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/hardswish_backward_ops.h>
#include <ATen/ops/hardswish_ops.h>
#include <ATen/ops/hardtanh_backward_ops.h>
#include <ATen/ops/hardshrink_backward_ops.h>
#include <ATen/ops/hardshrink_ops.h>
#include <ATen/ops/softshrink_backward_ops.h>
#include <ATen/ops/softshrink_ops.h>
#include <ATen/ops/threshold_ops.h>
#include <ATen/ops/hardtanh_ops.h>
#include <ATen/ops/huber_loss_backward_ops.h>
#include <ATen/ops/huber_loss_ops.h>
#include <ATen/ops/leaky_relu_backward_ops.h>
#include <ATen/ops/leaky_relu_ops.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/log_sigmoid_backward_ops.h>
#include <ATen/ops/log_sigmoid_forward_ops.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/mean.h>
#include <ATen/ops/mish_backward_ops.h>
#include <ATen/ops/mish_ops.h>
#include <ATen/ops/mse_loss_backward_ops.h>
#include <ATen/ops/mse_loss_ops.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/silu_backward_ops.h>
#include <ATen/ops/smooth_l1_loss_backward_ops.h>
#include <ATen/ops/smooth_l1_loss_ops.h>
#include <ATen/ops/softplus_backward_ops.h>
#include <ATen/ops/softplus_ops.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/Pointwise.h"

namespace mytorch {
namespace {

using at::Tensor;
using c10::Scalar;

Tensor hardswish(const Tensor& self) {
  Tensor out = at::empty({0}, self.options());
  if (!ewTry(EwOp::Hardswish, {self}, out)) return Fallback<at::_ops::hardswish>::call(self);
  return out;
}
Tensor& hardswishInplace(Tensor& self) {
  if (!ewTry(EwOp::Hardswish, {self}, self)) return Fallback<at::_ops::hardswish_>::call(self);
  return self;
}

Tensor& geluOut(const Tensor& self, c10::string_view approximate, Tensor& out) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh.");
  if (!ewTry(approximate == "tanh" ? EwOp::GeluTanh : EwOp::Gelu, {self}, out))
    return Fallback<at::_ops::gelu_out>::call(self, approximate, out);
  return out;
}
Tensor& geluBackwardOut(const Tensor& grad, const Tensor& self, c10::string_view approximate, Tensor& gi) {
  TORCH_CHECK(approximate == "none" || approximate == "tanh", "approximate argument must be either none or tanh.");
  if (!ewTry(approximate == "tanh" ? EwOp::GeluTanhBackward : EwOp::GeluBackward, {grad, self}, gi))
    return Fallback<at::_ops::gelu_backward_grad_input>::call(grad, self, approximate, gi);
  return gi;
}
// silu_backward's functional form has a composite (half-precision arithmetic op by op) that would win on
// PrivateUse1 over the out= kernel: registered directly.
Tensor siluBackward(const Tensor& grad, const Tensor& self) {
  Tensor gi = at::empty({0}, grad.options());
  if (!ewTry(EwOp::SiluBackward, {grad, self}, gi)) return Fallback<at::_ops::silu_backward>::call(grad, self);
  return gi;
}
Tensor mishBackward(const Tensor& grad, const Tensor& self) {
  Tensor gi = at::empty({0}, grad.options());
  if (!ewTry(EwOp::MishBackward, {grad, self}, gi)) return Fallback<at::_ops::mish_backward>::call(grad, self);
  return gi;
}
Tensor hardswishBackward(const Tensor& grad, const Tensor& self) {
  Tensor gi = at::empty({0}, grad.options());
  if (!ewTry(EwOp::HardswishBackward, {grad, self}, gi))
    return Fallback<at::_ops::hardswish_backward>::call(grad, self);
  return gi;
}

Tensor& softplusOut(const Tensor& self, const Scalar& beta, const Scalar& threshold, Tensor& out) {
  EwParams p;
  p.lo = beta.toDouble();
  p.hi = threshold.toDouble();
  if (!ewTry(EwOp::Softplus, {self}, out, p)) return Fallback<at::_ops::softplus_out>::call(self, beta, threshold, out);
  return out;
}
Tensor& softplusBackwardOut(const Tensor& grad, const Tensor& self, const Scalar& beta, const Scalar& threshold,
                            Tensor& gi) {
  EwParams p;
  p.lo = beta.toDouble();
  p.hi = threshold.toDouble();
  if (!ewTry(EwOp::SoftplusBackward, {grad, self}, gi, p))
    return Fallback<at::_ops::softplus_backward_grad_input>::call(grad, self, beta, threshold, gi);
  return gi;
}

EwParams eluParams(const Scalar& alpha, const Scalar& scale, const Scalar& input_scale) {
  EwParams p;
  p.alpha = alpha.toDouble();
  p.lo = scale.toDouble();
  p.hi = input_scale.toDouble();
  return p;
}
Tensor& eluOut(const Tensor& self, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale, Tensor& out) {
  if (!ewTry(EwOp::Elu, {self}, out, eluParams(alpha, scale, input_scale)))
    return Fallback<at::_ops::elu_out>::call(self, alpha, scale, input_scale, out);
  return out;
}
Tensor& eluBackwardOut(const Tensor& grad, const Scalar& alpha, const Scalar& scale, const Scalar& input_scale,
                       bool is_result, const Tensor& self_or_result, Tensor& gi) {
  if (is_result) {
    TORCH_CHECK(alpha.toDouble() >= 0,
                "In-place elu backward calculation is triggered with a negative slope which is "
                "not supported. This is caused by calling in-place forward function with a negative slope, please "
                "call out-of-place version instead.");
  }
  EwParams p = eluParams(alpha, scale, input_scale);
  p.has_lo = is_result;
  if (!ewTry(EwOp::EluBackward, {grad, self_or_result}, gi, p))
    return Fallback<at::_ops::elu_backward_grad_input>::call(grad, alpha, scale, input_scale, is_result, self_or_result,
                                                             gi);
  return gi;
}

Tensor& leakyReluOut(const Tensor& self, const Scalar& slope, Tensor& out) {
  EwParams p;
  p.alpha = slope.toDouble();
  if (!ewTry(EwOp::LeakyRelu, {self}, out, p)) return Fallback<at::_ops::leaky_relu_out>::call(self, slope, out);
  return out;
}
Tensor& leakyReluBackwardOut(const Tensor& grad, const Tensor& self, const Scalar& slope, bool self_is_result,
                             Tensor& gi) {
  TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call out-of-place "
              "version instead. File an issue at https://github.com/pytorch/pytorch if you do require supporting "
              "in-place leakRelu backward calculation with negative slope");
  EwParams p;
  p.alpha = slope.toDouble();
  if (!ewTry(EwOp::LeakyReluBackward, {grad, self}, gi, p))
    return Fallback<at::_ops::leaky_relu_backward_grad_input>::call(grad, self, slope, self_is_result, gi);
  return gi;
}

Tensor& hardtanhOut(const Tensor& self, const Scalar& min, const Scalar& max, Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Bool inputs not supported for hardtanh");
  EwParams p;
  p.lo = min.toDouble();
  p.hi = max.toDouble();
  p.ilo = min.toLong();
  p.ihi = max.toLong();
  p.has_lo = p.has_hi = true;
  if (!ewTry(EwOp::ClampScalar, {self}, out, p)) return Fallback<at::_ops::hardtanh_out>::call(self, min, max, out);
  return out;
}
Tensor hardtanh(const Tensor& self, const Scalar& min, const Scalar& max) {
  Tensor out = at::empty({0}, self.options());
  return hardtanhOut(self, min, max, out);
}
Tensor& hardtanhInplace(Tensor& self, const Scalar& min, const Scalar& max) {
  return hardtanhOut(self, min, max, self);
}

Tensor& hardtanhBackwardOut(const Tensor& grad, const Tensor& self, const Scalar& min, const Scalar& max, Tensor& gi) {
  EwParams p;
  p.lo = min.toDouble();
  p.hi = max.toDouble();
  if (!ewTry(EwOp::HardtanhBackward, {grad, self}, gi, p))
    return Fallback<at::_ops::hardtanh_backward_grad_input>::call(grad, self, min, max, gi);
  return gi;
}

// hardshrink / softshrink (lambda), their backwards, threshold (threshold, value).
EwParams lambdaParams(const Scalar& lambd) {
  EwParams p;
  p.lo = lambd.toDouble();
  return p;
}
Tensor& hardshrinkOut(const Tensor& self, const Scalar& lambd, Tensor& out) {
  return ewOr(EwOp::Hardshrink, {self}, out, lambdaParams(lambd),
              [&]() -> Tensor& { return Fallback<at::_ops::hardshrink_out>::call(self, lambd, out); });
}
Tensor& hardshrinkBackwardOut(const Tensor& grad, const Tensor& self, const Scalar& lambd, Tensor& gi) {
  return ewOr(EwOp::HardshrinkBackward, {grad, self}, gi, lambdaParams(lambd), [&]() -> Tensor& {
    return Fallback<at::_ops::hardshrink_backward_grad_input>::call(grad, self, lambd, gi);
  });
}
Tensor& softshrinkOut(const Tensor& self, const Scalar& lambd, Tensor& out) {
  // a negative lambda: ATen's own message, from the fallback
  if (lambd.toDouble() < 0) return Fallback<at::_ops::softshrink_out>::call(self, lambd, out);
  return ewOr(EwOp::Softshrink, {self}, out, lambdaParams(lambd),
              [&]() -> Tensor& { return Fallback<at::_ops::softshrink_out>::call(self, lambd, out); });
}
Tensor& softshrinkBackwardOut(const Tensor& grad, const Tensor& self, const Scalar& lambd, Tensor& gi) {
  return ewOr(EwOp::SoftshrinkBackward, {grad, self}, gi, lambdaParams(lambd), [&]() -> Tensor& {
    return Fallback<at::_ops::softshrink_backward_grad_input>::call(grad, self, lambd, gi);
  });
}
Tensor& thresholdOut(const Tensor& self, const Scalar& threshold, const Scalar& value, Tensor& out) {
  if (out.scalar_type() != self.scalar_type() && out.device() == self.device()) {
    // ATen computes at self's dtype (threshold and value are scalars) and casts into any out=
    Tensor tmp = at::empty({0}, self.options());
    thresholdOut(self, threshold, value, tmp);
    at::native::resize_output(out, tmp.sizes());
    return out.copy_(tmp);
  }
  EwParams p;
  p.lo = threshold.toDouble();
  p.hi = value.toDouble();
  return ewOr(EwOp::Threshold, {self}, out, p,
              [&]() -> Tensor& { return Fallback<at::_ops::threshold_out>::call(self, threshold, value, out); });
}

// --- pointwise losses -------------------------------------------------------------------------------------

// out = reduce(op(inputs)) for reduction none / mean / sum.
bool lossInto(EwOp op, const std::vector<EwInput>& inputs, int64_t reduction, Tensor& out, const EwParams& p,
              const Tensor& weight = Tensor()) {
  const auto compute = ewComputeType(op, inputs);
  if (!ewNative(op, compute, inputs)) return false;
  TORCH_CHECK(reduction >= 0 && reduction <= 2, "expected reduction 0 (none), 1 (mean) or 2 (sum), but got ",
              reduction);
  if (reduction == 0 && !weight.defined()) {
    ewRun(op, compute, inputs, out, p);
    return true;
  }
  Tensor loss = at::empty({0}, out.options().dtype(compute));
  ewRun(op, compute, inputs, loss, p);
  if (weight.defined()) loss.mul_(weight);
  if (reduction == 0) {
    at::native::resize_output(out, loss.sizes());
    out.copy_(loss);
  } else if (reduction == 1) {
    at::mean_out(out, loss, at::IntArrayRef{});
  } else {
    at::sum_out(out, loss, at::IntArrayRef{});
  }
  return true;
}

Tensor& mseOut(const Tensor& self, const Tensor& target, int64_t reduction, Tensor& out) {
  if (!lossInto(EwOp::MseLoss, {self, target}, reduction, out, {}))
    return Fallback<at::_ops::mse_loss_out>::call(self, target, reduction, out);
  return out;
}
Tensor& mseBackwardOut(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction, Tensor& gi) {
  EwParams p;
  p.alpha = reduction == 1 ? 2.0 / static_cast<double>(self.numel()) : 2.0;
  at::native::resize_output(gi, self.sizes());
  if (!ewTry(EwOp::MseBackward, {grad, self, target}, gi, p))
    return Fallback<at::_ops::mse_loss_backward_grad_input>::call(grad, self, target, reduction, gi);
  return gi;
}

Tensor& smoothL1Out(const Tensor& self, const Tensor& target, int64_t reduction, double beta, Tensor& out) {
  TORCH_CHECK(beta >= 0, "smooth_l1_loss does not support negative values for beta.");
  EwParams p;
  p.lo = beta;
  // beta == 0 is l1_loss: |x - t| (the smooth branch never taken: z < 0 is false).
  if (!lossInto(EwOp::SmoothL1Loss, {self, target}, reduction, out, p))
    return Fallback<at::_ops::smooth_l1_loss_out>::call(self, target, reduction, beta, out);
  return out;
}
Tensor& smoothL1BackwardOut(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction,
                            double beta, Tensor& gi) {
  EwParams p;
  p.alpha = reduction == 1 ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  p.lo = beta;
  at::native::resize_output(gi, self.sizes());
  if (!ewTry(EwOp::SmoothL1Backward, {grad, self, target}, gi, p))
    return Fallback<at::_ops::smooth_l1_loss_backward_grad_input>::call(grad, self, target, reduction, beta, gi);
  return gi;
}

Tensor& huberOut(const Tensor& self, const Tensor& target, int64_t reduction, double delta, Tensor& out) {
  TORCH_CHECK(delta > 0, "huber_loss does not support non-positive values for delta.");
  EwParams p;
  p.lo = delta;
  if (!lossInto(EwOp::HuberLoss, {self, target}, reduction, out, p))
    return Fallback<at::_ops::huber_loss_out>::call(self, target, reduction, delta, out);
  return out;
}
Tensor& huberBackwardOut(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction, double delta,
                         Tensor& gi) {
  checkExactOut(gi, self.scalar_type());
  EwParams p;
  p.alpha = reduction == 1 ? 1.0 / static_cast<double>(self.numel()) : 1.0;
  p.lo = delta;
  at::native::resize_output(gi, self.sizes());
  if (!ewTry(EwOp::HuberBackward, {grad, self, target}, gi, p))
    return Fallback<at::_ops::huber_loss_backward_out>::call(grad, self, target, reduction, delta, gi);
  return gi;
}
Tensor huber(const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  Tensor out = at::empty({0}, self.options());
  return huberOut(self, target, reduction, delta, out);
}
Tensor huberBackward(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction, double delta) {
  Tensor gi = at::empty({0}, self.options());
  return huberBackwardOut(grad, self, target, reduction, delta, gi);
}

Tensor& bceOut(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction,
               Tensor& out) {
  checkExactOut(out, self.scalar_type());   // as the CPU's TensorIterator kernel, which takes no other dtype
  checkExactOut(target, self.scalar_type());  // for the target either
  if (kernelFloating(self.scalar_type())) {
    TORCH_CHECK(self.sizes() == target.sizes(), "Using a target size (", target.sizes(),
                ") that is different to the input size (", self.sizes(),
                ") is deprecated. Please ensure they have "
                "the same size.");
    // CPU PyTorch raises for probabilities outside [0, 1] (CUDA PyTorch asserts on the device).
    TORCH_CHECK(!at::logical_or(at::lt(self, 0), at::gt(self, 1)).any().item<bool>(),
                "all elements of input should be between 0 and 1");
  }
  const Tensor w = weight.has_value() && weight->defined() ? *weight : Tensor();
  if (!lossInto(EwOp::BceLoss, {self, target}, reduction, out, {}, w))
    return Fallback<at::_ops::binary_cross_entropy_out>::call(self, target, weight, reduction, out);
  return out;
}
Tensor& bceBackwardOut(const Tensor& grad, const Tensor& self, const Tensor& target,
                       const std::optional<Tensor>& weight, int64_t reduction, Tensor& gi) {
  checkExactOut(gi, self.scalar_type());
  checkExactOut(target, self.scalar_type());
  at::native::resize_output(gi, self.sizes());
  if (!ewTry(EwOp::BceBackward, {grad, self, target}, gi))
    return Fallback<at::_ops::binary_cross_entropy_backward_grad_input>::call(grad, self, target, weight, reduction,
                                                                              gi);
  if (weight.has_value() && weight->defined()) gi.mul_(*weight);
  if (reduction == 1) gi.div_(static_cast<double>(self.numel()));
  return gi;
}

// log_sigmoid: CUDA PyTorch's form, which leaves the buffer empty.
std::tuple<Tensor&, Tensor&> logSigmoidOut(const Tensor& self, Tensor& out, Tensor& buffer) {
  if (!ewTry(EwOp::LogSigmoid, {self}, out))
    return Fallback<at::_ops::log_sigmoid_forward_output>::call(self, out, buffer);
  at::native::resize_output(buffer, {0});
  return {out, buffer};
}
std::tuple<Tensor, Tensor> logSigmoid(const Tensor& self) {
  Tensor out = at::empty({0}, self.options()), buffer = at::empty({0}, self.options());
  logSigmoidOut(self, out, buffer);
  return {out, buffer};
}
Tensor& logSigmoidBackwardOut(const Tensor& grad, const Tensor& self, const Tensor& buffer, Tensor& gi) {
  checkExactOut(gi, self.scalar_type());
  if (!ewTry(EwOp::LogSigmoidBackward, {grad, self}, gi))
    return Fallback<at::_ops::log_sigmoid_backward_grad_input>::call(grad, self, buffer, gi);
  return gi;
}
Tensor logSigmoidBackward(const Tensor& grad, const Tensor& self, const Tensor& buffer) {
  Tensor gi = at::empty({0}, grad.options());
  return logSigmoidBackwardOut(grad, self, buffer, gi);
}

// Functional forms of the ops ATen does not build from their out= kernels.
Tensor hardtanhBackward(const Tensor& grad, const Tensor& self, const Scalar& min, const Scalar& max) {
  Tensor gi = at::empty({0}, grad.options());
  return hardtanhBackwardOut(grad, self, min, max, gi);
}
Tensor mseBackward(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction) {
  Tensor gi = at::empty({0}, self.options());
  return mseBackwardOut(grad, self, target, reduction, gi);
}
Tensor smoothL1Backward(const Tensor& grad, const Tensor& self, const Tensor& target, int64_t reduction, double beta) {
  Tensor gi = at::empty({0}, self.options());
  return smoothL1BackwardOut(grad, self, target, reduction, beta, gi);
}
Tensor bce(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction) {
  Tensor out = at::empty({0}, self.options());
  return bceOut(self, target, weight, reduction, out);
}
Tensor bceBackward(const Tensor& grad, const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                   int64_t reduction) {
  Tensor gi = at::empty({0}, self.options());
  return bceBackwardOut(grad, self, target, weight, reduction, gi);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL_ENGINE_OUT(m, "gelu.out", geluOut);
  MT_IMPL_ENGINE_OUT(m, "gelu_backward.grad_input", geluBackwardOut);
  MT_IMPL(m, "silu_backward", siluBackward);
  MT_IMPL(m, "mish_backward", mishBackward);
  MT_IMPL_ENGINE_OUT(m, "softplus.out", softplusOut);
  MT_IMPL_ENGINE_OUT(m, "softplus_backward.grad_input", softplusBackwardOut);
  MT_IMPL_ENGINE_OUT(m, "elu.out", eluOut);
  MT_IMPL_ENGINE_OUT(m, "elu_backward.grad_input", eluBackwardOut);
  MT_IMPL_ENGINE_OUT(m, "leaky_relu.out", leakyReluOut);
  MT_IMPL_ENGINE_OUT(m, "leaky_relu_backward.grad_input", leakyReluBackwardOut);
  MT_IMPL(m, "hardswish", hardswish);
  MT_IMPL(m, "hardswish_", hardswishInplace);
  MT_IMPL(m, "hardswish_backward", hardswishBackward);
  MT_IMPL_ENGINE_OUT(m, "hardtanh.out", hardtanhOut);
  MT_IMPL(m, "hardtanh", hardtanh);
  MT_IMPL(m, "hardtanh_", hardtanhInplace);
  MT_IMPL_ENGINE_OUT(m, "hardtanh_backward.grad_input", hardtanhBackwardOut);
  MT_IMPL_ENGINE_OUT(m, "hardshrink.out", hardshrinkOut);
  MT_IMPL_ENGINE_OUT(m, "hardshrink_backward.grad_input", hardshrinkBackwardOut);
  MT_IMPL_ENGINE_OUT(m, "softshrink.out", softshrinkOut);
  MT_IMPL_ENGINE_OUT(m, "softshrink_backward.grad_input", softshrinkBackwardOut);
  MT_IMPL_ENGINE_OUT(m, "threshold.out", thresholdOut);
  MT_IMPL(m, "mse_loss.out", mseOut);
  MT_IMPL(m, "mse_loss_backward.grad_input", mseBackwardOut);
  MT_IMPL(m, "smooth_l1_loss.out", smoothL1Out);
  MT_IMPL(m, "smooth_l1_loss_backward.grad_input", smoothL1BackwardOut);
  MT_IMPL(m, "binary_cross_entropy.out", bceOut);
  MT_IMPL(m, "binary_cross_entropy_backward.grad_input", bceBackwardOut);
  MT_IMPL(m, "hardtanh_backward", hardtanhBackward);
  MT_IMPL(m, "huber_loss.out", huberOut);
  MT_IMPL(m, "huber_loss", huber);
  MT_IMPL(m, "huber_loss_backward.out", huberBackwardOut);
  MT_IMPL(m, "huber_loss_backward", huberBackward);
  MT_IMPL(m, "log_sigmoid_forward.output", logSigmoidOut);
  MT_IMPL(m, "log_sigmoid_forward", logSigmoid);
  MT_IMPL(m, "log_sigmoid_backward.grad_input", logSigmoidBackwardOut);
  MT_IMPL(m, "log_sigmoid_backward", logSigmoidBackward);
  MT_IMPL(m, "mse_loss_backward", mseBackward);
  MT_IMPL(m, "smooth_l1_loss_backward", smoothL1Backward);
  MT_IMPL(m, "binary_cross_entropy", bce);
  MT_IMPL(m, "binary_cross_entropy_backward", bceBackward);
}

} // namespace mytorch
