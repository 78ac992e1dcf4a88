// Op table: factories and data movement built from native kernels: arange and linspace (iota kernel),
// cat (copies into slices), flip (the copy kernel with negative strides), roll (two copies per dim),
// repeat (one copy from an expanded view), tril/triu (where over an index mask).
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/le.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/CopyDescription.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/Pointwise.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/copy.h"

namespace mytorch {
namespace {

using at::Tensor;

void runIota(const Tensor& out, IotaArgs p) {
  if (out.numel() == 0) return;
  TORCH_INTERNAL_ASSERT(out.is_contiguous());
  p.data = out.data_ptr();
  p.dtype = toKernelDType(out.scalar_type());
  p.numel = out.numel();
  c10::DeviceGuard guard(out.device());
  MT_RT_CHECK(kernels::iota(p, streamFor(out)));
}

// A complex linspace part by part (ATen's is linear in each part): the iota kernel has no complex dtypes,
// which used to leave the output's memory as it was.
Tensor& complexRange(const Tensor& re, const Tensor& im, Tensor& out) {
  Tensor r = at::view_as_real(out);
  r.select(-1, 0).copy_(re.view(out.sizes()));  // (an out= of the right size keeps its shape)
  r.select(-1, 1).copy_(im.view(out.sizes()));
  return out;
}

Tensor& arangeOut(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, Tensor& out) {
  // as the CPU's and CUDA's kernels (neither has complex or bool dtypes); the iota kernel used to leave complex
  // memory as it was, and a bool range came out all true
  TORCH_CHECK_NOT_IMPLEMENTED(!out.is_complex() && out.scalar_type() != at::kBool,
                              "\"arange_mytorch\" not implemented for '", out.scalar_type(), "'");
  // As ATen: integer outputs take truncated start/step and integer arithmetic; only int64 also sizes the
  // range in integers (the others size it in double).
  const bool integral = at::isIntegralType(out.scalar_type(), false);
  const bool int64_size = out.scalar_type() == at::kLong;
  const double xs = start.toDouble(), xe = end.toDouble(), xstep = step.toDouble();
  TORCH_CHECK(xstep > 0 || xstep < 0, "step must be nonzero");
  TORCH_CHECK(std::isfinite(xs) && std::isfinite(xe), "unsupported range: ", xs, " -> ", xe);
  TORCH_CHECK(((xstep > 0) && (xe >= xs)) || ((xstep < 0) && (xe <= xs)),
              "upper bound and larger bound inconsistent with step sign");
  double size_d = int64_size
                      ? std::ceil(static_cast<double>(end.to<int64_t>() - start.to<int64_t>()) / step.to<int64_t>())
                      : std::ceil((xe - xs) / xstep);
  TORCH_CHECK(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()),
              "invalid size, possible overflow?");
  const auto size = static_cast<int64_t>(size_d);
  // the CPU's: an out= of another number of elements resized with arange's own warning (none when it was empty),
  // one of the right number kept with its shape and strides (Note [Strided out=] in csrc/core/Checked.cpp)
  if (out.numel() != size) {
    if (out.numel() > 0)
      TORCH_WARN("The number of elements in the out tensor of shape ", out.sizes(), " is ", out.numel(),
                 " which does not match the computed number of elements ", size,
                 ". Note that this may occur as a result of rounding error. The out tensor will be resized to a ",
                 "tensor of shape (", size, ",).");
    out.resize_({size});
  }
  IotaArgs p;
  p.start = xs;
  p.step = xstep;
  p.integer = integral;
  if (integral) {
    p.istart = start.to<int64_t>();
    p.istep = step.to<int64_t>();
  }
  if (out.is_contiguous()) {
    runIota(out, p);
  } else {
    Tensor tmp = at::empty({size}, out.options());
    runIota(tmp, p);
    out.copy_(tmp);
  }
  return out;
}

Tensor& linspaceOut(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  if (out.is_complex()) {
    if (out.numel() != steps) out.resize_({steps});
    const auto zs = start.toComplexDouble(), ze = end.toComplexDouble();
    const auto real = out.options().dtype(c10::toRealValueType(out.scalar_type()));
    Tensor re = at::empty({steps}, real), im = at::empty({steps}, real);
    linspaceOut(zs.real(), ze.real(), steps, re);
    linspaceOut(zs.imag(), ze.imag(), steps, im);
    return complexRange(re, im, out);
  }
  if (out.numel() != steps) out.resize_({steps});
  if (steps == 0) return out;
  if (steps == 1) return out.fill_(start);
  IotaArgs p;
  p.start = start.toDouble();
  p.end = end.toDouble();
  p.symmetric = true;
  if (out.is_contiguous()) {
    runIota(out, p);
  } else {
    Tensor tmp = at::empty({steps}, out.options());
    runIota(tmp, p);
    out.copy_(tmp);
  }
  return out;
}

Tensor& catOut(const at::ITensorListRef& tensors, int64_t dim, Tensor& out) {
  auto list = tensors.materialize();
  TORCH_CHECK(!list.empty(), "torch.cat(): expected a non-empty list of Tensors");
  for (const Tensor& t : list) at::assert_no_overlap(out, t);   // as ATen's cat: not even an out= that is an input
  // Legacy behaviour kept by ATen: 1-d empty tensors are skipped.
  std::vector<Tensor> parts;
  for (const Tensor& t : list) {
    if (!(t.dim() == 1 && t.numel() == 0)) parts.push_back(t);
  }
  if (parts.empty()) {
    at::native::resize_output(out, {0});
    return out;
  }
  const Tensor& ref = parts[0];
  dim = at::legacy_cat_wrap_dim(dim, list);
  std::vector<int64_t> shape = ref.sizes().vec();
  int64_t total = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = parts[i];
    TORCH_CHECK(t.dim() == ref.dim(), "Tensors must have same number of dimensions: got ", ref.dim(), " and ", t.dim());
    for (int64_t d = 0; d < ref.dim(); ++d) {
      TORCH_CHECK(d == dim || t.size(d) == ref.size(d), "Sizes of tensors must match except in dimension ", dim,
                  ". Expected size ", ref.size(d), " but got size ", t.size(d), " for tensor number ", i,
                  " in the list.");
    }
    total += t.size(dim);
  }
  shape[static_cast<size_t>(dim)] = total;
  const auto dtype = at::native::result_type(list);
  TORCH_CHECK(at::canCast(dtype, out.scalar_type()),
              "torch.cat(): input types can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, shape);
  int64_t offset = 0;
  c10::DeviceGuard guard(out.device());
  const int64_t out_step = out.stride(dim) * static_cast<int64_t>(out.element_size());
  std::vector<int64_t> part_sizes = shape;
  for (const Tensor& t : parts) {
    const int64_t n = t.size(dim);
    if (n == 0) continue;
    // each part straight into its slice of out with the copy kernel (Note [Copy description without an
    // iterator]); a part on another device or with a lazy conjugate or negative bit through narrow and copy_
    part_sizes[static_cast<size_t>(dim)] = n;
    CopyArgs p;
    if (t.device() == out.device() && !t.is_conj() && !t.is_neg() && !out.is_conj() && !out.is_neg() &&
        copyDescription(p, static_cast<char*>(out.data_ptr()) + offset * out_step, part_sizes, out.strides(),
                        out.scalar_type(), t.const_data_ptr(), t.sizes(), t.strides(), t.scalar_type())) {
      if (p.shape.numel > 0) MT_RT_CHECK(kernels::copy(p, streamFor(out)));
    } else {
      out.narrow(dim, offset, n).copy_(t);
    }
    offset += n;
  }
  return out;
}

// The result takes the input's layout where the input is dense (empty_like's preserve format, as ATen's flip), so a
// transposed input is reversed in its own memory order instead of transposed on the way (flip of a permuted 432K
// floats: 0.10x the CPU with a contiguous result).
Tensor flip(const Tensor& self, at::IntArrayRef dims) {
  Tensor out = at::empty_like(self);
  if (self.numel() == 0) return out;
  const auto flipped = at::dim_list_to_bitset(dims, self.dim());
  TORCH_CHECK(self.dim() <= kMaxDims, "flip supports at most ", kMaxDims, " dimensions");
  CopyArgs p;
  p.shape.ndim = static_cast<int>(self.dim());
  p.shape.numel = self.numel();
  const int64_t es = static_cast<int64_t>(self.element_size());
  char* src = static_cast<char*>(self.data_ptr());
  // Kernel dimension 0 moves fastest: the result's innermost dimension (the tensor's dimensions by the result's
  // strides, largest first; ties keep their order).
  std::vector<int64_t> order(static_cast<size_t>(self.dim()));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return out.stride(a) > out.stride(b); });
  for (int64_t i = 0; i < self.dim(); ++i) {
    const int64_t d = order[static_cast<size_t>(i)];
    const int k = static_cast<int>(self.dim() - 1 - i);
    p.shape.sizes[k] = self.size(d);
    p.dst.strides[k] = out.stride(d) * es;
    int64_t s = self.stride(d) * es;
    if (flipped[static_cast<size_t>(d)]) {
      src += (self.size(d) - 1) * s;
      s = -s;
    }
    p.src.strides[k] = s;
  }
  p.dst.data = out.data_ptr();
  p.src.data = src;
  p.dst.dtype = p.src.dtype = toKernelDType(self.scalar_type());
  p.dst.elem_size = p.src.elem_size = static_cast<int>(es);
  c10::DeviceGuard guard(self.device());
  MT_RT_CHECK(kernels::copy(p, streamFor(self)));
  return out;
}

Tensor roll1(const Tensor& self, int64_t shift, int64_t dim) {
  const int64_t n = self.size(dim);
  Tensor out = at::empty_like(self, at::MemoryFormat::Contiguous);
  if (n == 0 || self.numel() == 0) return out;
  const int64_t s = ((shift % n) + n) % n;
  if (s == 0) return out.copy_(self);
  out.narrow(dim, s, n - s).copy_(self.narrow(dim, 0, n - s));
  out.narrow(dim, 0, s).copy_(self.narrow(dim, n - s, s));
  return out;
}

Tensor roll(const Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  if (dims.empty() && shifts.size() == 1) return roll1(self.flatten(), shifts[0], 0).view(self.sizes());
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dims.size());
  Tensor out = self;
  for (size_t i = 0; i < dims.size(); ++i) out = roll1(out, shifts[i], at::maybe_wrap_dim(dims[i], self.dim()));
  return out;
}

Tensor repeat(const Tensor& self, at::IntArrayRef repeats) {
  TORCH_CHECK(repeats.size() >= static_cast<size_t>(self.dim()),
              "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  const int64_t pad = static_cast<int64_t>(repeats.size()) - self.dim();
  std::vector<int64_t> padded(static_cast<size_t>(pad), 1), out_shape, inter, expanded;
  for (int64_t d = 0; d < self.dim(); ++d) padded.push_back(self.size(d));
  for (size_t i = 0; i < repeats.size(); ++i) {
    TORCH_CHECK(repeats[i] >= 0, "Trying to create tensor with negative dimension ", repeats[i], ": ", repeats);
    out_shape.push_back(padded[i] * repeats[i]);
    inter.push_back(1);
    inter.push_back(padded[i]);
    expanded.push_back(repeats[i]);
    expanded.push_back(padded[i]);
  }
  Tensor out = at::empty(out_shape, self.options());
  if (out.numel() == 0) return out;
  out.view(expanded).copy_(self.reshape(inter).expand(expanded));
  return out;
}

// tril/triu: where(mask, self, 0) in one pass of the engine, the mask (column j kept where j <= i + diagonal for
// tril, j >= i + diagonal for triu) an m x n bool broadcast over the batch, built from two short ranges. Before:
// a long m x n difference, its comparison, zeros, where and a copy (0.2x the CPU).
Tensor& triangleOut(const Tensor& self, int64_t diagonal, bool lower, Tensor& out) {
  TORCH_CHECK(self.dim() >= 2, lower ? "tril" : "triu", ": input tensor must have at least 2 dimensions");
  checkOutDtype(out, self.scalar_type());
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  const int64_t m = self.size(-2), n = self.size(-1);
  diagonal = std::clamp<int64_t>(diagonal, -m, n);  // the same mask, no overflow below
  auto opts = self.options().dtype(at::kLong);
  Tensor rows = at::arange(diagonal, m + diagonal, opts).unsqueeze(-1), cols = at::arange(n, opts);
  Tensor mask = lower ? at::le(cols, rows) : at::ge(cols, rows);
  const c10::Scalar zero = self.scalar_type() == at::kBool ? c10::Scalar(false) : c10::Scalar(0);  // no promotion
  if (ewTry(EwOp::Where, {mask, self, zero}, out)) return out;
  return out.copy_(at::where(mask, self, at::zeros({}, self.options())));
}

Tensor& trilOut(const Tensor& self, int64_t diagonal, Tensor& out) { return triangleOut(self, diagonal, true, out); }
Tensor& triuOut(const Tensor& self, int64_t diagonal, Tensor& out) { return triangleOut(self, diagonal, false, out); }

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "arange.start_out", arangeOut);
  MT_IMPL(m, "linspace.out", linspaceOut);
  MT_IMPL(m, "cat.out", catOut);
  MT_IMPL(m, "flip", flip);
  MT_IMPL(m, "roll", roll);
  MT_IMPL(m, "repeat", repeat);
  MT_IMPL_ENGINE_OUT(m, "tril.out", trilOut);
  MT_IMPL_ENGINE_OUT(m, "triu.out", triuOut);
}

} // namespace mytorch
