// Op table: 2-D max / average / adaptive-average / adaptive-max pooling and nearest / bilinear upsampling, forward and
// backward, on the spatial family (Note [Spatial family]). Output sizes and argument checks follow ATen.
#include <ATen/core/Tensor.h>
#include <ATen/ops/adaptive_max_pool2d.h>
#include <ATen/ops/adaptive_max_pool2d_backward.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/avg_pool2d_backward_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/max_pool2d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/Glue.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Runtime.h"
#include "mytorch/pool.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptD = std::optional<double>;

int pick(at::IntArrayRef v, size_t i, int dflt) {
  if (v.empty()) return dflt;
  return static_cast<int>(v.size() == 1 ? v[0] : v[i]);
}

int64_t poolOut(int64_t in, int k, int pad, int stride, int dil, bool ceil_mode) {
  const int64_t num = in + 2 * pad - int64_t(dil) * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = (num >= 0 ? num / stride : -((-num + stride - 1) / stride)) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Input [N, C, H, W] or [C, H, W] as planes; checks the shape like ATen. Max pooling's forward also takes integers.
void planes(SpatialArgs& a, const Tensor& x, const char* op, bool integers = false) {
  TORCH_CHECK((x.dim() == 3 || x.dim() == 4) && x.size(-1) > 0 && x.size(-2) > 0, op,
              ": expected 3D or 4D (batch mode) tensor with optional 0 dim batch size for input, but got: ", x.sizes());
  TORCH_CHECK(kernelFloating(x.scalar_type()) || (integers && at::isIntegralType(x.scalar_type(), false)), op,
              ": expected a floating point input, but got ", x.scalar_type());
  a.dtype = toKernelDType(x.scalar_type());
  a.planes = x.numel() / (x.size(-1) * x.size(-2));
  a.ih = x.size(-2);
  a.iw = x.size(-1);
}

std::vector<int64_t> outShape(const Tensor& x, int64_t oh, int64_t ow) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end() - 2);
  s.push_back(oh);
  s.push_back(ow);
  return s;
}

void launch(SpatialArgs& a, const Tensor& like) {
  c10::DeviceGuard guard(like.device());
  MT_RT_CHECK(kernels::spatial(a, streamFor(like)));
}

// Writes through a contiguous scratch when `out` is not contiguous.
template <typename F>
void intoOut(Tensor& out, at::IntArrayRef shape, F&& fill) {
  at::native::resize_output(out, shape);
  Tensor dst = out.is_contiguous() ? out : at::empty(shape, out.options());
  fill(dst);
  if (!dst.is_same(out)) out.copy_(dst);
}

void poolGeometry(SpatialArgs& a, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                  at::IntArrayRef dilation, bool ceil_mode, const char* op) {
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == 2, op,
              ": kernel_size must either be a single int, or a tuple of two ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == 2, op,
              ": stride must either be omitted, a single int, or a tuple of two ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == 2, op,
              ": padding must either be a single int, or a tuple of two ints");
  TORCH_CHECK(dilation.empty() || dilation.size() == 1 || dilation.size() == 2, op,
              ": dilation must be either a single int, or a tuple of two ints");
  a.kh = pick(kernel, 0, 1);
  a.kw = pick(kernel, 1, 1);
  a.sh = pick(stride, 0, a.kh);
  a.sw = pick(stride, 1, a.kw);
  a.ph = pick(padding, 0, 0);
  a.pw = pick(padding, 1, 0);
  a.dh = pick(dilation, 0, 1);
  a.dw = pick(dilation, 1, 1);
  TORCH_CHECK(a.kh > 0 && a.kw > 0, op, ": kernel size should be greater than zero, but got kH: ", a.kh, " kW: ", a.kw);
  TORCH_CHECK(a.sh > 0 && a.sw > 0, op, ": stride should be greater than zero, but got dH: ", a.sh, " dW: ", a.sw);
  TORCH_CHECK(a.dh > 0 && a.dw > 0, op, ": dilation should be greater than zero, but got dilationH: ", a.dh,
              " dilationW: ", a.dw);
  TORCH_CHECK(a.ph >= 0 && a.pw >= 0 && a.ph <= a.kh / 2 && a.pw <= a.kw / 2,
              "pad should be at most half of effective kernel size, but got pad=", padding, ", kernel_size=", kernel);
  a.oh = poolOut(a.ih, a.kh, a.ph, a.sh, a.dh, ceil_mode);
  a.ow = poolOut(a.iw, a.kw, a.pw, a.sw, a.dw, ceil_mode);
  TORCH_CHECK(a.oh > 0 && a.ow > 0, "Given input size: (", a.ih, "x", a.iw, "). Calculated output size: (", a.oh, "x",
              a.ow, "). Output size is too small");
}

std::tuple<Tensor&, Tensor&> maxPoolOut(const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                        at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, Tensor& out,
                                        Tensor& indices) {
  checkOutDtype(out, self.scalar_type());
  checkOutDtype(indices, at::kLong);
  if (!kernelFloating(self.scalar_type()) && !at::isIntegralType(self.scalar_type(), false))  // bool, complex: the
    return Fallback<at::_ops::max_pool2d_with_indices_out>::call(self, kernel, stride, padding, dilation, ceil_mode,
                                                                 out, indices);  // CPU's kernel and its refusal
  SpatialArgs a;
  a.op = SpatialOp::MaxPool;
  planes(a, self, "max_pool2d", /*integers=*/true);
  poolGeometry(a, kernel, stride, padding, dilation, ceil_mode, "max_pool2d");
  Tensor x = self.contiguous();
  const auto shape = outShape(self, a.oh, a.ow);
  at::native::resize_output(indices, shape);
  Tensor idx = indices.is_contiguous() ? indices : at::empty(shape, indices.options());
  intoOut(out, shape, [&](Tensor& dst) {
    a.in = x.data_ptr();
    a.out = dst.data_ptr();
    a.indices = idx.data_ptr<int64_t>();
    launch(a, x);
  });
  if (!idx.is_same(indices)) indices.copy_(idx);
  return {out, indices};
}

Tensor& maxPoolBackwardOut(const Tensor& grad, const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, const Tensor& indices,
                           Tensor& gi) {
  checkOutDtype(gi, self.scalar_type());
  if (!kernelFloating(self.scalar_type()))
    return Fallback<at::_ops::max_pool2d_with_indices_backward_grad_input>::call(grad, self, kernel, stride, padding,
                                                                                 dilation, ceil_mode, indices, gi);
  SpatialArgs a;
  a.op = SpatialOp::MaxPool;
  a.backward = true;
  planes(a, self, "max_pool2d_backward");
  poolGeometry(a, kernel, stride, padding, dilation, ceil_mode, "max_pool2d_backward");
  Tensor g = grad.contiguous(), idx = indices.contiguous();
  TORCH_CHECK(g.numel() == a.planes * a.oh * a.ow && idx.numel() == g.numel(),
              "max_pool2d_backward: expected grad_output and indices of shape ", outShape(self, a.oh, a.ow),
              ", but got ", grad.sizes(), " and ", indices.sizes());
  intoOut(gi, self.sizes(), [&](Tensor& dst) {
    a.in = g.data_ptr();
    a.out = dst.data_ptr();
    a.indices = idx.data_ptr<int64_t>();
    launch(a, g);
  });
  return gi;
}

Tensor& avgPoolOut(const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                   bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor, Tensor& out) {
  checkOutDtype(out, self.scalar_type());
  if (!kernelFloating(self.scalar_type()))
    return Fallback<at::_ops::avg_pool2d_out>::call(self, kernel, stride, padding, ceil_mode, count_include_pad,
                                                    divisor, out);
  SpatialArgs a;
  a.op = SpatialOp::AvgPool;
  planes(a, self, "avg_pool2d");
  poolGeometry(a, kernel, stride, padding, {}, ceil_mode, "avg_pool2d");
  TORCH_CHECK(!divisor.has_value() || *divisor != 0, "divisor must be not zero");
  a.count_include_pad = count_include_pad;
  a.divisor = divisor.value_or(0);
  Tensor x = self.contiguous();
  intoOut(out, outShape(self, a.oh, a.ow), [&](Tensor& dst) {
    a.in = x.data_ptr();
    a.out = dst.data_ptr();
    launch(a, x);
  });
  return out;
}

Tensor& avgPoolBackwardOut(const Tensor& grad, const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor, Tensor& gi) {
  checkOutDtype(gi, self.scalar_type());
  if (!kernelFloating(self.scalar_type()))
    return Fallback<at::_ops::avg_pool2d_backward_grad_input>::call(grad, self, kernel, stride, padding, ceil_mode,
                                                                    count_include_pad, divisor, gi);
  SpatialArgs a;
  a.op = SpatialOp::AvgPool;
  a.backward = true;
  planes(a, self, "avg_pool2d_backward");
  poolGeometry(a, kernel, stride, padding, {}, ceil_mode, "avg_pool2d_backward");
  TORCH_CHECK(!divisor.has_value() || *divisor != 0, "divisor must be not zero");
  a.count_include_pad = count_include_pad;
  a.divisor = divisor.value_or(0);
  Tensor g = grad.contiguous();
  TORCH_CHECK(g.numel() == a.planes * a.oh * a.ow, "avg_pool2d_backward: expected grad_output of shape ",
              outShape(self, a.oh, a.ow), ", but got ", grad.sizes());
  intoOut(gi, self.sizes(), [&](Tensor& dst) {
    a.in = g.data_ptr();
    a.out = dst.data_ptr();
    launch(a, g);
  });
  return gi;
}

// The arguments of an adaptive pool over `self`'s planes with an oh x ow output.
SpatialArgs adaptiveArgs(SpatialOp op, bool backward, const Tensor& self, int64_t oh, int64_t ow, const char* name) {
  SpatialArgs a;
  a.op = op;
  a.backward = backward;
  planes(a, self, name);
  a.oh = oh;
  a.ow = ow;
  return a;
}

Tensor adaptiveAvgPool(const Tensor& self, at::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2, but got ", output_size.size());
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
              "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {",
              output_size[0], ", ", output_size[1], "}");
  SpatialArgs a =
      adaptiveArgs(SpatialOp::AdaptiveAvg, false, self, output_size[0], output_size[1], "adaptive_avg_pool2d");
  Tensor x = self.contiguous();
  Tensor out = at::empty(outShape(self, a.oh, a.ow), x.options());
  a.in = x.data_ptr();
  a.out = out.data_ptr();
  launch(a, x);
  return out;
}

Tensor adaptiveAvgPoolBackward(const Tensor& grad, const Tensor& self) {
  SpatialArgs a =
      adaptiveArgs(SpatialOp::AdaptiveAvg, true, self, grad.size(-2), grad.size(-1), "adaptive_avg_pool2d_backward");
  Tensor g = grad.contiguous();
  Tensor gi = at::empty(self.sizes(), g.options());
  a.in = g.data_ptr();
  a.out = gi.data_ptr();
  launch(a, g);
  return gi;
}

// adaptive_max_pool2d: ATen's meta kernel checks the arguments and gives the shapes; the kernel fills contiguous
// results, which the out= tensors then take (channels-last inputs come back in ATen's layout through the copy).
std::tuple<Tensor&, Tensor&> adaptiveMaxPoolOut(const Tensor& self, at::IntArrayRef output_size, Tensor& out,
                                                Tensor& indices) {
  const auto shapes = at::adaptive_max_pool2d(metaLike(self), output_size);
  SpatialArgs a =
      adaptiveArgs(SpatialOp::AdaptiveMax, false, self, output_size[0], output_size[1], "adaptive_max_pool2d");
  Tensor x = self.contiguous();
  Tensor values = at::empty(std::get<0>(shapes).sizes(), x.options());
  Tensor idx = at::empty(std::get<1>(shapes).sizes(), x.options().dtype(at::kLong));
  a.in = x.data_ptr();
  a.out = values.data_ptr();
  a.indices = idx.data_ptr<int64_t>();
  launch(a, x);
  assignExactOut(out, values);
  assignExactOut(indices, idx);
  return {out, indices};
}

Tensor& adaptiveMaxPoolBackwardOut(const Tensor& grad, const Tensor& self, const Tensor& indices, Tensor& gi) {
  at::adaptive_max_pool2d_backward(metaLike(grad), metaLike(self), metaLike(indices));  // ATen's checks
  TORCH_CHECK(grad.scalar_type() == self.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `gradOutput` but got dtype ", grad.scalar_type());
  TORCH_CHECK(indices.sizes() == grad.sizes() && indices.scalar_type() == at::kLong,
              "adaptive_max_pool2d_backward: expected int64 indices of the gradient's shape ", grad.sizes(), ", got ",
              indices.scalar_type(), " of shape ", indices.sizes());
  SpatialArgs a =
      adaptiveArgs(SpatialOp::AdaptiveMax, true, self, grad.size(-2), grad.size(-1), "adaptive_max_pool2d_backward");
  Tensor g = grad.contiguous(), idx = indices.contiguous();
  Tensor result = at::empty(self.sizes(), g.options());
  a.in = g.data_ptr();
  a.out = result.data_ptr();
  a.indices = idx.data_ptr<int64_t>();
  launch(a, g);
  return assignExactOut(gi, result);
}

double nearestScale(int64_t in, int64_t out, OptD scale) {
  return scale.has_value() && *scale > 0 ? 1.0 / *scale : static_cast<double>(in) / static_cast<double>(out);
}
double linearScale(int64_t in, int64_t out, bool align, OptD scale) {
  if (align) return out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0.0;
  return nearestScale(in, out, scale);
}

void upsampleSizes(SpatialArgs& a, at::IntArrayRef output_size, const char* op) {
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  a.oh = output_size[0];
  a.ow = output_size[1];
  TORCH_CHECK(a.oh > 0 && a.ow > 0 && a.ih > 0 && a.iw > 0, op,
              ": input and output sizes should be greater than 0, but got input (H: ", a.ih, ", W: ", a.iw,
              ") output (H: ", a.oh, ", W: ", a.ow, ")");
}

Tensor& upsampleOut(SpatialOp op, const Tensor& self, at::IntArrayRef output_size, bool align, OptD sh, OptD sw,
                    Tensor& out) {
  const char* name = op == SpatialOp::Nearest ? "upsample_nearest2d" : "upsample_bilinear2d";
  TORCH_CHECK(self.dim() == 4, name, ": expected a 4D input, but got ", self.sizes());
  checkOutDtype(out, self.scalar_type());
  if (self.scalar_type() == at::kByte) {  // images: through float32 (exact for nearest), rounded back as the CPU
    Tensor f = at::empty({0}, self.options().dtype(at::kFloat));
    upsampleOut(op, self.to(at::kFloat), output_size, align, sh, sw, f);
    at::native::resize_output(out, f.sizes());
    out.copy_(op == SpatialOp::Nearest ? f : f.round_().clamp_(0, 255));
    return out;
  }
  SpatialArgs a;
  a.op = op;
  planes(a, self, name);
  upsampleSizes(a, output_size, name);
  a.align_corners = align;
  a.scale_h = op == SpatialOp::Nearest ? nearestScale(a.ih, a.oh, sh) : linearScale(a.ih, a.oh, align, sh);
  a.scale_w = op == SpatialOp::Nearest ? nearestScale(a.iw, a.ow, sw) : linearScale(a.iw, a.ow, align, sw);
  Tensor x = self.contiguous();
  intoOut(out, outShape(self, a.oh, a.ow), [&](Tensor& dst) {
    a.in = x.data_ptr();
    a.out = dst.data_ptr();
    launch(a, x);
  });
  return out;
}

Tensor& upsampleBackwardOut(SpatialOp op, const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                            bool align, OptD sh, OptD sw, Tensor& gi) {
  const char* name = op == SpatialOp::Nearest ? "upsample_nearest2d_backward" : "upsample_bilinear2d_backward";
  TORCH_CHECK(input_size.size() == 4, name, ": expected input_size of 4 values, but got ", input_size);
  checkOutDtype(gi, grad.scalar_type());
  SpatialArgs a;
  a.op = op;
  a.backward = true;
  TORCH_CHECK(kernelFloating(grad.scalar_type()), name, ": expected a floating point gradient, but got ",
              grad.scalar_type());
  a.dtype = toKernelDType(grad.scalar_type());
  a.planes = input_size[0] * input_size[1];
  a.ih = input_size[2];
  a.iw = input_size[3];
  upsampleSizes(a, output_size, name);
  TORCH_CHECK(grad.numel() == a.planes * a.oh * a.ow, name, ": expected grad_output with ", a.planes * a.oh * a.ow,
              " elements, but got ", grad.sizes());
  a.align_corners = align;
  a.scale_h = op == SpatialOp::Nearest ? nearestScale(a.ih, a.oh, sh) : linearScale(a.ih, a.oh, align, sh);
  a.scale_w = op == SpatialOp::Nearest ? nearestScale(a.iw, a.ow, sw) : linearScale(a.iw, a.ow, align, sw);
  Tensor g = grad.contiguous();
  intoOut(gi, input_size, [&](Tensor& dst) {
    a.in = g.data_ptr();
    a.out = dst.data_ptr();
    launch(a, g);
  });
  return gi;
}

Tensor& nearestOut(const Tensor& self, at::IntArrayRef output_size, OptD sh, OptD sw, Tensor& out) {
  return upsampleOut(SpatialOp::Nearest, self, output_size, false, sh, sw, out);
}
Tensor& nearestBackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size, OptD sh,
                           OptD sw, Tensor& gi) {
  return upsampleBackwardOut(SpatialOp::Nearest, grad, output_size, input_size, false, sh, sw, gi);
}
Tensor& bilinearOut(const Tensor& self, at::IntArrayRef output_size, bool align, OptD sh, OptD sw, Tensor& out) {
  return upsampleOut(SpatialOp::Bilinear, self, output_size, align, sh, sw, out);
}
Tensor& bilinearBackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size, bool align,
                            OptD sh, OptD sw, Tensor& gi) {
  return upsampleBackwardOut(SpatialOp::Bilinear, grad, output_size, input_size, align, sh, sw, gi);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "max_pool2d_with_indices.out", maxPoolOut);
  MT_IMPL(m, "max_pool2d_with_indices_backward.grad_input", maxPoolBackwardOut);
  MT_IMPL(m, "avg_pool2d.out", avgPoolOut);
  MT_IMPL(m, "avg_pool2d_backward.grad_input", avgPoolBackwardOut);
  MT_IMPL(m, "_adaptive_avg_pool2d", adaptiveAvgPool);
  MT_IMPL(m, "adaptive_max_pool2d.out", adaptiveMaxPoolOut);
  MT_IMPL(m, "adaptive_max_pool2d_backward.grad_input", adaptiveMaxPoolBackwardOut);
  MT_IMPL(m, "_adaptive_avg_pool2d_backward", adaptiveAvgPoolBackward);
  MT_IMPL(m, "upsample_nearest2d.out", nearestOut);
  MT_IMPL(m, "upsample_nearest2d_backward.grad_input", nearestBackwardOut);
  MT_IMPL(m, "upsample_bilinear2d.out", bilinearOut);
  MT_IMPL(m, "upsample_bilinear2d_backward.grad_input", bilinearBackwardOut);
}

} // namespace mytorch
