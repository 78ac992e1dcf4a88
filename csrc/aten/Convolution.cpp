// Op table: convolution on the CPU, counted as a fallback. ATen sends convolutions on PrivateUse1 to
// convolution_overrideable / convolution_backward_overrideable, which have no CPU kernel for the boxed
// fallback to run, so without these wrappers every conv on mytorch raises. Native kernels (cuDNN on cuda)
// replace them in the NN-kernel issue.
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/record_function.h>
#include <torch/library.h>

#include "csrc/core/Fallback.h"

namespace mytorch {
namespace {

int64_t bytesOf(const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.numel()) * t.element_size() : 0; }

at::Tensor toHost(const at::Tensor& t, int64_t* moved) {
  if (!t.defined()) return t;
  *moved += bytesOf(t);
  return t.cpu();
}

at::Tensor toDevice(const at::Tensor& t, const at::Device& d, int64_t* moved) {
  if (!t.defined()) return t;
  *moved += bytesOf(t);
  return t.to(d);
}

at::Tensor wrapper_convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                            at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                            at::IntArrayRef output_padding, int64_t groups) {
  static const std::string name = "aten::convolution_overrideable";
  beginFallback(name);
  RECORD_FUNCTION("mytorch::fallback::" + name, std::vector<c10::IValue>());
  int64_t to_cpu = 0, to_dev = 0;
  std::optional<at::Tensor> host_bias;
  if (bias.has_value() && bias->defined()) host_bias = toHost(*bias, &to_cpu);
  at::Tensor out = at::convolution(toHost(input, &to_cpu), toHost(weight, &to_cpu), host_bias, stride, padding,
                                   dilation, transposed, output_padding, groups);
  at::Tensor result = toDevice(out, input.device(), &to_dev);
  countFallback(name, to_cpu, to_dev);
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> wrapper_convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  static const std::string name = "aten::convolution_backward_overrideable";
  beginFallback(name);
  RECORD_FUNCTION("mytorch::fallback::" + name, std::vector<c10::IValue>());
  int64_t to_cpu = 0, to_dev = 0;
  // The bias has one value per output channel: weight is (out, in/groups, ...) or, transposed, (in, out/groups, ...).
  const std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto [gi, gw, gb] = at::convolution_backward(toHost(grad_output, &to_cpu), toHost(input, &to_cpu),
                                               toHost(weight, &to_cpu), bias_sizes, stride, padding, dilation,
                                               transposed, output_padding, groups, output_mask);
  const at::Device d = input.device();
  auto result = std::make_tuple(toDevice(gi, d, &to_dev), toDevice(gw, d, &to_dev), toDevice(gb, d, &to_dev));
  countFallback(name, to_cpu, to_dev);
  return result;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", TORCH_FN(wrapper_convolution_overrideable));
  m.impl("convolution_backward_overrideable", TORCH_FN(wrapper_convolution_backward_overrideable));
}

} // namespace mytorch
