// Op table: tensor creation, storage and view metadata (no data is touched here).
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/diagonal.h>
#include <ATen/ops/fill.h>
#include <ATen/ops/zero.h>
#include <ATen/ops/alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/Stream.h"

namespace mytorch {
namespace {

constexpr auto kKeys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);

void checkFactoryArgs(std::optional<at::Layout> layout, std::optional<at::Device> device,
                      std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
              "mytorch supports only strided tensors, but got layout ", c10::layout_or_default(layout));
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory),
              "only CPU tensors can be pinned, but pin_memory=True was asked for a mytorch tensor");
  if (device.has_value() && device->index() >= 0) checkDeviceIndex(device->index());
}

at::Tensor emptyMemoryFormat(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                             std::optional<at::Layout> layout, std::optional<at::Device> device,
                             std::optional<bool> pin_memory, std::optional<at::MemoryFormat> memory_format) {
  checkFactoryArgs(layout, device, pin_memory);
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_generic(size, deviceAllocator(), kKeys, c10::dtype_or_default(dtype), memory_format);
}

at::Tensor emptyStrided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<at::ScalarType> dtype,
                        std::optional<at::Layout> layout, std::optional<at::Device> device,
                        std::optional<bool> pin_memory) {
  checkFactoryArgs(layout, device, pin_memory);
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, deviceAllocator(), kKeys, c10::dtype_or_default(dtype));
}

// A ZeroTensor (autograd's zero gradients, e.g. sgn's at zero): no storage, ZeroTensor's key over the device's.
// ATen makes it for each device as here (_efficientzerotensor_cuda); the ZeroTensor fallback materialises it as
// zeros for every operator without a ZeroTensor kernel, so no device kernel ever reads its (null) data.
at::Tensor efficientZeroTensor(c10::IntArrayRef size, std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout, std::optional<at::Device> device,
                               std::optional<bool> pin_memory) {
  checkFactoryArgs(layout, device, pin_memory);
  const c10::Device where(c10::DeviceType::PrivateUse1,
                          device.has_value() && device->has_index() ? device->index() : currentDeviceIndex());
  at::native::ZeroTensorAllocator allocator(where);
  return at::detail::empty_generic(size, &allocator, kKeys | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor),
                                   c10::dtype_or_default(dtype), std::nullopt);
}

// Sets sizes/strides and grows the storage if they need more bytes than it has.
void resizeImpl(const at::Tensor& self, c10::IntArrayRef size, at::OptionalIntArrayRef stride) {
  auto* impl = self.unsafeGetTensorImpl();
  const int64_t itemsize = static_cast<int64_t>(self.dtype().itemsize());
  int64_t needed = 0;
  if (stride.has_value()) {
    impl->set_sizes_and_strides(size, *stride);
    needed = at::detail::computeStorageNbytes(size, *stride, itemsize, impl->storage_offset());
  } else {
    impl->set_sizes_contiguous(size);
    needed = at::detail::computeStorageNbytesContiguous(size, itemsize, impl->storage_offset());
  }
  const c10::Storage& storage = impl->unsafe_storage();
  if (needed > static_cast<int64_t>(storage.nbytes())) {
    c10::OptionalDeviceGuard guard(self.device());
    at::native::resize_bytes_nocuda(storage, needed);
  }
}

const at::Tensor& resizeInplace(const at::Tensor& self, c10::IntArrayRef size,
                                std::optional<at::MemoryFormat> memory_format) {
  for (auto s : size) TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s, ": ", size);
  // As ATen's resize_: the same sizes keep the tensor's own strides. Restriding it contiguous made out= views
  // (torch.zeros(..., out=x[:, ::2])) write over their gaps, into memory the user holds elsewhere.
  if (self.sizes().equals(size) && !memory_format.has_value()) return self;
  resizeImpl(self, size, std::nullopt);
  if (memory_format.has_value()) {
    TORCH_CHECK(*memory_format != at::MemoryFormat::Preserve, "Unsupported memory format ", *memory_format);
    self.unsafeGetTensorImpl()->empty_tensor_restride(*memory_format);
  }
  return self;
}

at::Tensor& setStorageOffset(at::Tensor& self, c10::Storage source, int64_t offset, c10::IntArrayRef size,
                             c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, std::move(source), offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  at::OptionalIntArrayRef st = stride.data() != nullptr ? at::OptionalIntArrayRef(stride) : std::nullopt;
  resizeImpl(self, size, st);
  return self;
}

at::Tensor& setStorage(at::Tensor& self, c10::Storage source) {
  const int64_t n = static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return setStorageOffset(self, std::move(source), 0, {n}, {});
}

at::Tensor& setTensor(at::Tensor& self, const at::Tensor& source) {
  if (self.is_same(source)) return self;
  return setStorageOffset(self, source.storage(), source.storage_offset(), source.sizes(), source.strides());
}

at::Tensor& setEmpty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, deviceAllocator()->allocate(0), deviceAllocator(), true);
  return setStorageOffset(self, std::move(empty), 0, {0}, {});
}

// Marks the tensor's block as used by `stream`: the allocator will not hand it out again until the work
// queued on that stream at free time has finished.
void recordTensorStream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1 && stream.device_index() == self.device().index(),
              "record_stream expects a stream of the tensor's device ", self.device(), ", but got one of ",
              stream.device());
  deviceAllocator()->recordStream(self.storage().data_ptr(), stream);
}

at::Tensor asStrided(const at::Tensor& self, c10::IntArrayRef size, c10::IntArrayRef stride,
                     std::optional<int64_t> storage_offset) {
  return at::native::as_strided_tensorimpl(self, size, stride, storage_offset);
}

} // namespace

namespace {
// Dense mytorch and CPU tensors may swap their storage (Tensor.data = ...), as CUDA and CPU tensors may:
// Module.to() keeps its Parameter objects (and so tied weights stay tied) only when this holds. c10's
// built-in check does not list PrivateUse1, and asks backends to register this op (TensorImpl.h).
bool hasCompatibleShallowCopyType(const at::Tensor& self, const at::Tensor& from) {
  const auto ks = self.key_set(), kf = from.key_set();
  if (ks == kf) return true;
  auto dense = [](c10::DispatchKeySet k) {
    return k.has_any(c10::DispatchKeySet(c10::DispatchKey::Dense)) &&
           k.has_any(c10::DispatchKeySet({c10::BackendComponent::CPUBit, c10::BackendComponent::PrivateUse1Bit}));
  };
  return dense(ks) && dense(kf);
}
} // namespace

// Tensor.is_set_to: the same storage, offset, sizes and strides (ATen's rule), without touching the data.
bool isSetTo(const at::Tensor& self, const at::Tensor& src) {
  return self.storage().unsafeGetStorageImpl() == src.storage().unsafeGetStorageImpl() &&
         self.storage_offset() == src.storage_offset() && self.sizes() == src.sizes() &&
         self.strides() == src.strides();
}

// torch.eye: zeros, then ones on the diagonal (both native kernels), with ATen's argument checks.
at::Tensor& eyeMOut(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  out.resize_({n, m});  // as the CPU's eye: resized without resize_output's warning
  out.zero_();
  if (n > 0 && m > 0) out.diagonal().fill_(1);
  return out;
}

at::Tensor& eyeOut(int64_t n, at::Tensor& out) { return eyeMOut(n, n, out); }

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "eye.out", eyeOut);
  MT_IMPL(m, "is_set_to", isSetTo);
  MT_IMPL(m, "eye.m_out", eyeMOut);
  MT_IMPL(m, "_has_compatible_shallow_copy_type", hasCompatibleShallowCopyType);
  MT_IMPL(m, "empty.memory_format", emptyMemoryFormat);
  MT_IMPL(m, "empty_strided", emptyStrided);
  MT_IMPL(m, "_efficientzerotensor", efficientZeroTensor);
  MT_IMPL(m, "resize_", resizeInplace);
  MT_IMPL(m, "set_.source_Storage_storage_offset", setStorageOffset);
  MT_IMPL(m, "set_.source_Storage", setStorage);
  MT_IMPL(m, "set_.source_Tensor", setTensor);
  MT_IMPL(m, "set_", setEmpty);
  MT_IMPL(m, "as_strided", asStrided);
  MT_IMPL(m, "record_stream", recordTensorStream);
  MT_IMPL(m, "view", at::native::view);
  MT_IMPL(m, "_reshape_alias", at::native::_reshape_alias);
  MT_IMPL(m, "alias", at::native::alias);
  MT_IMPL(m, "unfold", at::native::unfold);
  MT_IMPL(m, "view_as_real", at::native::view_as_real);
  MT_IMPL(m, "view_as_complex", at::native::view_as_complex);
}

} // namespace mytorch
