// Op table: im2col and col2im (F.unfold and F.fold, each the other's gradient) on the convolution family's
// kernels (Note [Convolution family] in mytorch/conv.h), with ATen's argument checks (im2col_shape_check.h).
// Inputs are made contiguous; results are contiguous, as ATen's. col2im gathers, for each image element, the
// column entries that read it, summed in the opmath type (the CPU adds them into the image at its own dtype; bool
// ORs). The CPU's dtypes: floating, complex and bool; the others go to the CPU, which refuses them.
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/im2col_shape_check.h>
#include <ATen/ops/col2im_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/im2col_ops.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Runtime.h"
#include "mytorch/conv.h"

namespace mytorch {
namespace {

using at::IntArrayRef;
using at::Tensor;

void checkPairs(IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  TORCH_CHECK(kernel_size.size() == 2, "It is expected kernel_size equals to 2, but got size ", kernel_size.size());
  TORCH_CHECK(dilation.size() == 2, "It is expected dilation equals to 2, but got size ", dilation.size());
  TORCH_CHECK(padding.size() == 2, "It is expected padding equals to 2, but got size ", padding.size());
  TORCH_CHECK(stride.size() == 2, "It is expected stride equals to 2, but got size ", stride.size());
  for (IntArrayRef v : {kernel_size, dilation, padding, stride})
    for (int64_t e : v)
      TORCH_CHECK(e >= -std::numeric_limits<int>::max() && e <= std::numeric_limits<int>::max(),
                  "im2col/col2im: expected kernel_size, dilation, padding and stride within 32-bit integers, but got ",
                  kernel_size, ", ", dilation, ", ", padding, ", ", stride);
}

// The dtypes ATen's im2col/col2im take (its CPU kernels'): floating, complex64/128 and bool.
bool foldDtype(c10::ScalarType t) {
  return kernelFloating(t) || t == at::kComplexFloat || t == at::kComplexDouble || t == at::kBool;
}

// The geometry of one call: image [n, c, ih, iw], columns [n, c*kh*kw, oh*ow].
Im2ColArgs geometry(c10::ScalarType dtype, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
                    IntArrayRef stride) {
  Im2ColArgs a;
  a.dtype = toKernelDType(dtype);
  a.kh = static_cast<int>(kernel_size[0]);
  a.kw = static_cast<int>(kernel_size[1]);
  a.dh = static_cast<int>(dilation[0]);
  a.dw = static_cast<int>(dilation[1]);
  a.ph = static_cast<int>(padding[0]);
  a.pw = static_cast<int>(padding[1]);
  a.sh = static_cast<int>(stride[0]);
  a.sw = static_cast<int>(stride[1]);
  return a;
}

// The column positions (oh, ow) of a's image, kernel, stride, padding and dilation.
void positions(Im2ColArgs& a) {
  a.oh = (a.ih + 2 * a.ph - (a.dh * (a.kh - 1) + 1)) / a.sh + 1;
  a.ow = (a.iw + 2 * a.pw - (a.dw * (a.kw - 1) + 1)) / a.sw + 1;
}

void launch(Im2ColArgs a, const Tensor& in, const Tensor& out) {
  a.in = in.data_ptr();
  a.out = out.data_ptr();
  c10::DeviceGuard guard(in.device());
  MT_RT_CHECK(kernels::im2col(a, streamFor(in)));
}

Tensor unfoldImage(const Tensor& self, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
                   IntArrayRef stride) {
  if (!foldDtype(self.scalar_type()))
    return Fallback<at::_ops::im2col>::call(self, kernel_size, dilation, padding, stride);
  checkPairs(kernel_size, dilation, padding, stride);
  at::native::im2col_shape_check(self, Tensor(), kernel_size[0], kernel_size[1], dilation[0], dilation[1], padding[0],
                                 padding[1], stride[0], stride[1]);
  const bool batched = self.dim() == 4;
  const Tensor x = (batched ? self : self.unsqueeze(0)).contiguous();
  Im2ColArgs a = geometry(x.scalar_type(), kernel_size, dilation, padding, stride);
  a.n = x.size(0);
  a.c = x.size(1);
  a.ih = x.size(2);
  a.iw = x.size(3);
  positions(a);
  Tensor cols = at::empty({a.n, a.c * a.kh * a.kw, a.oh * a.ow}, x.options());
  if (cols.numel() > 0) launch(a, x, cols);
  return batched ? cols : cols.squeeze(0);
}

Tensor foldColumns(const Tensor& self, c10::SymIntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation,
                   IntArrayRef padding, IntArrayRef stride) {
  if (!foldDtype(self.scalar_type()))
    return Fallback<at::_ops::col2im>::call(self, C10_AS_INTARRAYREF_SLOW(output_size), kernel_size, dilation, padding,
                                            stride);
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  checkPairs(kernel_size, dilation, padding, stride);
  const int64_t out_h = output_size[0].guard_int(__FILE__, __LINE__);
  const int64_t out_w = output_size[1].guard_int(__FILE__, __LINE__);
  at::native::col2im_shape_check(self, Tensor(), out_h, out_w, kernel_size[0], kernel_size[1], dilation[0], dilation[1],
                                 padding[0], padding[1], stride[0], stride[1]);
  const bool batched = self.dim() == 3;
  const Tensor cols = (batched ? self : self.unsqueeze(0)).contiguous();
  Im2ColArgs a = geometry(cols.scalar_type(), kernel_size, dilation, padding, stride);
  a.col2im = true;
  a.n = cols.size(0);
  a.c = cols.size(1) / (int64_t(a.kh) * a.kw);
  a.ih = out_h;
  a.iw = out_w;
  positions(a);
  Tensor image = at::empty({a.n, a.c, a.ih, a.iw}, cols.options());
  if (image.numel() > 0) launch(a, cols, image);
  return batched ? image : image.squeeze(0);
}

// The CPU's out= rule: out is resized, and must have the input's dtype only when something is written into it.
Tensor& assignFoldOut(Tensor& out, const Tensor& result) {
  if (result.numel() > 0) return assignExactOut(out, result);
  at::native::resize_output(out, result.sizes());
  return out;
}

Tensor& im2colOut(const Tensor& self, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
                  IntArrayRef stride, Tensor& out) {
  if (!foldDtype(self.scalar_type()))
    return Fallback<at::_ops::im2col_out>::call(self, kernel_size, dilation, padding, stride, out);
  return assignFoldOut(out, unfoldImage(self, kernel_size, dilation, padding, stride));
}

Tensor& col2imOut(const Tensor& self, c10::SymIntArrayRef output_size, IntArrayRef kernel_size, IntArrayRef dilation,
                  IntArrayRef padding, IntArrayRef stride, Tensor& out) {
  if (!foldDtype(self.scalar_type()))
    return Fallback<at::_ops::col2im_out>::call(self, C10_AS_INTARRAYREF_SLOW(output_size), kernel_size, dilation,
                                                padding, stride, out);
  return assignFoldOut(out, foldColumns(self, output_size, kernel_size, dilation, padding, stride));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("im2col", TORCH_FN(unfoldImage));
  m.impl("im2col.out", TORCH_FN(im2colOut));
  m.impl("col2im", TORCH_FN(foldColumns));
  m.impl("col2im.out", TORCH_FN(col2imOut));
}

} // namespace mytorch
