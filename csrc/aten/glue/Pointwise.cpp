// See Pointwise.h and Note [Elementwise engine] in kernels/include/mytorch/elementwise.h.
#include "csrc/aten/glue/Pointwise.h"

#include "csrc/core/Checked.h"

#include <ATen/TensorIterator.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/empty.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/core/DeviceGuard.h>

#include <cstring>

#include "csrc/aten/glue/Glue.h"
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
  const bool is_scalar = std::holds_alternative<c10::Scalar>(in);
  const at::Tensor* t = is_scalar ? nullptr : &std::get<at::Tensor>(in);
  if (!commonType(dtype) || (t && !commonType(t->scalar_type()))) {  // barely-supported dtypes: through a tensor
    at::Tensor v =
        is_scalar ? at::scalar_tensor(std::get<c10::Scalar>(in), at::TensorOptions().dtype(dtype)) : t->to(dtype);
    std::memcpy(dst, v.data_ptr(), v.element_size());
    return;
  }
  AT_DISPATCH_V2(dtype, "scalarBytes", AT_WRAP([&] {
                   using To = scalar_t;
                   To v;
                   if (is_scalar) {
                     v = std::get<c10::Scalar>(in).to<To>();
                   } else {
                     AT_DISPATCH_V2(t->scalar_type(), "scalarBytes",
                                    AT_WRAP([&] { v = c10::convert<To>(*t->const_data_ptr<scalar_t>()); }),
                                    AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool);
                   }
                   std::memcpy(dst, &v, sizeof(To));
                 }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16, at::kBool);
}

} // namespace

c10::ScalarType ewComputeType(const std::vector<EwInput>& inputs, bool to_float) {
  at::native::ResultTypeState state = {};
  for (const EwInput& in : inputs) {
    if (std::holds_alternative<at::Tensor>(in)) {
      if (std::get<at::Tensor>(in).defined())
        state = at::native::update_result_type_state(std::get<at::Tensor>(in), state);
    } else {
      state = at::native::update_result_type_state(std::get<c10::Scalar>(in), state);
    }
  }
  c10::ScalarType t = at::native::result_type(state);
  if (to_float && c10::isIntegralType(t, /*includeBool=*/true)) t = c10::typeMetaToScalarType(c10::get_default_dtype());
  return t;
}

c10::ScalarType ewComputeType(EwOp op, const std::vector<EwInput>& inputs) {
  return ewComputeType(inputs, ew_dtypes(op) == EwDtypes::ToFloat || ew_dtypes(op) == EwDtypes::ToWide);
}

bool ewNative(EwOp op, c10::ScalarType compute, const std::vector<EwInput>& inputs) {
  if (!elementwise_supported(op, toKernelDType(compute))) return false;
  for (const EwInput& in : inputs) {
    if (std::holds_alternative<at::Tensor>(in)) {
      const at::Tensor& t = std::get<at::Tensor>(in);
      if (t.defined() && (t.is_complex() || toKernelDType(t.scalar_type()) == DType::Other)) return false;
    } else if (std::get<c10::Scalar>(in).isComplex()) {
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

void ewRun(EwOp op, c10::ScalarType compute, const std::vector<EwInput>& inputs, const at::Tensor& out,
           const EwParams& params, bool out_may_overlap) {
  const c10::ScalarType result_dtype = ew_is_predicate(op) ? at::kBool : compute;
  ewCheckOut(op, result_dtype, out);
  ElementwiseArgs a;
  a.op = op;
  a.compute = toKernelDType(compute);
  a.p = params;
  a.ninputs = static_cast<int>(inputs.size());
  TORCH_INTERNAL_ASSERT(a.ninputs <= 3);

  // Inputs: tensors cast to the compute dtype (where's mask to bool), scalars by value.
  std::vector<at::Tensor> operands;
  std::vector<int> slot_of_operand;
  for (int k = 0; k < a.ninputs; ++k) {
    const bool mask = ew_has_mask(op) && k == 0;
    const c10::ScalarType want = mask ? at::kBool : compute;
    const EwInput& in = inputs[static_cast<size_t>(k)];
    if (std::holds_alternative<c10::Scalar>(in) || isCpuScalar(std::get<at::Tensor>(in))) {
      a.is_scalar[k] = true;
      const bool half = compute == at::kHalf || compute == at::kBFloat16;
      scalarBytes(in, (!ew_has_mask(op) && half) ? at::kFloat : want, a.scalar[k]);
      continue;
    }
    const at::Tensor& t = std::get<at::Tensor>(in);
    if (!t.defined()) {  // an absent optional operand (clamp without one bound)
      a.is_scalar[k] = true;
      continue;
    }
    operands.push_back(t.scalar_type() == want ? t : t.to(want));
    slot_of_operand.push_back(k);
  }
  // The output: written directly when it has the result dtype, else through a temporary.
  const bool direct = out.scalar_type() == result_dtype;
  at::Tensor target = direct ? out : at::empty({0}, out.options().dtype(result_dtype));
  at::TensorIteratorConfig cfg;
  cfg.set_check_mem_overlap(!out_may_overlap).allow_cpu_scalars(true).check_all_same_dtype(false).add_output(target);
  for (const at::Tensor& t : operands) cfg.add_const_input(t);
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

bool ewTry(EwOp op, const std::vector<EwInput>& inputs, const at::Tensor& out, const EwParams& params) {
  const c10::ScalarType compute = ewComputeType(op, inputs);
  if (ewNative(op, compute, inputs)) {
    ewRun(op, compute, inputs, out, params);
    return true;
  }
  if (inputs.size() == 1 && std::holds_alternative<at::Tensor>(inputs[0]))
    return ewComplexUnary(op, std::get<at::Tensor>(inputs[0]), out);
  return ewComplex(op, compute, inputs, out, params);
}

} // namespace mytorch
