// Op table: softmax and log_softmax, forward and backward (Note [Softmax family]). Non-floating inputs
// take the counted CPU fallback, which raises CPU PyTorch's own error for them.
#include <ATen/core/Tensor.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_log_softmax_backward_data_ops.h>
#include <ATen/ops/_log_softmax_ops.h>
#include <ATen/ops/_softmax_backward_data_ops.h>
#include <ATen/ops/_softmax_ops.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Runtime.h"
#include "mytorch/softmax.h"

namespace mytorch {
namespace {

using at::Tensor;

void setShape(SoftmaxArgs& a, const Tensor& t, int64_t dim) {
  a.outer = 1;
  a.inner = 1;
  a.dim = t.dim() == 0 ? 1 : t.size(dim);
  for (int64_t d = 0; d < dim; ++d) a.outer *= t.size(d);
  for (int64_t d = dim + 1; d < t.dim(); ++d) a.inner *= t.size(d);
}

// Runs into `out` (resized to `like`), through a contiguous scratch when `out` is not contiguous.
void run(SoftmaxArgs& a, const Tensor& like, Tensor& out) {
  at::native::resize_output(out, like.sizes());
  if (out.numel() == 0) return;
  Tensor dst = out.is_contiguous() ? out : at::empty(like.sizes(), out.options());
  a.out = dst.data_ptr();
  c10::DeviceGuard guard(out.device());
  MT_RT_CHECK(kernels::softmax(a, streamFor(out)));
  if (!dst.is_same(out)) out.copy_(dst);
}

Tensor& forward(bool log, const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (half_to_float) {
    TORCH_CHECK(self.scalar_type() == at::kHalf || self.scalar_type() == at::kBFloat16,
                "conversion is supported for Half and BFloat16 inputs only, but got ", self.scalar_type());
  }
  const auto out_type = half_to_float ? at::kFloat : self.scalar_type();
  checkOutDtype(out, out_type);
  Tensor x = self.contiguous();
  SoftmaxArgs a;
  a.log = log;
  a.in_dtype = toKernelDType(x.scalar_type());
  a.out_dtype = toKernelDType(out_type);
  a.in = x.data_ptr();
  setShape(a, x, dim);
  run(a, x, out);
  return out;
}

Tensor& backward(bool log, const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype,
                 Tensor& grad_input) {
  dim = at::maybe_wrap_dim(dim, grad.dim());
  TORCH_CHECK(grad.sizes() == output.sizes(), "grad_output and output must have the same shape, but got ", grad.sizes(),
              " and ", output.sizes());
  TORCH_CHECK(grad.scalar_type() == output.scalar_type(), "grad_output and output must have the same dtype, but got ",
              grad.scalar_type(), " and ", output.scalar_type());
  TORCH_CHECK(grad_input.scalar_type() == input_dtype, "expected grad_input to have dtype ", input_dtype, ", but got ",
              grad_input.scalar_type());
  Tensor g = grad.contiguous(), y = output.contiguous();
  SoftmaxArgs a;
  a.log = log;
  a.backward = true;
  a.in_dtype = toKernelDType(g.scalar_type());
  a.out_dtype = toKernelDType(input_dtype);
  a.in = g.data_ptr();
  a.out_saved = y.data_ptr();
  setShape(a, g, dim);
  run(a, g, grad_input);
  return grad_input;
}

Tensor& softmaxOut(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  if (!kernelFloating(self.scalar_type())) return Fallback<at::_ops::_softmax_out>::call(self, dim, half_to_float, out);
  return forward(false, self, dim, half_to_float, out);
}
Tensor& logSoftmaxOut(const Tensor& self, int64_t dim, bool half_to_float, Tensor& out) {
  if (!kernelFloating(self.scalar_type()))
    return Fallback<at::_ops::_log_softmax_out>::call(self, dim, half_to_float, out);
  return forward(true, self, dim, half_to_float, out);
}
Tensor& softmaxBackwardOut(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype,
                           Tensor& grad_input) {
  if (!kernelFloating(grad.scalar_type()) || !kernelFloating(input_dtype))
    return Fallback<at::_ops::_softmax_backward_data_out>::call(grad, output, dim, input_dtype, grad_input);
  return backward(false, grad, output, dim, input_dtype, grad_input);
}
Tensor& logSoftmaxBackwardOut(const Tensor& grad, const Tensor& output, int64_t dim, c10::ScalarType input_dtype,
                              Tensor& grad_input) {
  if (!kernelFloating(grad.scalar_type()) || !kernelFloating(input_dtype))
    return Fallback<at::_ops::_log_softmax_backward_data_out>::call(grad, output, dim, input_dtype, grad_input);
  return backward(true, grad, output, dim, input_dtype, grad_input);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_softmax.out", softmaxOut);
  MT_IMPL(m, "_log_softmax.out", logSoftmaxOut);
  MT_IMPL(m, "_softmax_backward_data.out", softmaxBackwardOut);
  MT_IMPL(m, "_log_softmax_backward_data.out", logSoftmaxBackwardOut);
}

} // namespace mytorch
