// Op table: 2-D and 3-D max / average / adaptive-max / adaptive-average pooling and nearest / bilinear
// upsampling, forward and backward, on the spatial family (Note [Spatial family]). Output sizes and argument checks
// follow ATen.
#include <ATen/core/Tensor.h>
#include <ATen/ops/adaptive_max_pool2d.h>
#include <ATen/ops/adaptive_max_pool2d_backward.h>
#include <ATen/ops/adaptive_max_pool3d.h>
#include <ATen/ops/adaptive_max_pool3d_backward.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/avg_pool2d_backward_ops.h>
#include <ATen/ops/avg_pool2d_ops.h>
#include <ATen/ops/avg_pool3d_backward_ops.h>
#include <ATen/ops/avg_pool3d_ops.h>
#include <ATen/ops/max_pool2d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool2d_with_indices_ops.h>
#include <ATen/ops/max_pool3d_with_indices_backward_ops.h>
#include <ATen/ops/max_pool3d_with_indices_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/MetaCache.h"
#include "csrc/core/Fallback.h"
#include "csrc/aten/spatial/Pooling.h"
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

// Input [N, C, (D,) H, W] or [C, (D,) H, W] as planes (dims: 2 or 3 spatial dimensions); checks the shape like ATen.
// Max pooling's forward also takes integers.
void planes(SpatialArgs& a, const Tensor& x, const char* op, bool integers = false, int dims = 2) {
  const int64_t nd = x.dim();
  bool ok = nd == dims + 1 || nd == dims + 2;
  for (int64_t k = nd - dims; ok && k < nd; ++k) ok = x.size(k) > 0;
  TORCH_CHECK(ok, op, ": expected ", dims + 1, "D or ", dims + 2,
              "D (batch mode) tensor with optional 0 dim batch size for input, but got: ", x.sizes());
  TORCH_CHECK(kernelFloating(x.scalar_type()) || (integers && at::isIntegralType(x.scalar_type(), false)), op,
              ": expected a floating point input, but got ", x.scalar_type());
  a.dtype = toKernelDType(x.scalar_type());
  a.iw = x.size(-1);
  a.ih = x.size(-2);
  a.id = dims == 3 ? x.size(-3) : 1;
  a.planes = x.numel() / (a.id * a.ih * a.iw);
}

// The input's shape with its last 2 or 3 dimensions replaced by the output's (od used when dims == 3).
std::vector<int64_t> outShape(const Tensor& x, int64_t oh, int64_t ow, int dims = 2, int64_t od = 1) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end() - dims);
  if (dims == 3) s.push_back(od);
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

// Kernel, stride, padding and dilation of a dims-D pool (one value or one per dimension each), checked as ATen, and
// the output sizes.
void poolGeometry(SpatialArgs& a, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                  at::IntArrayRef dilation, bool ceil_mode, const char* op, int dims = 2) {
  const size_t n = static_cast<size_t>(dims);
  const char* count = dims == 2 ? "two" : "three";
  TORCH_CHECK(kernel.size() == 1 || kernel.size() == n, op, ": kernel_size must either be a single int, or a tuple of ",
              count, " ints");
  TORCH_CHECK(stride.empty() || stride.size() == 1 || stride.size() == n, op,
              ": stride must either be omitted, a single int, or a tuple of ", count, " ints");
  TORCH_CHECK(padding.size() == 1 || padding.size() == n, op, ": padding must either be a single int, or a tuple of ",
              count, " ints");
  TORCH_CHECK(dilation.empty() || dilation.size() == 1 || dilation.size() == n, op,
              ": dilation must be either a single int, or a tuple of ", count, " ints");
  int* k[3] = {&a.kd, &a.kh, &a.kw};
  int* s[3] = {&a.sd, &a.sh, &a.sw};
  int* p[3] = {&a.pd, &a.ph, &a.pw};
  int* d[3] = {&a.dd, &a.dh, &a.dw};
  const int64_t in[3] = {a.id, a.ih, a.iw};
  int64_t* out[3] = {&a.od, &a.oh, &a.ow};
  for (size_t i = 0; i < n; ++i) {
    const size_t j = 3 - n + i;  // 2-D fills h and w
    *k[j] = pick(kernel, i, 1);
    *s[j] = pick(stride, i, *k[j]);
    *p[j] = pick(padding, i, 0);
    *d[j] = pick(dilation, i, 1);
    TORCH_CHECK(*k[j] > 0, op, ": kernel size should be greater than zero, but got ", kernel);
    TORCH_CHECK(*s[j] > 0, op, ": stride should be greater than zero, but got ", stride);
    TORCH_CHECK(*d[j] > 0, op, ": dilation should be greater than zero, but got ", dilation);
    TORCH_CHECK(*p[j] >= 0 && *p[j] <= *k[j] / 2,
                "pad should be at most half of effective kernel size, but got pad=", padding, ", kernel_size=", kernel);
  }
  for (size_t j = 3 - n; j < 3; ++j) {
    *out[j] = poolOut(in[j], *k[j], *p[j], *s[j], *d[j], ceil_mode);
    TORCH_CHECK(*out[j] > 0, "Given input size: (", at::IntArrayRef(in + 3 - n, n), "). Calculated output size: (",
                *out[j], " along spatial dimension ", j - (3 - n), "). Output size is too small");
  }
}

// The ATen operators and names of the 2-D and 3-D pools (the CPU's kernels answer the dtypes ours lack).
template <int D>
struct PoolOps;
template <>
struct PoolOps<2> {
  using MaxOut = at::_ops::max_pool2d_with_indices_out;
  using MaxBackward = at::_ops::max_pool2d_with_indices_backward_grad_input;
  using AvgOut = at::_ops::avg_pool2d_out;
  using AvgBackward = at::_ops::avg_pool2d_backward_grad_input;
  static constexpr const char* max = "max_pool2d";
  static constexpr const char* avg = "avg_pool2d";
};
template <>
struct PoolOps<3> {
  using MaxOut = at::_ops::max_pool3d_with_indices_out;
  using MaxBackward = at::_ops::max_pool3d_with_indices_backward_grad_input;
  using AvgOut = at::_ops::avg_pool3d_out;
  using AvgBackward = at::_ops::avg_pool3d_backward_grad_input;
  static constexpr const char* max = "max_pool3d";
  static constexpr const char* avg = "avg_pool3d";
};

template <int D>
std::vector<int64_t> outShapeOf(const SpatialArgs& a, const Tensor& x) {
  return outShape(x, a.oh, a.ow, D, a.od);
}

template <int D>
std::tuple<Tensor&, Tensor&> maxPoolOut(const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                        at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, Tensor& out,
                                        Tensor& indices) {
  checkOutDtype(out, self.scalar_type());
  checkOutDtype(indices, at::kLong);
  if (!kernelFloating(self.scalar_type()) && !at::isIntegralType(self.scalar_type(), false))  // bool, complex: the
    return Fallback<typename PoolOps<D>::MaxOut>::call(self, kernel, stride, padding, dilation, ceil_mode, out,
                                                       indices);  // CPU's kernel and its refusal
  SpatialArgs a;
  a.op = SpatialOp::MaxPool;
  planes(a, self, PoolOps<D>::max, /*integers=*/true, D);
  poolGeometry(a, kernel, stride, padding, dilation, ceil_mode, PoolOps<D>::max, D);
  Tensor x = self.contiguous();
  const auto shape = outShapeOf<D>(a, self);
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

template <int D>
Tensor& maxPoolBackwardOut(const Tensor& grad, const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, const Tensor& indices,
                           Tensor& gi) {
  checkOutDtype(gi, self.scalar_type());
  if (!kernelFloating(self.scalar_type()))
    return Fallback<typename PoolOps<D>::MaxBackward>::call(grad, self, kernel, stride, padding, dilation, ceil_mode,
                                                            indices, gi);
  SpatialArgs a;
  a.op = SpatialOp::MaxPool;
  a.backward = true;
  planes(a, self, PoolOps<D>::max, false, D);
  poolGeometry(a, kernel, stride, padding, dilation, ceil_mode, PoolOps<D>::max, D);
  Tensor g = grad.contiguous(), idx = indices.contiguous();
  TORCH_CHECK(g.numel() == a.planes * a.od * a.oh * a.ow && idx.numel() == g.numel() && idx.scalar_type() == at::kLong,
              PoolOps<D>::max, "_backward: expected grad_output and int64 indices of shape ", outShapeOf<D>(a, self),
              ", but got ", grad.sizes(), " and ", indices.sizes(), " (", indices.scalar_type(), ")");
  intoOut(gi, self.sizes(), [&](Tensor& dst) {
    a.in = g.data_ptr();
    a.out = dst.data_ptr();
    a.indices = idx.data_ptr<int64_t>();
    launch(a, g);
  });
  return gi;
}

// max_pool3d_with_indices and its backward are not structured in ATen: their functional forms are kernels too.
std::tuple<Tensor, Tensor> maxPool3d(const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                                     at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode) {
  Tensor out = at::empty({0}, self.options()), indices = at::empty({0}, self.options().dtype(at::kLong));
  maxPoolOut<3>(self, kernel, stride, padding, dilation, ceil_mode, out, indices);
  return {out, indices};
}
Tensor maxPool3dBackward(const Tensor& grad, const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode, const Tensor& indices) {
  Tensor gi = at::empty({0}, self.options());
  return maxPoolBackwardOut<3>(grad, self, kernel, stride, padding, dilation, ceil_mode, indices, gi);
}

template <int D>
Tensor& avgPoolOut(const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride, at::IntArrayRef padding,
                   bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor, Tensor& out) {
  checkOutDtype(out, self.scalar_type());
  const bool int64 = self.scalar_type() == at::kLong;  // the one integer type the CPU averages
  if (!kernelFloating(self.scalar_type()) && !int64)
    return Fallback<typename PoolOps<D>::AvgOut>::call(self, kernel, stride, padding, ceil_mode, count_include_pad,
                                                       divisor, out);
  SpatialArgs a;
  a.op = SpatialOp::AvgPool;
  planes(a, self, PoolOps<D>::avg, int64, D);
  poolGeometry(a, kernel, stride, padding, {}, ceil_mode, PoolOps<D>::avg, D);
  TORCH_CHECK(!divisor.has_value() || *divisor != 0, "divisor must be not zero");
  a.count_include_pad = count_include_pad;
  a.divisor = divisor.value_or(0);
  Tensor x = self.contiguous();
  intoOut(out, outShapeOf<D>(a, self), [&](Tensor& dst) {
    a.in = x.data_ptr();
    a.out = dst.data_ptr();
    launch(a, x);
  });
  return out;
}

template <int D>
Tensor& avgPoolBackwardOut(const Tensor& grad, const Tensor& self, at::IntArrayRef kernel, at::IntArrayRef stride,
                           at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                           std::optional<int64_t> divisor, Tensor& gi) {
  checkOutDtype(gi, self.scalar_type());
  if (!kernelFloating(self.scalar_type()))
    return Fallback<typename PoolOps<D>::AvgBackward>::call(grad, self, kernel, stride, padding, ceil_mode,
                                                            count_include_pad, divisor, gi);
  SpatialArgs a;
  a.op = SpatialOp::AvgPool;
  a.backward = true;
  planes(a, self, PoolOps<D>::avg, false, D);
  poolGeometry(a, kernel, stride, padding, {}, ceil_mode, PoolOps<D>::avg, D);
  TORCH_CHECK(!divisor.has_value() || *divisor != 0, "divisor must be not zero");
  a.count_include_pad = count_include_pad;
  a.divisor = divisor.value_or(0);
  Tensor g = grad.contiguous();
  TORCH_CHECK(g.numel() == a.planes * a.od * a.oh * a.ow, PoolOps<D>::avg, "_backward: expected grad_output of shape ",
              outShapeOf<D>(a, self), ", but got ", grad.sizes());
  intoOut(gi, self.sizes(), [&](Tensor& dst) {
    a.in = g.data_ptr();
    a.out = dst.data_ptr();
    launch(a, g);
  });
  return gi;
}

// The arguments of an adaptive pool over `self`'s planes with an (od x) oh x ow output.
SpatialArgs adaptiveArgs(SpatialOp op, bool backward, const Tensor& self, at::IntArrayRef out_size, const char* name) {
  SpatialArgs a;
  a.op = op;
  a.backward = backward;
  const int dims = static_cast<int>(out_size.size());
  planes(a, self, name, false, dims);
  a.od = dims == 3 ? out_size[0] : 1;
  a.oh = out_size[dims - 2];
  a.ow = out_size[dims - 1];
  return a;
}

Tensor adaptiveAvgPool(const Tensor& self, at::IntArrayRef output_size) {
  TORCH_CHECK(output_size.size() == 2, "adaptive_avg_pool2d: output_size must be 2, but got ", output_size.size());
  TORCH_CHECK(output_size[0] >= 0 && output_size[1] >= 0,
              "adaptive_avg_pool2d: elements of output_size must be greater than or equal to 0 but received {",
              output_size[0], ", ", output_size[1], "}");
  SpatialArgs a = adaptiveArgs(SpatialOp::AdaptiveAvg, false, self, output_size, "adaptive_avg_pool2d");
  Tensor x = self.contiguous();
  Tensor out = at::empty(outShape(self, a.oh, a.ow), x.options());
  a.in = x.data_ptr();
  a.out = out.data_ptr();
  launch(a, x);
  return out;
}

// The 2-D (dims 2) or 3-D adaptive average pooling's input gradient.
Tensor adaptiveAvgBackward(const Tensor& grad, const Tensor& self, int dims) {
  SpatialArgs a = adaptiveArgs(SpatialOp::AdaptiveAvg, true, self, grad.sizes().slice(grad.dim() - dims),
                               dims == 2 ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool3d_backward");
  Tensor g = grad.contiguous();
  Tensor gi = at::empty(self.sizes(), g.options());
  a.in = g.data_ptr();
  a.out = gi.data_ptr();
  launch(a, g);
  return gi;
}

Tensor adaptiveAvgPoolBackward(const Tensor& grad, const Tensor& self) { return adaptiveAvgBackward(grad, self, 2); }

// adaptive_max_pool2d/3d: ATen's meta kernel checks the arguments and gives the shapes; the kernel fills contiguous
// results, which the out= tensors then take (channels-last inputs come back in ATen's layout through the copy).
template <int D>
std::tuple<Tensor&, Tensor&> adaptiveMaxPoolOut(const Tensor& self, at::IntArrayRef output_size, Tensor& out,
                                                Tensor& indices) {
  const auto shapes = cachedMeta(
      "adaptive_max_pool",
      [&] {
        return D == 2 ? at::adaptive_max_pool2d(metaLike(self), output_size)
                      : at::adaptive_max_pool3d(metaLike(self), output_size);
      },
      D, self, output_size);
  SpatialArgs a = adaptiveArgs(SpatialOp::AdaptiveMax, false, self, output_size,
                               D == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d");
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

template <int D>
Tensor& adaptiveMaxPoolBackwardOut(const Tensor& grad, const Tensor& self, const Tensor& indices, Tensor& gi) {
  const char* name = D == 2 ? "adaptive_max_pool2d_backward" : "adaptive_max_pool3d_backward";
  cachedMeta(  // ATen's checks
      "adaptive_max_pool_backward",
      [&] {
        return D == 2 ? at::adaptive_max_pool2d_backward(metaLike(grad), metaLike(self), metaLike(indices))
                      : at::adaptive_max_pool3d_backward(metaLike(grad), metaLike(self), metaLike(indices));
      },
      D, grad, self, indices);
  TORCH_CHECK(grad.scalar_type() == self.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `gradOutput` but got dtype ", grad.scalar_type());
  TORCH_CHECK(indices.sizes() == grad.sizes() && indices.scalar_type() == at::kLong, name,
              ": expected int64 indices of the gradient's shape ", grad.sizes(), ", got ", indices.scalar_type(),
              " of shape ", indices.sizes());
  SpatialArgs a = adaptiveArgs(SpatialOp::AdaptiveMax, true, self, grad.sizes().slice(grad.dim() - D), name);
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

Tensor adaptiveAvgPool3dWindows(const Tensor& self, at::IntArrayRef output_size, Tensor out) {
  SpatialArgs a = adaptiveArgs(SpatialOp::AdaptiveAvg, false, self, output_size, "adaptive_avg_pool3d");
  Tensor x = self.contiguous();
  Tensor values = out.is_contiguous() ? out : at::empty(out.sizes(), x.options());
  a.in = x.data_ptr();
  a.out = values.data_ptr();
  launch(a, x);
  if (!values.is_same(out)) out.copy_(values);
  return out;
}

Tensor adaptiveAvgPool3dWindowsBackward(const Tensor& grad, const Tensor& self) {
  return adaptiveAvgBackward(grad, self, 3);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "max_pool2d_with_indices.out", maxPoolOut<2>);
  MT_IMPL(m, "max_pool2d_with_indices_backward.grad_input", maxPoolBackwardOut<2>);
  MT_IMPL(m, "max_pool3d_with_indices", maxPool3d);
  MT_IMPL(m, "max_pool3d_with_indices.out", maxPoolOut<3>);
  MT_IMPL(m, "max_pool3d_with_indices_backward", maxPool3dBackward);
  MT_IMPL(m, "max_pool3d_with_indices_backward.grad_input", maxPoolBackwardOut<3>);
  MT_IMPL(m, "avg_pool2d.out", avgPoolOut<2>);
  MT_IMPL(m, "avg_pool2d_backward.grad_input", avgPoolBackwardOut<2>);
  MT_IMPL(m, "avg_pool3d.out", avgPoolOut<3>);
  MT_IMPL(m, "avg_pool3d_backward.grad_input", avgPoolBackwardOut<3>);
  MT_IMPL(m, "_adaptive_avg_pool2d", adaptiveAvgPool);
  MT_IMPL(m, "adaptive_max_pool2d.out", adaptiveMaxPoolOut<2>);
  MT_IMPL(m, "adaptive_max_pool2d_backward.grad_input", adaptiveMaxPoolBackwardOut<2>);
  MT_IMPL(m, "adaptive_max_pool3d.out", adaptiveMaxPoolOut<3>);
  MT_IMPL(m, "adaptive_max_pool3d_backward.grad_input", adaptiveMaxPoolBackwardOut<3>);
  MT_IMPL(m, "_adaptive_avg_pool2d_backward", adaptiveAvgPoolBackward);
  MT_IMPL(m, "upsample_nearest2d.out", nearestOut);
  MT_IMPL(m, "upsample_nearest2d_backward.grad_input", nearestBackwardOut);
  MT_IMPL(m, "upsample_bilinear2d.out", bilinearOut);
  MT_IMPL(m, "upsample_bilinear2d_backward.grad_input", bilinearBackwardOut);
}

} // namespace mytorch
