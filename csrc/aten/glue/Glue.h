// Glue between ATen tensors and the kernel library's torch-free parameter structs: dtype mapping and the
// strided description of a TensorIterator's operands (broadcasting, coalescing and output checks are
// ATen's own).
#pragma once

#include <ATen/TensorIterator.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/empty.h>
#include <c10/core/ScalarType.h>

#include "csrc/core/Fallback.h"
#include "csrc/core/KernelDType.h"
#include "csrc/core/Runtime.h"

#include "mytorch/strided.h"
#include "mytorch/dtype.h"
#include "mytorch/launch.h"

namespace mytorch {

// Fallback<at::_ops::op>::call(args...): the op through the CPU fallback, counted as a fallback (the op tables'
// way out for inputs their kernels do not take).
template <typename Op>
using Fallback = at::native::call_fallback_fn<&cpuFallback, Op>;

// The dtype the kernels accumulate `t` in: float64 for float64, float32 for the rest (half types included).
inline c10::ScalarType opmathType(c10::ScalarType t) {
  return t == c10::ScalarType::Double ? c10::ScalarType::Double : c10::ScalarType::Float;
}
// An optional tensor argument as the kernels take it: contiguous, or undefined when absent.
inline at::Tensor contiguousIfDefined(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? t->contiguous() : at::Tensor();
}
// Scratch bytes a launch plan asks for, on like's device and stream (freed when the caller's handle goes: the
// caching allocator keeps them stream-ordered); undefined for none (the sim runtime's plans need none).
inline at::Tensor kernelWorkspace(size_t bytes, const at::Tensor& like) {
  if (bytes == 0) return at::Tensor();
  return at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
}

// A tensor's data for a kernel argument, or null for an undefined tensor (typed: dataOrNull<float>(t)).
inline void* dataOrNull(const at::Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
template <typename T>
T* dataOrNull(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// An out= of the wrong dtype is refused with the message of ATen's structured kernels (their generated
// resize_out), instead of having the result's bytes written into it.
void checkOutDtype(const at::Tensor& out, c10::ScalarType expected);
// The same for ops ATen builds on TensorIterator with every dtype equal, with TensorIterator's message.
void checkExactOut(const at::Tensor& out, c10::ScalarType expected);
// The same for TensorIterator ops that cast their result into the out= (a safe cast only), with its message.
void checkCastOut(const at::Tensor& out, c10::ScalarType result);
// The kernel stream (the current stream) of the device `t` lives on, or of `device`: how every launch in the glue
// names its stream.
rt::Stream streamFor(const at::Tensor& t);
rt::Stream streamFor(c10::Device device);

// A meta tensor of t's sizes, strides and dtype: calling an operator on these runs ATen's meta kernel, which checks
// the arguments as ATen does and gives the result's sizes and strides.
//
// Note [Structured meta functions]
// Through the dispatcher, the Meta kernel of many operators is not ATen's C++ meta function but a Python one that
// torch registers over it (torch/_meta_registrations.py; torch._C._dispatch_dump shows the C++ one "inactive"),
// and for some that Python kernel is the operator's whole decomposition: upsample_bicubic2d's took 32 ms a call on
// meta tensors in plain torch 2.13 (its CPU kernel: 12 us). Where a composed kernel calls a structured operator on
// meta tensors only for ATen's checks and output shape, it calls ATen's C++ structured meta function directly
// (at::meta::<op>_outf, ATen/ops/<op>_meta_dispatch.h: the same checks and messages, microseconds).
at::Tensor metaLike(const at::Tensor& t);
// An uninitialised tensor with the sizes, strides and dtype of `shape` (a meta result) on `device_tensor`'s device.
at::Tensor emptyLike(const at::Tensor& shape, const at::Tensor& device_tensor);
// The layout ATen gives an out= it resizes: a structured kernel's meta strides (the result's layout); the result's
// layout only when the out= was empty, else row-major (the linear-algebra kernels that compute into a temporary
// when the out= is not empty and not column-major: householder_product, cholesky_inverse, geqrf); row-major
// (kernels that resize_output and copy: the FFTs, cholesky).
enum class OutLayout { Result, ResultIfEmpty, Contiguous };
// out= of a composed operator: resized (ATen's resize_output rules: a warning when a non-empty out changes size;
// its layout as `layout` says) and assigned `value`.
at::Tensor& assignOut(at::Tensor& out, const at::Tensor& value, OutLayout layout = OutLayout::Result);
// The same for a structured operator's out=, which must have exactly the result's dtype (ATen's message).
at::Tensor& assignExactOut(at::Tensor& out, const at::Tensor& value);

// Shape of an iterator, checked against the kernels' dimension limit.
StridedShape stridedShape(const at::TensorIteratorBase& iter);
// Operand `arg` of an iterator (0 = first output).
StridedOperand stridedOperand(const at::TensorIteratorBase& iter, int arg);

} // namespace mytorch
