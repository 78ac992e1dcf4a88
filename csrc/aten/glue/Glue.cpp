// See Glue.h.
#include "csrc/aten/glue/Glue.h"

#include <ATen/native/Resize.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>

#include <algorithm>
#include <array>

#include "csrc/aten/glue/CopyDescription.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Stream.h"

namespace mytorch {

void checkOutDtype(const at::Tensor& out, c10::ScalarType expected) {
  TORCH_CHECK(out.scalar_type() == expected, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(expected),
              ", but got ", out.dtype(), " instead");
}

void checkExactOut(const at::Tensor& out, c10::ScalarType expected) {
  TORCH_CHECK(out.scalar_type() == expected, "Found dtype ", out.scalar_type(), " but expected ", expected);
}

void checkCastOut(const at::Tensor& out, c10::ScalarType result) {
  TORCH_CHECK(at::canCast(result, out.scalar_type()), "result type ", result,
              " can't be cast to the desired output type ", out.scalar_type());
}

rt::Stream streamFor(const at::Tensor& t) { return streamFor(t.device()); }
rt::Stream streamFor(c10::Device device) { return nativeHandle(currentStream(device.index())); }

StridedShape stridedShape(const at::TensorIteratorBase& iter) {
  StridedShape s;
  TORCH_CHECK(iter.ndim() <= kMaxDims, "mytorch kernels support at most ", kMaxDims,
              " dimensions after coalescing, but the operation needs ", iter.ndim());
  s.ndim = static_cast<int>(iter.ndim());
  s.numel = iter.numel();
  for (int d = 0; d < s.ndim; ++d) s.sizes[d] = iter.shape()[d];
  return s;
}

StridedOperand stridedOperand(const at::TensorIteratorBase& iter, int arg) {
  StridedOperand op;
  op.data = iter.data_ptr(arg);
  op.dtype = toKernelDType(iter.dtype(arg));
  op.elem_size = static_cast<int>(c10::elementSize(iter.dtype(arg)));
  auto st = iter.strides(arg);
  for (size_t d = 0; d < st.size(); ++d) op.strides[d] = st[d];
  return op;
}

bool copyDescription(CopyArgs& p, void* dst, at::IntArrayRef sizes, at::IntArrayRef dst_strides,
                     c10::ScalarType dst_type, const void* src, at::IntArrayRef src_sizes, at::IntArrayRef src_strides,
                     c10::ScalarType src_type) {
  const DType dt = toKernelDType(dst_type), st = toKernelDType(src_type);
  if (dt == DType::Other || st == DType::Other) return false;
  const int64_t nd = static_cast<int64_t>(sizes.size()), lead = nd - static_cast<int64_t>(src_sizes.size());
  if (lead < 0) return false;
  struct Dim { int64_t size, d, s; };
  std::array<Dim, 64> dims;
  int n = 0;
  int64_t numel = 1;
  for (int64_t k = 0; k < nd; ++k) {
    const int64_t size = sizes[k];
    numel *= size;
    if (size == 1) continue;
    int64_t s = 0;
    if (k >= lead) {
      const int64_t ks = k - lead;
      if (src_sizes[ks] == size) s = src_strides[ks];
      else if (src_sizes[ks] != 1) return false;
    }
    if (n == static_cast<int>(dims.size())) return false;
    dims[n++] = {size, dst_strides[k], s};
  }
  // fastest first (an insertion sort: a handful of dimensions), then merge a dimension into the one before it
  // where both operands step over the whole of that one
  for (int i = 1; i < n; ++i)
    for (int j = i; j > 0 && (dims[j].d < dims[j - 1].d || (dims[j].d == dims[j - 1].d && dims[j].s < dims[j - 1].s));
         --j)
      std::swap(dims[j], dims[j - 1]);
  int m = 0;
  for (int i = 0; i < n; ++i) {
    if (m > 0 && dims[i].d == dims[m - 1].d * dims[m - 1].size && dims[i].s == dims[m - 1].s * dims[m - 1].size) {
      dims[m - 1].size *= dims[i].size;
      continue;
    }
    dims[m++] = dims[i];
  }
  if (m > kMaxDims) return false;
  const int64_t de = static_cast<int64_t>(c10::elementSize(dst_type)),
                se = static_cast<int64_t>(c10::elementSize(src_type));
  p.shape.ndim = std::max(m, 1);
  p.shape.numel = numel;
  p.shape.sizes[0] = 1;
  p.dst.strides[0] = p.src.strides[0] = 0;
  for (int i = 0; i < m; ++i) {
    p.shape.sizes[i] = dims[i].size;
    p.dst.strides[i] = dims[i].d * de;
    p.src.strides[i] = dims[i].s * se;
  }
  p.dst.data = dst;
  p.src.data = const_cast<void*>(src);
  p.dst.dtype = dt;
  p.src.dtype = st;
  p.dst.elem_size = static_cast<int>(de);
  p.src.elem_size = static_cast<int>(se);
  return true;
}

at::Tensor metaLike(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

at::Tensor emptyLike(const at::Tensor& shape, const at::Tensor& device_tensor) {
  return at::empty_strided(shape.sizes(), shape.strides(), shape.options().device(device_tensor.device()));
}

namespace {

// Note [An empty out= adopts a temporary]
// The functional forms of the composed operators call their out= kernel with a fresh empty tensor, which assignOut
// resized and filled with a copy of the composition's result: an allocation and a pass over the result per call,
// for a value nothing else holds. An empty out= takes the value's storage instead (set_) where that is what the
// copy would have made: the value a temporary (its handle and its storage referenced once: not an input, a view of
// one or of another result), dense from offset 0 in the layout the resize would give (the value's own, or
// row-major for OutLayout::Contiguous), the same dtype, device and lazy bits, and out's own storage empty (a
// resize allocates anyway: no data pointer a caller could expect kept) and not shared with any other tensor
// (whose views a resize would have kept seeing it).
bool adopts(const at::Tensor& out, const at::Tensor& value, OutLayout layout) {
  return out.numel() == 0 && value.defined() && value.use_count() == 1 && value.storage().use_count() == 1 &&
         out.storage().use_count() == 1 && out.storage().nbytes() == 0 && value.layout() == at::kStrided &&
         out.layout() == at::kStrided && value.device() == out.device() && value.scalar_type() == out.scalar_type() &&
         value.storage_offset() == 0 && value.is_conj() == out.is_conj() && value.is_neg() == out.is_neg() &&
         (layout == OutLayout::Contiguous ? value.is_contiguous() : value.is_non_overlapping_and_dense());
}

} // namespace

at::Tensor& assignOut(at::Tensor& out, const at::Tensor& value, OutLayout layout) {
  if (adopts(out, value, layout)) {
    out.set_(value);
    return out;
  }
  if (layout == OutLayout::Contiguous || (layout == OutLayout::ResultIfEmpty && out.numel() > 0))
    at::native::resize_output(out, value.sizes());
  else checked::resizeOutAs(out, value, /*warn=*/true);
  out.copy_(value);
  return out;
}

at::Tensor& assignExactOut(at::Tensor& out, const at::Tensor& value) {
  checkOutDtype(out, value.scalar_type());
  return assignOut(out, value);
}

} // namespace mytorch
