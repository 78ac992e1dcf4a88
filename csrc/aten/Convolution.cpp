// Op table: convolution. ATen sends convolutions on PrivateUse1 to convolution_overrideable /
// convolution_backward_overrideable. 1-D and 2-D convolutions (any stride, padding, dilation, groups) of
// floating dtypes run natively as im2col + GEMM (Note [Convolution family]); transposed and 3-D ones still
// run on the CPU here, counted as a fallback (the boxed fallback cannot reach these ops: they have no CPU
// kernel of their own).
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/Glue.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Runtime.h"
#include "mytorch/conv.h"

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

// --- native 1-D / 2-D convolution ----------------------------------------------------------------------------

bool nativeConv(const at::Tensor& input, const at::Tensor& weight, bool transposed) {
  const auto t = input.scalar_type();
  return !transposed && (input.dim() == 3 || input.dim() == 4) && weight.dim() == input.dim() &&
         weight.scalar_type() == t && (t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16);
}

// The geometry of one convolution, 1-D ones as height-1 2-D.
struct Geometry {
  Im2ColArgs a;
  int64_t cout = 0, groups = 1;
  bool one_d = false;
};

Geometry geometry(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                  at::IntArrayRef dilation, int64_t groups) {
  Geometry g;
  g.one_d = input.dim() == 3;
  const size_t sd = g.one_d ? 1 : 2;
  TORCH_CHECK(stride.size() == sd && padding.size() == sd && dilation.size() == sd, "convolution: expected ", sd,
              " stride, padding and dilation values, but got ", stride, ", ", padding, " and ", dilation);
  TORCH_CHECK(groups > 0 && input.size(1) % groups == 0 && weight.size(0) % groups == 0,
              "convolution: expected input channels ", input.size(1), " and output channels ", weight.size(0),
              " divisible by groups=", groups);
  TORCH_CHECK(weight.size(1) * groups == input.size(1), "Given groups=", groups, ", weight of size ", weight.sizes(),
              ", expected input", input.sizes(), " to have ", weight.size(1) * groups, " channels, but got ",
              input.size(1), " channels instead");
  Im2ColArgs& a = g.a;
  a.dtype = toKernelDType(input.scalar_type());
  a.n = input.size(0);
  a.c = input.size(1);
  a.ih = g.one_d ? 1 : input.size(2);
  a.iw = input.size(-1);
  a.kh = g.one_d ? 1 : static_cast<int>(weight.size(2));
  a.kw = static_cast<int>(weight.size(-1));
  a.sh = g.one_d ? 1 : static_cast<int>(stride[0]);
  a.sw = static_cast<int>(stride.back());
  a.ph = g.one_d ? 0 : static_cast<int>(padding[0]);
  a.pw = static_cast<int>(padding.back());
  a.dh = g.one_d ? 1 : static_cast<int>(dilation[0]);
  a.dw = static_cast<int>(dilation.back());
  TORCH_CHECK(a.sh > 0 && a.sw > 0 && a.dh > 0 && a.dw > 0 && a.ph >= 0 && a.pw >= 0,
              "convolution: expected positive stride and dilation and non-negative padding");
  a.oh = (a.ih + 2 * a.ph - a.dh * (a.kh - 1) - 1) / a.sh + 1;
  a.ow = (a.iw + 2 * a.pw - a.dw * (a.kw - 1) - 1) / a.sw + 1;
  TORCH_CHECK(a.oh > 0 && a.ow > 0, "Calculated output size is too small: input ", input.sizes(), ", kernel ",
              weight.sizes());
  g.cout = weight.size(0);
  g.groups = groups;
  return g;
}

at::Tensor columns(const at::Tensor& x, Im2ColArgs a) {
  at::Tensor cols = at::empty({a.n, a.c * a.kh * a.kw, a.oh * a.ow}, x.options());
  a.col2im = false;
  a.in = x.data_ptr();
  a.out = cols.data_ptr();
  c10::DeviceGuard guard(x.device());
  MT_RT_CHECK(kernels::im2col(a, streamFor(x)));
  return cols;
}

// One pass through the device's convolution library (cuDNN on cuda; on sim the kernels' own blocked im2col + GEMM,
// Note [Sim convolution]); false when there is none (a cuda machine without cuDNN, the emulator), and the caller
// takes im2col + GEMM.
bool libraryPass(ConvPass pass, const Geometry& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor& dy,
                 const at::Tensor& out) {
  ConvArgs c;
  c.pass = pass;
  c.geom = g.a;
  c.cout = g.cout;
  c.groups = g.groups;
  c.x = x.defined() ? x.data_ptr() : nullptr;
  c.w = w.defined() ? w.data_ptr() : nullptr;
  c.dy = dy.defined() ? dy.data_ptr() : nullptr;
  c.out = out.data_ptr();
  c.allow_tf32 = at::globalContext().allowTF32CuDNN();
  c.deterministic = at::globalContext().deterministicAlgorithms() || at::globalContext().deterministicCuDNN();
  c10::DeviceGuard guard(out.device());
  const rt::Stream s = streamFor(out);
  size_t bytes = 0;
  const rt::Status st = kernels::convolution(c, &bytes, s);
  if (st == rt::Status::Unavailable) return false;
  MT_RT_CHECK(st);
  at::Tensor ws = at::empty({static_cast<int64_t>(bytes)}, out.options().dtype(at::kByte));
  c.workspace = bytes ? ws.data_ptr() : nullptr;
  c.workspace_bytes = bytes;
  MT_RT_CHECK(kernels::convolution(c, nullptr, s));
  return true;
}

at::Tensor convForward(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  Geometry g = geometry(input, weight, stride, padding, dilation, groups);
  const Im2ColArgs& a = g.a;
  at::Tensor x = input.contiguous();
  const int64_t k = (a.c / groups) * a.kh * a.kw, cg = g.cout / groups, l = a.oh * a.ow;
  at::Tensor out = at::empty({a.n, g.cout, l}, x.options());
  const bool lib = libraryPass(ConvPass::Forward, g, x, weight.contiguous(), at::Tensor(), out);
  at::Tensor cols = lib ? at::Tensor() : columns(x, a);
  at::Tensor w2 = weight.contiguous().view({g.cout, k});
  for (int64_t gi = 0; gi < groups && !lib; ++gi) {
    at::Tensor wg = w2.narrow(0, gi * cg, cg).unsqueeze(0).expand({a.n, cg, k});
    at::Tensor og = out.narrow(1, gi * cg, cg);
    if (groups == 1) at::bmm_out(og, wg, cols);
    else og.copy_(at::bmm(wg, cols.narrow(1, gi * k, k)));
  }
  if (bias.has_value() && bias->defined()) out.add_(bias->view({1, g.cout, 1}));
  return g.one_d ? out.view({a.n, g.cout, a.ow}) : out.view({a.n, g.cout, a.oh, a.ow});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convBackward(const at::Tensor& grad_output, const at::Tensor& input,
                                                            const at::Tensor& weight, at::IntArrayRef stride,
                                                            at::IntArrayRef padding, at::IntArrayRef dilation,
                                                            int64_t groups, std::array<bool, 3> mask) {
  Geometry g = geometry(input, weight, stride, padding, dilation, groups);
  Im2ColArgs a = g.a;
  const int64_t k = (a.c / groups) * a.kh * a.kw, cg = g.cout / groups, l = a.oh * a.ow;
  at::Tensor go = grad_output.contiguous().view({a.n, g.cout, l});
  at::Tensor gi, gw, gb;
  if (mask[1]) {
    gw = at::empty({g.cout, k}, weight.options());
    const bool lib = libraryPass(ConvPass::BackwardFilter, g, input.contiguous(), at::Tensor(), go, gw);
    at::Tensor cols = lib ? at::Tensor() : columns(input.contiguous(), a);
    for (int64_t gidx = 0; gidx < groups && !lib; ++gidx) {
      at::Tensor part = at::bmm(go.narrow(1, gidx * cg, cg), cols.narrow(1, gidx * k, k).transpose(1, 2));
      gw.narrow(0, gidx * cg, cg).copy_(part.sum(0));
    }
    gw = gw.view(weight.sizes());
  }
  if (mask[2]) gb = go.sum(at::IntArrayRef{0, 2});
  if (mask[0]) {
    gi = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
    if (libraryPass(ConvPass::BackwardData, g, at::Tensor(), weight.contiguous(), go, gi)) return {gi, gw, gb};
    at::Tensor w2 = weight.contiguous().view({g.cout, k});
    at::Tensor gcols = at::empty({a.n, a.c * a.kh * a.kw, l}, go.options());
    for (int64_t gidx = 0; gidx < groups; ++gidx) {
      at::Tensor wt = w2.narrow(0, gidx * cg, cg).t().unsqueeze(0).expand({a.n, k, cg});
      at::Tensor dst = gcols.narrow(1, gidx * k, k);
      if (groups == 1) at::bmm_out(dst, wt, go);
      else dst.copy_(at::bmm(wt, go.narrow(1, gidx * cg, cg)));
    }
    a.col2im = true;
    a.in = gcols.data_ptr();
    a.out = gi.data_ptr();
    c10::DeviceGuard guard(gi.device());
    MT_RT_CHECK(kernels::im2col(a, streamFor(gi)));
  }
  return {gi, gw, gb};
}

at::Tensor wrapper_convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                            const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                            at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                            at::IntArrayRef output_padding, int64_t groups) {
  if (nativeConv(input, weight, transposed)) return convForward(input, weight, bias, stride, padding, dilation, groups);
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
  if (nativeConv(input, weight, transposed))
    return convBackward(grad_output, input, weight, stride, padding, dilation, groups, output_mask);
  static const std::string name = "aten::convolution_backward_overrideable";
  beginFallback(name);
  RECORD_FUNCTION("mytorch::fallback::" + name, std::vector<c10::IValue>());
  int64_t to_cpu = 0, to_dev = 0;
  // The bias has one value per output channel: weight is (out, in/groups, ...) or, transposed, (in, out/groups, ...).
  const std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * groups : weight.size(0)};
  auto [gi, gw, gb] =
      at::convolution_backward(toHost(grad_output, &to_cpu), toHost(input, &to_cpu), toHost(weight, &to_cpu),
                               bias_sizes, stride, padding, dilation, transposed, output_padding, groups, output_mask);
  const at::Device d = input.device();
  auto result = std::make_tuple(toDevice(gi, d, &to_dev), toDevice(gw, d, &to_dev), toDevice(gb, d, &to_dev));
  countFallback(name, to_cpu, to_dev);
  return result;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "convolution_overrideable", wrapper_convolution_overrideable);
  MT_IMPL(m, "convolution_backward_overrideable", wrapper_convolution_backward_overrideable);
}

} // namespace mytorch
