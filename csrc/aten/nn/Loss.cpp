// Op table: nll_loss and nll_loss2d forward and backward (Note [NLL loss]); cross_entropy reaches them
// through log_softmax. Targets other than int64 take the counted CPU fallback.
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/nll_loss2d_backward_ops.h>
#include <ATen/ops/nll_loss2d_forward_ops.h>
#include <ATen/ops/nll_loss_backward_ops.h>
#include <ATen/ops/nll_loss_forward_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/loss.h"

namespace mytorch {
namespace {

using at::Tensor;

bool nativeArgs(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight) {
  return kernelFloating(self.scalar_type()) && target.scalar_type() == at::kLong &&
         (!weight.has_value() || !weight->defined() || weight->scalar_type() == self.scalar_type());
}

Tensor weightOf(const std::optional<Tensor>& weight, int64_t c) {
  if (!weight.has_value() || !weight->defined()) return Tensor();
  TORCH_CHECK(weight->numel() == c, "weight tensor should be defined either for all ", c,
              " classes or no classes but got weight tensor of shape: ", weight->sizes());
  return weight->contiguous();
}

// Launches; a bad target is an IndexError (Note [Device-side errors]: at once on sim, else at the next
// synchronisation unless launch-blocking is on).
void launch(NllArgs& a, const at::Device& device) {
  a.error = deviceErrorSite(device, "nll_loss", DeviceErrorFormat::TargetOutOfBounds, true);
  c10::DeviceGuard guard(device);
  MT_RT_CHECK(kernels::nll_loss(a, streamFor(device)));
  afterErrorCheckedLaunch(device);
}

// Shapes: self [n, c, inner...] (or [c]), target [n, inner...] (or []).
void fillShape(NllArgs& a, const Tensor& self, bool spatial) {
  if (self.dim() == 1) {
    a.n = 1;
    a.c = self.size(0);
    a.inner = 1;
  } else {
    a.n = self.size(0);
    a.c = self.size(1);
    a.inner = spatial ? self.size(2) * self.size(3) : 1;
  }
}

void checkShapes(const Tensor& self, const Tensor& target, bool spatial) {
  if (!spatial) {
    TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
    TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
    const bool no_batch = self.dim() == 1 && target.dim() == 0;
    TORCH_CHECK(no_batch || self.size(0) == target.size(0), "Expected input batch_size (", self.size(0),
                ") to match target batch_size (", target.size(0), ").");
  } else {
    TORCH_CHECK(self.dim() == 4,
                "only batches of spatial inputs supported (4D tensors), but got input of size: ", self.sizes());
    TORCH_CHECK(target.dim() == 3,
                "only batches of spatial targets supported (3D tensors) but got targets of size: ", target.sizes());
    TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
                "input and target batch or spatial sizes don't match: target ", target.sizes(), ", input ",
                self.sizes());
  }
}

void forward(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight, int64_t reduction,
             int64_t ignore_index, Tensor& output, Tensor& total_weight, bool spatial) {
  checkShapes(self, target, spatial);
  TORCH_CHECK(reduction >= 0 && reduction <= 2, "nll_loss: expected reduction 0, 1 or 2, but got ", reduction);
  Tensor x = self.contiguous(), t = target.contiguous();
  NllArgs a;
  fillShape(a, x, spatial);
  Tensor w = weightOf(weight, a.c);
  if (reduction == 0 && x.dim() >= 2) {
    if (spatial) at::native::resize_output(output, {a.n, x.size(2), x.size(3)});
    else at::native::resize_output(output, {a.n});
  } else {
    at::native::resize_output(output, {});
  }
  at::native::resize_output(total_weight, {});
  Tensor out = output.is_contiguous() ? output : at::zeros(output.sizes(), output.options());
  a.dtype = toKernelDType(x.scalar_type());
  a.logp = x.data_ptr();
  a.target = t.data_ptr<int64_t>();
  a.weight = dataOrNull(w);
  a.out = out.data_ptr();
  a.total_weight = total_weight.data_ptr();
  a.ignore_index = ignore_index;
  a.reduction = static_cast<Reduction>(reduction);
  if (reduction == 0) total_weight.zero_();
  launch(a, self.device());
  if (!out.is_same(output)) output.copy_(out);
}

void backward(const Tensor& grad, const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
              int64_t reduction, int64_t ignore_index, const Tensor& total_weight, Tensor& grad_input, bool spatial) {
  checkShapes(self, target, spatial);
  Tensor t = target.contiguous(), g = grad.contiguous(), tw = total_weight.contiguous();
  NllArgs a;
  fillShape(a, self, spatial);
  Tensor w = weightOf(weight, a.c);
  if (reduction == 0 && self.dim() >= 2) {
    TORCH_CHECK(g.numel() == a.n * a.inner, "nll_loss_backward: expected grad_output with ", a.n * a.inner,
                " elements, but got ", g.sizes());
  } else {
    TORCH_CHECK(g.numel() == 1, "nll_loss_backward: expected a single-element grad_output, but got ", g.sizes());
  }
  at::native::resize_output(grad_input, self.sizes());
  Tensor gi = grad_input.is_contiguous() ? grad_input : at::zeros(self.sizes(), grad_input.options());
  gi.zero_();
  a.backward = true;
  a.dtype = toKernelDType(self.scalar_type());
  a.target = t.data_ptr<int64_t>();
  a.weight = dataOrNull(w);
  a.out = gi.data_ptr();
  a.total_weight = tw.data_ptr();
  a.grad_out = g.data_ptr();
  a.ignore_index = ignore_index;
  a.reduction = static_cast<Reduction>(reduction);
  launch(a, self.device());
  if (!gi.is_same(grad_input)) grad_input.copy_(gi);
}

std::tuple<Tensor&, Tensor&> nllForwardOut(const Tensor& self, const Tensor& target,
                                           const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                                           Tensor& output, Tensor& total_weight) {
  checkOutDtype(output, self.scalar_type());
  checkOutDtype(total_weight, self.scalar_type());
  if (!nativeArgs(self, target, weight))
    return Fallback<at::_ops::nll_loss_forward_output>::call(self, target, weight, reduction, ignore_index, output,
                                                             total_weight);
  forward(self, target, weight, reduction, ignore_index, output, total_weight, false);
  return {output, total_weight};
}

Tensor& nllBackwardOut(const Tensor& grad, const Tensor& self, const Tensor& target,
                       const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                       const Tensor& total_weight, Tensor& grad_input) {
  checkOutDtype(grad_input, self.scalar_type());
  if (!nativeArgs(self, target, weight) || grad.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::nll_loss_backward_grad_input>::call(grad, self, target, weight, reduction, ignore_index,
                                                                  total_weight, grad_input);
  backward(grad, self, target, weight, reduction, ignore_index, total_weight, grad_input, false);
  return grad_input;
}

std::tuple<Tensor&, Tensor&> nll2dForwardOut(const Tensor& self, const Tensor& target,
                                             const std::optional<Tensor>& weight, int64_t reduction,
                                             int64_t ignore_index, Tensor& output, Tensor& total_weight) {
  checkOutDtype(output, self.scalar_type());
  checkOutDtype(total_weight, self.scalar_type());
  if (!nativeArgs(self, target, weight))
    return Fallback<at::_ops::nll_loss2d_forward_output>::call(self, target, weight, reduction, ignore_index, output,
                                                               total_weight);
  forward(self, target, weight, reduction, ignore_index, output, total_weight, true);
  return {output, total_weight};
}

Tensor& nll2dBackwardOut(const Tensor& grad, const Tensor& self, const Tensor& target,
                         const std::optional<Tensor>& weight, int64_t reduction, int64_t ignore_index,
                         const Tensor& total_weight, Tensor& grad_input) {
  checkOutDtype(grad_input, self.scalar_type());
  if (!nativeArgs(self, target, weight) || grad.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::nll_loss2d_backward_grad_input>::call(grad, self, target, weight, reduction, ignore_index,
                                                                    total_weight, grad_input);
  backward(grad, self, target, weight, reduction, ignore_index, total_weight, grad_input, true);
  return grad_input;
}

std::tuple<Tensor, Tensor> nll2dForward(const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                                        int64_t reduction, int64_t ignore_index) {
  Tensor out = at::empty({0}, self.options()), tw = at::empty({0}, self.options());
  nll2dForwardOut(self, target, weight, reduction, ignore_index, out, tw);
  return {out, tw};
}
Tensor nll2dBackward(const Tensor& grad, const Tensor& self, const Tensor& target, const std::optional<Tensor>& weight,
                     int64_t reduction, int64_t ignore_index, const Tensor& total_weight) {
  Tensor gi = at::empty({0}, self.options());
  return nll2dBackwardOut(grad, self, target, weight, reduction, ignore_index, total_weight, gi);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "nll_loss_forward.output", nllForwardOut);
  MT_IMPL(m, "nll_loss_backward.grad_input", nllBackwardOut);
  MT_IMPL(m, "nll_loss2d_forward.output", nll2dForwardOut);
  MT_IMPL(m, "nll_loss2d_backward.grad_input", nll2dBackwardOut);
  MT_IMPL(m, "nll_loss2d_forward", nll2dForward);
  MT_IMPL(m, "nll_loss2d_backward", nll2dBackward);
}

} // namespace mytorch
