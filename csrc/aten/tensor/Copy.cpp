// Op table: copies between the CPU and mytorch devices and across mytorch devices, fill_, zero_ and
// reading a scalar back (_local_scalar_dense).
//
// Note [Copy paths]
// Equal dtypes and identical dense layouts move as one block of bytes (runtime memcpy). Anything else:
//  - host -> device: the CPU converts into dst's dtype and a dense layout, then one upload (and one strided
//    device copy when dst itself is not dense);
//  - device -> host: the device makes the source dense if needed, one download, then the CPU converts;
//  - same device: the strided cast kernel (its description made directly, Note [Copy description without an
//    iterator], or by TensorIterator where that cannot);
//  - across devices: source made dense in dst's dtype on its device, one peer copy ordered after the
//    source stream's work, then a strided copy on the destination.
// non_blocking is honoured for block copies between device memory and pinned host memory (the pinned
// block is kept from reuse until the copy's stream passes it); every other copy that touches host
// memory waits for its stream, and cross-device copies wait for the destination stream.
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/view_as_real.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cstring>

#include "csrc/core/DeviceErrors.h"
#include "csrc/core/Checked.h"
#include "csrc/aten/glue/CopyDescription.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/HostAllocator.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/copy.h"
#include "mytorch/runtime.h"

namespace mytorch {
namespace {

bool isMytorch(const at::Tensor& t) { return t.device().type() == c10::DeviceType::PrivateUse1; }
size_t nbytes(const at::Tensor& t) { return static_cast<size_t>(t.numel()) * t.element_size(); }

// Same dtype, same shape and strides, both dense: the copy is one block of bytes.
bool blockCopyable(const at::Tensor& dst, const at::Tensor& src) {
  return dst.scalar_type() == src.scalar_type() && dst.sizes().equals(src.sizes()) &&
         dst.strides().equals(src.strides()) && dst.is_non_overlapping_and_dense() &&
         src.is_non_overlapping_and_dense();
}

// A synchronisation point: also raises what kernels recorded on the device (Note [Device-side errors]).
void syncStream(const at::Tensor& t) {
  warnOrErrorOnSync();
  MT_RT_CHECK(rt::stream_synchronize(t.device().index(), streamFor(t)));
  raiseDeviceError(t.device().index());
}

void deviceCopy(const at::Tensor& dst, const at::Tensor& src);

// Note [complex32 copies]
// The kernels have no complex32 type, but its real and imaginary parts are halves (view_as_real): a copy to or
// from complex32 is the casts of those parts, native (the CPU rounds each part alone too), where it went through
// the CPU before (x.chalf() of 1M float32 at 0.11x the CPU). A real source gives the real part and a zero
// imaginary part; a real destination takes the real part (ATen's copy_ has warned that it discards the other).
// False when neither side is complex32 or the other side is a type the kernels do not take either.
bool complexHalfCopy(const at::Tensor& dst, const at::Tensor& src) {
  const bool to = dst.scalar_type() == at::kComplexHalf, from = src.scalar_type() == at::kComplexHalf;
  const at::Tensor& other = to ? src : dst;
  if (to == from || toKernelDType(other.scalar_type()) == DType::Other) return false;
  const at::Tensor s = src.expand(dst.sizes());
  if (to && s.is_complex()) {
    deviceCopy(at::view_as_real(dst), at::view_as_real(s));
  } else if (to) {
    const at::Tensor parts = at::view_as_real(dst);
    deviceCopy(parts.select(-1, 0), s);
    parts.select(-1, 1).zero_();
  } else {
    deviceCopy(dst.is_complex() ? at::view_as_real(dst) : dst,
               dst.is_complex() ? at::view_as_real(s) : at::view_as_real(s).select(-1, 0));
  }
  return true;
}

// dst (mytorch) <- src on the same device: cast kernel over TensorIterator's description.
void deviceCopy(const at::Tensor& dst, const at::Tensor& src) {
  c10::DeviceGuard guard(dst.device());
  CopyArgs direct;  // Note [Copy description without an iterator]
  if (copyDescription(direct, dst.data_ptr(), dst.sizes(), dst.strides(), dst.scalar_type(), src.const_data_ptr(),
                      src.sizes(), src.strides(), src.scalar_type())) {
    if (direct.shape.numel > 0) MT_RT_CHECK(kernels::copy(direct, streamFor(dst)));
    return;
  }
  if (dst.scalar_type() != src.scalar_type() && complexHalfCopy(dst, src)) return;  // before an iterator it drops
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(src)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .set_check_mem_overlap(false)
                  .build();
  if (iter.numel() == 0) return;
  const bool castable =
      toKernelDType(dst.scalar_type()) != DType::Other && toKernelDType(src.scalar_type()) != DType::Other;
  if (dst.scalar_type() != src.scalar_type() && !castable) {
    // Types the kernel cannot convert (float8, bits, quantized...): let the CPU convert.
    auto host = at::empty(src.sizes(), src.options().device(at::kCPU));
    host.copy_(src);
    dst.copy_(host.to(dst.scalar_type()));
    return;
  }
  CopyArgs p;
  p.shape = stridedShape(iter);
  p.dst = stridedOperand(iter, 0);
  p.src = stridedOperand(iter, 1);
  MT_RT_CHECK(kernels::copy(p, streamFor(dst)));
}

void hostToDevice(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  c10::DeviceGuard guard(dst.device());
  const rt::Stream stream = streamFor(dst);
  if (blockCopyable(dst, src)) {
    MT_RT_CHECK(rt::memcpy_async(dst.data_ptr(), src.data_ptr(), nbytes(dst), rt::CopyKind::HostToDevice, stream));
    if (non_blocking && hostAllocator()->isPinned(src.data_ptr())) {
      hostAllocator()->record_event(src.data_ptr(), src.storage().data_ptr().get_context(),
                                    currentStream(dst.device().index()));
    } else {
      syncStream(dst);
    }
    return;
  }
  const bool dense = dst.is_non_overlapping_and_dense();
  auto cpu_opts = dst.options().device(at::kCPU);
  auto staging = dense ? at::empty_strided(dst.sizes(), dst.strides(), cpu_opts) : at::empty(dst.sizes(), cpu_opts);
  staging.copy_(src);
  if (dense) {
    MT_RT_CHECK(rt::memcpy_async(dst.data_ptr(), staging.data_ptr(), nbytes(dst), rt::CopyKind::HostToDevice, stream));
  } else {
    auto dense_dst = at::empty(dst.sizes(), dst.options());
    MT_RT_CHECK(
        rt::memcpy_async(dense_dst.data_ptr(), staging.data_ptr(), nbytes(dst), rt::CopyKind::HostToDevice, stream));
    deviceCopy(dst, dense_dst);
  }
  syncStream(dst); // staging is pageable and dies at return
}

void deviceToHost(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  c10::DeviceGuard guard(src.device());
  const rt::Stream stream = streamFor(src);
  if (blockCopyable(dst, src)) {
    MT_RT_CHECK(rt::memcpy_async(dst.data_ptr(), src.data_ptr(), nbytes(dst), rt::CopyKind::DeviceToHost, stream));
    if (non_blocking && hostAllocator()->isPinned(dst.data_ptr())) {
      hostAllocator()->record_event(dst.data_ptr(), dst.storage().data_ptr().get_context(),
                                    currentStream(src.device().index()));
    } else {
      syncStream(src);
    }
    return;
  }
  at::Tensor dense_src = src;
  if (!src.is_non_overlapping_and_dense()) {
    dense_src = at::empty(src.sizes(), src.options());
    deviceCopy(dense_src, src);
  }
  auto staging = at::empty_strided(dense_src.sizes(), dense_src.strides(), dense_src.options().device(at::kCPU));
  MT_RT_CHECK(rt::memcpy_async(staging.data_ptr(), dense_src.data_ptr(), nbytes(dense_src), rt::CopyKind::DeviceToHost,
                               stream));
  syncStream(src);
  dst.copy_(staging);
}

void deviceToDevice(const at::Tensor& dst, const at::Tensor& src_in, bool non_blocking) {
  at::Tensor src = src_in;
  if (dst.device() == src.device()) {
    switch (at::get_overlap_status(dst, src)) {
      case at::MemOverlapStatus::Full:
        if (blockCopyable(dst, src)) return; // copying a tensor onto itself
        src = src.clone();
        break;
      case at::MemOverlapStatus::Partial: src = src.clone(); break;
      default: break;
    }
    deviceCopy(dst, src);
    return;
  }
  const int sd = src.device().index(), dd = dst.device().index();
  at::Tensor from = src;
  if (!(src.scalar_type() == dst.scalar_type() && src.sizes().equals(dst.sizes()) && src.is_contiguous())) {
    c10::DeviceGuard guard(src.device());
    from = at::empty(dst.sizes(), src.options().dtype(dst.scalar_type()));
    deviceCopy(from, src);
  }
  const bool direct = dst.is_contiguous();
  at::Tensor to = direct ? dst : at::empty(dst.sizes(), dst.options());
  {
    // The peer copy runs on the destination's stream after the source stream's queued work (with the
    // destination current, so that its default stream is the one meant).
    c10::DeviceGuard guard(dst.device());
    rt::Event ready = nullptr;
    MT_RT_CHECK(rt::event_create(sd, false, &ready));
    MT_RT_CHECK(rt::event_record(sd, ready, streamFor(from)));
    MT_RT_CHECK(rt::stream_wait_event(dd, streamFor(to), ready));
    MT_RT_CHECK(rt::memcpy_peer_async(to.data_ptr(), dd, from.data_ptr(), sd, nbytes(to), streamFor(to)));
    MT_RT_CHECK(rt::event_destroy(ready));
  }
  if (!direct) deviceCopy(dst, to);
  syncStream(dst); // temporaries on two devices die at return
  (void)non_blocking;
}

// The same memory seen without its lazy conjugate/negative bits.
at::Tensor physical(const at::Tensor& t) {
  at::Tensor p = t;
  if (p.is_conj()) p = p.conj();          // a view with the bit cleared
  if (p.is_neg()) p = p._neg_view();
  return p;
}

void copyPhysical(const at::Tensor& dst, const at::Tensor& src, bool non_blocking);

at::Tensor copyFrom(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), "copy_: both tensors must be defined");
  TORCH_CHECK(at::is_expandable_to(self.sizes(), dst.sizes()), "copy_: the source of shape ", self.sizes(),
              " cannot be broadcast to the destination's shape ", dst.sizes());
  if (dst.numel() == 0) return dst;
  if (isMytorch(dst)) at::assert_no_internal_overlap(dst);
  // ATen's copy_ hands PrivateUse1 copies to _copy_from before its own overlap checks: a destination that
  // partly overlaps its source (a[1:].copy_(a[:-1])) is refused here, with ATen's message.
  if (isMytorch(dst) && isMytorch(self) && !self.is_same(dst)) at::assert_no_partial_overlap(dst, self);
  // Note [Conjugate and negative bits]: _copy_from falls through the Conjugate and Negative keys, so the
  // bits arrive here. Physical bytes are copied, then the net conjugation/negation (src's bits xor dst's:
  // both are involutions) is applied in place to dst's physical view. Resolving the bits first instead
  // would clone, which copies, which lands here again.
  const bool conj = self.is_conj() != dst.is_conj();
  const bool neg = self.is_neg() != dst.is_neg();
  at::Tensor src = physical(self);
  at::Tensor out = physical(dst);
  copyPhysical(out, src, non_blocking);
  if (conj) out.copy_(at::conj_physical(out));
  if (neg) out.neg_();
  return dst;
}

void copyPhysical(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  if (isMytorch(dst) && isMytorch(src)) {
    deviceToDevice(dst, src, non_blocking);
  } else if (isMytorch(dst)) {
    TORCH_CHECK(src.device().is_cpu(), "mytorch copies need the other side on the CPU, but got ", src.device());
    hostToDevice(dst, src, non_blocking);
  } else {
    TORCH_CHECK(dst.device().is_cpu(), "mytorch copies need the other side on the CPU, but got ", dst.device());
    deviceToHost(dst, src, non_blocking);
  }
}

at::Tensor copyFromAndResize(const at::Tensor& self, const at::Tensor& dst) {
  if (!dst.sizes().equals(self.sizes())) dst.resize_(self.sizes());
  return copyFrom(self, dst, false);
}

at::Tensor& fillScalar(at::Tensor& self, const at::Scalar& value) {
  if (self.numel() == 0) return self;
  // The CPU converts the scalar (same rounding and overflow errors as a CPU fill_).
  auto v = at::empty({}, at::TensorOptions().dtype(self.scalar_type()));
  v.fill_(value);
  c10::DeviceGuard guard(self.device());
  auto iter = at::TensorIteratorConfig()
                  .add_output(self)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .set_check_mem_overlap(false)
                  .build();
  FillArgs p;
  p.shape = stridedShape(iter);
  p.dst = stridedOperand(iter, 0);
  TORCH_CHECK(p.dst.elem_size > 0 && p.dst.elem_size <= 16, "fill_: unsupported element size ", p.dst.elem_size);
  std::memcpy(p.value, v.data_ptr(), static_cast<size_t>(p.dst.elem_size));
  MT_RT_CHECK(kernels::fill(p, streamFor(self)));
  return self;
}

at::Tensor& fillTensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  // As ATen's fill_: a value in device memory is copied on the device (no host round trip); one on the host is
  // read there.
  if (value.device().type() != c10::DeviceType::PrivateUse1) return fillScalar(self, value.item());
  if (value.is_complex() && !self.is_complex()) return fillScalar(self, value.item());  // ATen's conversion error
  self.copy_(self.is_alias_of(value) ? value.clone() : value);
  return self;
}

at::Tensor& zeroInplace(at::Tensor& self) { return fillScalar(self, 0); }

// ATen's generic conj_physical_ calls a CPU/CUDA DispatchStub directly (an internal assert on any other
// device); the out-of-place op reaches the fallback like any other.
at::Tensor& conjPhysicalInplace(at::Tensor& self) {
  if (self.is_complex()) self.copy_(at::conj_physical(self));
  return self;
}

at::Scalar localScalarDense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(), " elements cannot be converted to Scalar");
  c10::DeviceGuard guard(self.device());
  auto host = at::empty({}, self.options().device(at::kCPU));
  MT_RT_CHECK(rt::memcpy_async(host.data_ptr(), self.data_ptr(), self.element_size(), rt::CopyKind::DeviceToHost,
                               streamFor(self)));
  syncStream(self);
  return host.item();
}

} // namespace

// See Note [Conjugate and negative bits].
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // Copies cross devices by design: they check overlap themselves, outside the one check path.
  m.impl("_copy_from", TORCH_FN(copyFrom));
  m.impl("_copy_from_and_resize", TORCH_FN(copyFromAndResize));
  MT_IMPL(m, "fill_.Scalar", fillScalar);
  MT_IMPL(m, "fill_.Tensor", fillTensor);
  MT_IMPL(m, "zero_", zeroInplace);
  MT_IMPL(m, "conj_physical_", conjPhysicalInplace);
  MT_IMPL(m, "_local_scalar_dense", localScalarDense);
}

} // namespace mytorch
