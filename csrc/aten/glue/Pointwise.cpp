// See Pointwise.h and Note [Elementwise engine] in kernels/include/mytorch/elementwise.h.
#include "csrc/aten/glue/Pointwise.h"

#include "csrc/core/Checked.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/MaybeOwned.h>

#include <cstring>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/DeviceAllocator.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/elementwise.h"

namespace mytorch {
namespace {

bool isCpuScalar(const at::Tensor& t) { return t.defined() && t.dim() == 0 && t.device().is_cpu(); }

// The value of a scalar input, converted to `dtype` as ATen converts it: a Scalar as scalar_tensor's fill does
// (Scalar::to, which refuses an overflow), a CPU tensor as a copy does (c10::convert). Read directly, not through
// a CPU tensor and a copy: those were most of a one-element op's cost.
bool commonType(c10::ScalarType t) {
  return c10::isFloatingType(t) || c10::isComplexType(t) || c10::isIntegralType(t, /*includeBool=*/true);
}

void scalarBytes(const EwInput& in, c10::ScalarType dtype, unsigned char* dst) {
  const bool is_scalar = !in.isTensor();
  const at::Tensor* t = is_scalar ? nullptr : &in.tensor();
  if (!commonType(dtype) || (t && !commonType(t->scalar_type()))) {  // barely-supported dtypes: through a tensor
    at::Tensor v = is_scalar ? at::scalar_tensor(in.scalar(), at::TensorOptions().dtype(dtype)) : t->to(dtype);
    std::memcpy(dst, v.data_ptr(), v.element_size());
    return;
  }
  AT_DISPATCH_V2(dtype, "scalarBytes", AT_WRAP([&] {
                   using To = scalar_t;
                   To v;
                   if (is_scalar) {
                     v = in.scalar().to<To>();
                   } else {
                     AT_DISPATCH_V2(t->scalar_type(), "scalarBytes",
                                    AT_WRAP([&] { v = c10::convert<To>(*t->const_data_ptr<scalar_t>()); }),
                                    AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool);
                   }
                   std::memcpy(dst, &v, sizeof(To));
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool);
}

// Note [Elementwise contiguous run]
// A call whose output and tensor operands are all contiguous, of the output's sizes and on its device is one run of
// numel elements at unit strides: what TensorIterator coalesces it to. It is described directly, without building a
// second TensorIterator (the structured op's meta function built one already), which was a third of the glue's time
// on a small tensor. TensorIterator's memory checks are kept: no internal overlap in the output (none when it is
// contiguous), and no partial overlap with an input. Anything else (broadcasting, strides, another device, an out=
// to resize, no tensor operand) takes TensorIterator.
bool contiguousRun(const at::Tensor& out, c10::ArrayRef<c10::MaybeOwned<at::Tensor>> operands, bool out_may_overlap) {
  if (operands.empty() || out.numel() == 0 || !out.is_contiguous()) return false;
  for (const auto& t : operands) {
    if (!t->sizes().equals(out.sizes()) || !t->is_contiguous() || t->device() != out.device()) return false;
  }
  if (!out_may_overlap) {
    for (const auto& t : operands) at::assert_no_partial_overlap(out, *t);
  }
  return true;
}

StridedOperand contiguousOperand(const at::Tensor& t, bool written) {
  StridedOperand op;
  op.data = written ? t.mutable_data_ptr() : const_cast<void*>(t.const_data_ptr());
  op.dtype = toKernelDType(t.scalar_type());
  op.elem_size = static_cast<int>(t.element_size());
  op.strides[0] = op.elem_size;
  return op;
}

} // namespace

c10::ScalarType ewComputeType(c10::ArrayRef<EwInput> inputs, bool to_float) {
  at::native::ResultTypeState state = {};
  for (const EwInput& in : inputs) {
    if (in.isTensor()) {
      if (in.tensor().defined()) state = at::native::update_result_type_state(in.tensor(), state);
    } else {
      state = at::native::update_result_type_state(in.scalar(), state);
    }
  }
  c10::ScalarType t = at::native::result_type(state);
  if (to_float && c10::isIntegralType(t, /*includeBool=*/true)) t = c10::typeMetaToScalarType(c10::get_default_dtype());
  return t;
}

c10::ScalarType ewComputeType(EwOp op, c10::ArrayRef<EwInput> inputs) {
  return ewComputeType(inputs, ew_dtypes(op) == EwDtypes::ToFloat || ew_dtypes(op) == EwDtypes::ToWide);
}

bool ewNative(EwOp op, c10::ScalarType compute, c10::ArrayRef<EwInput> inputs) {
  if (!elementwise_supported(op, toKernelDType(compute))) return false;
  for (const EwInput& in : inputs) {
    if (in.isTensor()) {
      const at::Tensor& t = in.tensor();
      if (t.defined() && (t.is_complex() || toKernelDType(t.scalar_type()) == DType::Other)) return false;
    } else if (in.scalar().isComplex()) {
      return false;
    }
  }
  return true;
}

void ewCheckOut(EwOp op, c10::ScalarType result, const at::Tensor& out) {
  checkCastOut(out, result);
  // ATen builds these with all dtypes equal (its TensorIterator message); the others cast safely.
  if (ew_result(op) == EwResult::Exact) checkExactOut(out, result);
}

void ewRun(EwOp op, c10::ScalarType compute, c10::ArrayRef<EwInput> inputs, const at::Tensor& out,
           const EwParams& params, bool out_may_overlap) {
  const c10::ScalarType result_dtype = ew_is_predicate(op) ? at::kBool : compute;
  ewCheckOut(op, result_dtype, out);
  ElementwiseArgs a;
  a.op = op;
  a.compute = toKernelDType(compute);
  a.p = params;
  a.ninputs = static_cast<int>(inputs.size());
  TORCH_INTERNAL_ASSERT(a.ninputs <= 3);

  // Inputs: tensors cast to the compute dtype (where's mask to bool), scalars by value. A tensor of that dtype is
  // borrowed, not copied (EwInput says why).
  c10::SmallVector<c10::MaybeOwned<at::Tensor>, 3> operands;
  int slot_of_operand[3] = {};
  for (int k = 0; k < a.ninputs; ++k) {
    const bool mask = ew_has_mask(op) && k == 0;
    const c10::ScalarType want = mask ? at::kBool : compute;
    const EwInput& in = inputs[static_cast<size_t>(k)];
    if (!in.isTensor() || isCpuScalar(in.tensor())) {
      a.is_scalar[k] = true;
      const bool half = compute == at::kHalf || compute == at::kBFloat16;
      scalarBytes(in, (!ew_has_mask(op) && half) ? at::kFloat : want, a.scalar[k]);
      continue;
    }
    const at::Tensor& t = in.tensor();
    if (!t.defined()) {  // an absent optional operand (clamp without one bound)
      a.is_scalar[k] = true;
      continue;
    }
    slot_of_operand[operands.size()] = k;
    operands.push_back(t.scalar_type() == want ? c10::MaybeOwned<at::Tensor>::borrowed(t)
                                               : c10::MaybeOwned<at::Tensor>::owned(t.to(want)));
  }
  // The output: written directly when it has the result dtype, else through a temporary.
  const bool direct = out.scalar_type() == result_dtype;
  if (direct && contiguousRun(out, operands, out_may_overlap)) {
    c10::DeviceGuard guard(out.device());
    a.shape.ndim = 1;
    a.shape.numel = a.shape.sizes[0] = out.numel();
    a.out = contiguousOperand(out, /*written=*/true);
    for (size_t i = 0; i < operands.size(); ++i)
      a.in[slot_of_operand[i]] = contiguousOperand(*operands[i], /*written=*/false);
    MT_RT_CHECK(kernels::elementwise(a, streamFor(out)));
    return;
  }
  at::Tensor target = direct ? out : at::empty({0}, out.options().dtype(result_dtype));
  at::TensorIteratorConfig cfg;
  cfg.set_check_mem_overlap(!out_may_overlap).allow_cpu_scalars(true).check_all_same_dtype(false).add_output(target);
  for (const auto& t : operands) cfg.add_const_input(*t);
  if (operands.empty()) cfg.declare_static_shape(out.sizes());  // only scalars: out's own shape
  auto iter = cfg.build();
  if (!direct) at::native::resize_output(out, target.sizes());
  if (iter.numel() > 0) {
    c10::DeviceGuard guard(target.device());
    a.shape = stridedShape(iter);
    a.out = stridedOperand(iter, 0);
    for (size_t i = 0; i < operands.size(); ++i)
      a.in[slot_of_operand[i]] = stridedOperand(iter, static_cast<int>(i) + 1);
    MT_RT_CHECK(kernels::elementwise(a, streamFor(target)));
  }
  if (!direct) out.copy_(target);
}

namespace {

// The compute dtype of a fast call (Note [Elementwise fast path]), or Undefined when the call is not one.
c10::ScalarType fastCompute(EwOp op, c10::ArrayRef<EwInput> inputs, const at::Tensor** first) {
  const c10::ScalarType compute = ewComputeType(op, inputs);
  if (!c10::isFloatingType(compute) || !ewNative(op, compute, inputs)) return c10::ScalarType::Undefined;
  const at::Tensor* f = nullptr;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!inputs[k].isTensor()) continue;
    const at::Tensor& t = inputs[k].tensor();
    if (!t.defined() || isCpuScalar(t)) continue;
    const c10::ScalarType want = ew_has_mask(op) && k == 0 ? at::kBool : compute;
    if (t.scalar_type() != want || !t.is_contiguous()) return c10::ScalarType::Undefined;
    if (f == nullptr) f = &t;
    else if (!t.sizes().equals(f->sizes()) || t.device() != f->device()) return c10::ScalarType::Undefined;
  }
  if (f == nullptr) return c10::ScalarType::Undefined;
  *first = f;
  return compute;
}

} // namespace

at::Tensor ewFast(EwOp op, c10::ArrayRef<EwInput> inputs, const EwParams& params) {
  const at::Tensor* first = nullptr;
  const c10::ScalarType compute = fastCompute(op, inputs, &first);
  if (compute == c10::ScalarType::Undefined) return at::Tensor();
  c10::DeviceGuard guard(first->device());
  at::Tensor out =
      at::detail::empty_generic(first->sizes(), deviceAllocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                ew_is_predicate(op) ? at::kBool : compute, std::nullopt);
  ewRun(op, compute, inputs, out, params);
  return out;
}

bool ewFastInplace(EwOp op, const at::Tensor& self, c10::ArrayRef<EwInput> inputs, const EwParams& params) {
  const at::Tensor* first = nullptr;
  const c10::ScalarType compute = fastCompute(op, inputs, &first);
  if (compute == c10::ScalarType::Undefined || ew_is_predicate(op) || self.scalar_type() != compute ||
      !self.sizes().equals(first->sizes()) || self.device() != first->device() || !self.is_contiguous())
    return false;
  ewRun(op, compute, inputs, self, params);
  return true;
}

void ewResizeOut(const at::Tensor& out, const std::vector<at::Tensor>& inputs) {
  // TensorIterator's own layout rule, run on meta tensors of the inputs' sizes and strides (no memory, no kernel)
  at::Tensor result;  // undefined: TensorIterator allocates it (on meta) with the layout it gives outputs
  at::TensorIteratorConfig cfg;
  cfg.check_all_same_dtype(false).add_output(result);
  std::vector<at::Tensor> metas;
  for (const at::Tensor& t : inputs) {
    if (t.defined())  // one dtype for all: only the sizes and strides matter here
      metas.push_back(at::empty_strided(t.sizes(), t.strides(), t.options().dtype(at::kFloat).device(at::kMeta)));
  }
  for (const at::Tensor& m : metas) cfg.add_const_input(m);
  auto iter = cfg.build();
  checked::resizeOutAs(out, iter.output(), /*warn=*/true);
}

bool ewTry(EwOp op, c10::ArrayRef<EwInput> inputs, const at::Tensor& out, const EwParams& params) {
  const c10::ScalarType compute = ewComputeType(op, inputs);
  if (ewNative(op, compute, inputs)) {
    ewRun(op, compute, inputs, out, params);
    return true;
  }
  if (inputs.size() == 1 && inputs[0].isTensor()) return ewComplexUnary(op, inputs[0].tensor(), out);
  return ewComplex(op, compute, inputs, out, params);
}

} // namespace mytorch
