// Op table: convolution. ATen sends convolutions on PrivateUse1 to convolution_overrideable /
// convolution_backward_overrideable. 1-D, 2-D and 3-D convolutions (any stride, padding, dilation, groups),
// transposed ones too (Note [Transposed convolution]), of the floating dtypes and of the integer ones the CPU takes,
// run natively: cuDNN or im2col + GEMM (Note [Convolution family]). Other dtypes (bool, mixed) run on the CPU here,
// which refuses them as it does (the boxed fallback cannot reach these ops: they have no CPU kernel of their own).
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/convolution_backward.h>
#include <ATen/ops/bmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Fallback.h"
#include "csrc/core/Graph.h"
#include "csrc/core/Runtime.h"
#include "csrc/aten/glue/HostRoute.h"
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

// --- native convolution ----------------------------------------------------------------------------------------

// 1-D, 2-D and 3-D convolutions, transposed ones too (Note [Transposed convolution]): of the floating dtypes, and
// of the integer ones where the CPU has a kernel (torch.cuda has none): int64 always, the other integer dtypes only
// undilated and not transposed (ATen's slow_conv2d/3d take every integer dtype, its dilated and transposed ones
// int64 alone). The rest reaches the CPU, which refuses it with its own message.
bool nativeConv(const at::Tensor& input, const at::Tensor& weight, bool transposed, at::IntArrayRef dilation) {
  const auto t = input.scalar_type();
  if (input.dim() < 3 || input.dim() > 5 || weight.dim() != input.dim() || weight.scalar_type() != t) return false;
  if (kernelFloating(t) || t == at::kLong) return true;
  const bool dilated = std::any_of(dilation.begin(), dilation.end(), [](int64_t d) { return d != 1; });
  return c10::isIntegralType(t, /*includeBool=*/false) && !transposed && !dilated;
}

// The geometry of one convolution: its spatial dims right-aligned onto (depth, height, width), the missing ones of
// size 1 (1-D as depth-1 height-1 3-D, 2-D as depth-1).
struct Geometry {
  Im2ColArgs a;
  int64_t cout = 0, groups = 1;
  int64_t spatial = 2;

  std::vector<int64_t> outputShape() const {
    std::vector<int64_t> shape{a.n, cout};
    const int64_t all[3] = {a.od, a.oh, a.ow};
    shape.insert(shape.end(), all + 3 - spatial, all + 3);
    return shape;
  }
};

int toInt(int64_t v, const char* what) {
  TORCH_CHECK(v >= -std::numeric_limits<int>::max() && v <= std::numeric_limits<int>::max(), "convolution: expected ",
              what, " within 32-bit integers, but got ", v);
  return static_cast<int>(v);
}

Geometry geometry(const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride, at::IntArrayRef padding,
                  at::IntArrayRef dilation, int64_t groups) {
  Geometry g;
  g.spatial = input.dim() - 2;
  const size_t sd = static_cast<size_t>(g.spatial);
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
  a.id = a.ih = 1;
  int64_t* in[3] = {&a.id, &a.ih, &a.iw};
  int64_t* out[3] = {&a.od, &a.oh, &a.ow};
  int* k[3] = {&a.kd, &a.kh, &a.kw};
  int* s[3] = {&a.sd, &a.sh, &a.sw};
  int* p[3] = {&a.pd, &a.ph, &a.pw};
  int* d[3] = {&a.dd, &a.dh, &a.dw};
  for (size_t i = 0; i < sd; ++i) {
    const size_t j = 3 - sd + i;
    *in[j] = input.size(2 + i);
    *k[j] = toInt(weight.size(2 + i), "kernel sizes");
    *s[j] = toInt(stride[i], "strides");
    *p[j] = toInt(padding[i], "paddings");
    *d[j] = toInt(dilation[i], "dilations");
  }
  for (size_t j = 0; j < 3; ++j) {
    TORCH_CHECK(*s[j] > 0 && *d[j] > 0 && *p[j] >= 0,
                "convolution: expected positive stride and dilation and non-negative padding, but got ", stride, ", ",
                dilation, " and ", padding);
    *out[j] = (*in[j] + 2 * int64_t(*p[j]) - int64_t(*d[j]) * (*k[j] - 1) - 1) / *s[j] + 1;
    TORCH_CHECK(*out[j] > 0, "Calculated output size is too small: input ", input.sizes(), ", kernel ", weight.sizes());
  }
  g.cout = weight.size(0);
  g.groups = groups;
  return g;
}

at::Tensor columns(const at::Tensor& x, Im2ColArgs a) {
  at::Tensor cols = at::empty({a.n, a.c * a.taps(), a.positions()}, x.options());
  a.col2im = false;
  a.in = x.data_ptr();
  a.out = cols.data_ptr();
  c10::DeviceGuard guard(x.device());
  MT_RT_CHECK(kernels::im2col(a, streamFor(x)));
  return cols;
}

// Note [Sim convolution host route]
// On sim, a convolution's forward and data-gradient passes of float32 or bfloat16 with at least kHostConvMacs
// multiply-adds and a kernel of more than one tap run on the convolution torch's CPU build uses (oneDNN, through
// at::convolution and at::convolution_backward on host views: Note [Sim host route]), as cuda's run on cuDNN; its
// result is copied into the pass's output. The sim's own blocked im2col + GEMM (Note [Sim convolution]) keeps:
//   - the weight gradient: oneDNN splits its sum over the batch and positions by thread count (the bits differed
//     between 1, 2 and 4 threads), where the sim's tiles fix it by the sizes;
//   - small convolutions, where the CPU operator's own overhead (~30 us) is more than the sim's whole pass;
//   - 1x1 kernels: the pass is one GEMM, which the sim runs on the CPU BLAS already, and the copy of the result
//     made oneDNN's the slower (conv2d 1x1 of 8x32x56x56 float32 0.72 -> 0.53x the CPU);
//   - graph capture (a host route computes at once; the sim's pass is recorded).
// The forward and data-gradient passes gave the same bits at 1, 2 and 4 threads (each output element one sum).
constexpr int64_t kHostConvMacs = int64_t(1) << 22;

// The geometry's stride, padding and dilation for its `spatial` dims, in ATen's order.
struct Spatial { std::vector<int64_t> stride, padding, dilation, zeros; };
Spatial spatialOf(const Geometry& g) {
  const Im2ColArgs& a = g.a;
  const int64_t s[3] = {a.sd, a.sh, a.sw}, p[3] = {a.pd, a.ph, a.pw}, d[3] = {a.dd, a.dh, a.dw};
  Spatial r;
  for (int64_t j = 3 - g.spatial; j < 3; ++j) {
    r.stride.push_back(s[j]);
    r.padding.push_back(p[j]);
    r.dilation.push_back(d[j]);
    r.zeros.push_back(0);
  }
  return r;
}

bool hostPass(ConvPass pass, const Geometry& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor& dy,
              const at::Tensor& out) {
  const auto t = out.scalar_type();
  if (pass == ConvPass::BackwardFilter || (t != at::kFloat && t != at::kBFloat16) || capturing()) return false;
  const Im2ColArgs& a = g.a;
  if (a.taps() == 1 || a.n * g.cout * a.positions() * (a.c / g.groups) * a.taps() < kHostConvMacs) return false;
  if (!simHostRoute(HostRoute::Conv)) return false;
  const Spatial sp = spatialOf(g);
  const at::Tensor hw = hostView(w);
  if (pass == ConvPass::Forward) {
    const at::Tensor y =
        at::convolution(hostView(x), hw, std::nullopt, sp.stride, sp.padding, sp.dilation, false, sp.zeros, g.groups);
    hostView(out).view(y.sizes()).copy_(y);
    return true;
  }
  // the data gradient: `out` has the input's shape, and only its sizes are read (the weight's gradient is not asked)
  const at::Tensor hout = hostView(out);
  const at::Tensor gy = hostView(dy).view(g.outputShape());
  const at::Tensor gi = std::get<0>(at::convolution_backward(
      gy, hout, hw, std::nullopt, sp.stride, sp.padding, sp.dilation, false, sp.zeros, g.groups, {true, false, false}));
  hout.copy_(gi);
  return true;
}

// One pass through the device's convolution library (cuDNN on cuda; on sim oneDNN for the large ones, Note [Sim
// convolution host route], else the kernels' own blocked im2col + GEMM, Note [Sim convolution]); false when there is
// none (a cuda machine without cuDNN, the emulator), and the caller takes im2col + GEMM.
bool libraryPass(ConvPass pass, const Geometry& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor& dy,
                 const at::Tensor& out) {
  if (!kernelFloating(out.scalar_type())) return false;  // integer convolutions: im2col + the integer GEMM
  if (hostPass(pass, g, x, w, dy, out)) return true;
  ConvArgs c;
  c.pass = pass;
  c.geom = g.a;
  c.cout = g.cout;
  c.groups = g.groups;
  c.x = dataOrNull(x);
  c.w = dataOrNull(w);
  c.dy = dataOrNull(dy);
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
  const int64_t k = (a.c / groups) * a.taps(), cg = g.cout / groups, l = a.positions();
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
  return out.view(g.outputShape());
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convBackward(const at::Tensor& grad_output, const at::Tensor& input,
                                                            const at::Tensor& weight, at::IntArrayRef stride,
                                                            at::IntArrayRef padding, at::IntArrayRef dilation,
                                                            int64_t groups, std::array<bool, 3> mask) {
  Geometry g = geometry(input, weight, stride, padding, dilation, groups);
  Im2ColArgs a = g.a;
  const int64_t k = (a.c / groups) * a.taps(), cg = g.cout / groups, l = a.positions();
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
    at::Tensor gcols = at::empty({a.n, a.c * a.taps(), l}, go.options());
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

// Note [Transposed convolution]
// A transposed convolution is the data gradient of the convolution with the same weight, whose input has the
// transposed one's output shape ((in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1):
// its forward is that convolution's backward-data pass, its input gradient that convolution's forward, and its
// weight gradient that convolution's weight gradient with the roles of input and output gradient exchanged. So
// it runs on the same passes (cuDNN or im2col + GEMM + col2im) as the convolution itself.
std::vector<int64_t> transposedShape(const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride,
                                     at::IntArrayRef padding, at::IntArrayRef dilation, at::IntArrayRef output_padding,
                                     int64_t groups) {
  const size_t sd = x.dim() - 2;
  TORCH_CHECK(stride.size() == sd && padding.size() == sd && dilation.size() == sd && output_padding.size() == sd,
              "convolution: expected ", sd, " stride, padding, dilation and output_padding values");
  std::vector<int64_t> shape{x.size(0), w.size(1) * groups};
  for (size_t i = 0; i < sd; ++i) {
    TORCH_CHECK(output_padding[i] < stride[i] || output_padding[i] < dilation[i],
                "output padding must be smaller than either stride or dilation, but got output_padding=",
                output_padding[i], ", stride=", stride[i], ", dilation=", dilation[i]);
    shape.push_back((x.size(2 + i) - 1) * stride[i] - 2 * padding[i] + dilation[i] * (w.size(2 + i) - 1) +
                    output_padding[i] + 1);
  }
  return shape;
}

// The transposed output then maps back onto the input through the convolution's own output-size rule.
bool outputPaddingBelowStride(at::IntArrayRef output_padding, at::IntArrayRef stride) {
  if (output_padding.size() != stride.size()) return false;
  for (size_t i = 0; i < stride.size(); ++i)
    if (output_padding[i] >= stride[i]) return false;
  return true;
}

// A tensor of `shape` with no memory behind it: the convolution's geometry reads only its sizes.
at::Tensor shapeOnly(const at::Tensor& like, at::IntArrayRef shape) {
  return at::empty({1}, like.options()).expand(shape);
}

// Output paddings up to the dilation (ATen allows them) break that size rule: such a convolution is computed
// without padding, on the full canvas ((in - 1) * stride + dilation * (kernel - 1) + 1), and the output is the
// window [padding, padding + out) of it, zeros past the canvas; its backward pads the gradient back onto the canvas.
struct Canvas {
  bool needed = false;
  std::vector<int64_t> zeros, full;  // the unpadded geometry's padding (0) and canvas sizes per spatial dim
};

Canvas canvasFor(const at::Tensor& x, const at::Tensor& w, at::IntArrayRef stride, at::IntArrayRef padding,
                 at::IntArrayRef dilation, at::IntArrayRef output_padding) {
  Canvas c;
  c.needed = !outputPaddingBelowStride(output_padding, stride);
  for (int64_t i = 0; i + 2 < x.dim(); ++i) {
    c.zeros.push_back(0);
    c.full.push_back((x.size(2 + i) - 1) * stride[i] + dilation[i] * (w.size(2 + i) - 1) + 1);
  }
  return c;
}

// Copies `src` into `dst` (both N, C, spatial...) where they overlap once src is shifted by -shift[i] along spatial
// dim i (shift >= 0): dst[j] = src[j + shift], the rest of dst zero. With the roles swapped it places a window back.
at::Tensor shiftedCopy(const at::Tensor& src, at::IntArrayRef dst_spatial, at::IntArrayRef src_from,
                       at::IntArrayRef dst_from) {
  std::vector<int64_t> shape = src.sizes().vec();
  for (size_t i = 0; i < dst_spatial.size(); ++i) shape[2 + i] = dst_spatial[i];
  at::Tensor out = at::zeros(shape, src.options());
  at::Tensor from = src, to = out;
  for (size_t i = 0; i < dst_spatial.size(); ++i) {
    const int64_t n = std::min(src.size(2 + i) - src_from[i], dst_spatial[i] - dst_from[i]);
    from = from.narrow(2 + i, src_from[i], n);
    to = to.narrow(2 + i, dst_from[i], n);
  }
  to.copy_(from);
  return out;
}

at::Tensor convTransposedForward(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                 at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                 at::IntArrayRef output_padding, int64_t groups) {
  const auto shape = transposedShape(x, weight, stride, padding, dilation, output_padding, groups);
  const Canvas c = canvasFor(x, weight, stride, padding, dilation, output_padding);
  at::Tensor y;
  if (c.needed) {
    std::vector<int64_t> full{shape[0], shape[1]};
    full.insert(full.end(), c.full.begin(), c.full.end());
    at::Tensor canvas = std::get<0>(
        convBackward(x, shapeOnly(x, full), weight, stride, c.zeros, dilation, groups, {true, false, false}));
    y = shiftedCopy(canvas, at::IntArrayRef(shape).slice(2), padding, c.zeros);  // the window [padding, ...)
  } else {
    y = std::get<0>(
        convBackward(x, shapeOnly(x, shape), weight, stride, padding, dilation, groups, {true, false, false}));
  }
  if (bias.has_value() && bias->defined()) {
    std::vector<int64_t> b(y.dim(), 1);
    b[1] = -1;
    y.add_(bias->view(b));
  }
  return y;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convTransposedBackward(const at::Tensor& grad_output,
                                                                      const at::Tensor& x, const at::Tensor& weight,
                                                                      at::IntArrayRef stride, at::IntArrayRef padding,
                                                                      at::IntArrayRef dilation,
                                                                      at::IntArrayRef output_padding, int64_t groups,
                                                                      std::array<bool, 3> mask) {
  const Canvas c = canvasFor(x, weight, stride, padding, dilation, output_padding);
  const at::Tensor gy = c.needed ? shiftedCopy(grad_output, c.full, c.zeros, padding) : grad_output;  // back on it
  const at::IntArrayRef pad = c.needed ? at::IntArrayRef(c.zeros) : padding;
  at::Tensor gi, gw, gb;
  if (mask[0]) gi = convForward(gy, weight, std::nullopt, stride, pad, dilation, groups);
  if (mask[1]) gw = std::get<1>(convBackward(x, gy, weight, stride, pad, dilation, groups, {false, true, false}));
  if (mask[2]) {
    std::vector<int64_t> dims{0};
    for (int64_t d = 2; d < grad_output.dim(); ++d) dims.push_back(d);
    gb = grad_output.sum(dims);
  }
  return {gi, gw, gb};
}

at::Tensor convolutionOverrideable(const at::Tensor& input, const at::Tensor& weight,
                                   const std::optional<at::Tensor>& bias, at::IntArrayRef stride,
                                   at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed,
                                   at::IntArrayRef output_padding, int64_t groups) {
  // ATen's _convolution checks these for its own backends (CUDA's, oneDNN's), not for the overrideable one
  TORCH_CHECK(input.dtype() == weight.dtype(), "Input type (", input.dtype(), ") and weight type (", weight.dtype(),
              ") should be the same");
  TORCH_CHECK(!bias.has_value() || !bias->defined() || input.dtype() == bias->dtype(), "Input type (", input.dtype(),
              ") and bias type (", bias->dtype(), ") should be the same");
  if (nativeConv(input, weight, transposed, dilation))
    return transposed ? convTransposedForward(input, weight, bias, stride, padding, dilation, output_padding, groups)
                      : convForward(input, weight, bias, stride, padding, dilation, groups);
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

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolutionBackwardOverrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  if (nativeConv(input, weight, transposed, dilation))
    return transposed ? convTransposedBackward(grad_output, input, weight, stride, padding, dilation, output_padding,
                                               groups, output_mask)
                      : convBackward(grad_output, input, weight, stride, padding, dilation, groups, output_mask);
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
  MT_IMPL(m, "convolution_overrideable", convolutionOverrideable);
  MT_IMPL(m, "convolution_backward_overrideable", convolutionBackwardOverrideable);
}

} // namespace mytorch
