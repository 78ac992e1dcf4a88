// See Glue.h.
#include "csrc/aten/glue/Glue.h"

#include <ATen/native/Resize.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/from_blob.h>

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

at::Tensor metaLike(const at::Tensor& t) {
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta));
}

at::Tensor emptyLike(const at::Tensor& shape, const at::Tensor& device_tensor) {
  return at::empty_strided(shape.sizes(), shape.strides(), shape.options().device(device_tensor.device()));
}

at::Tensor& assignOut(at::Tensor& out, const at::Tensor& value, OutLayout layout) {
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
