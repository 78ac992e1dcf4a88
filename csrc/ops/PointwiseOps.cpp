// mytorch's own pointwise operators: the pointwise table's `Op` rows (kernels/include/mytorch/tables/pointwise.def),
// each registered as mytorch::<aten> (its schema in Library.cpp) on the elementwise engine, so that a fused
// pointwise op is a row, a functor and its Python definition (docs/contributing.md, "Adding a fused op").
//
// The kernel is boxed, so a row needs no C++ signature: the schema's tensor arguments are the row's operands in
// order, and its float, int and bool arguments fill EwParams::arg in order. The result is a new contiguous tensor of
// the operands' broadcast shape in their promoted dtype (what the Python definition's fake kernel gives: Note [A
// fused op, defined once]); TensorIterator checks that the operands share a device.
#include <ATen/ExpandUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <vector>

#include "csrc/aten/glue/Pointwise.h"

namespace mytorch {
namespace {

template <EwOp op>
void rowKernel(const c10::OperatorHandle& handle, torch::jit::Stack* stack) {
  const c10::FunctionSchema& schema = handle.schema();
  const size_t n = schema.arguments().size();
  std::vector<EwInput> inputs;
  std::vector<at::Tensor> tensors;
  EwParams p;
  int scalars = 0;
  for (const c10::IValue& v : torch::jit::last(*stack, n)) {
    if (v.isTensor()) {
      tensors.push_back(v.toTensor());
      inputs.emplace_back(v.toTensor());
    } else {
      TORCH_INTERNAL_ASSERT(v.isDouble() || v.isInt() || v.isBool(), schema.name(),
                            ": an Op row's schema takes tensors and float, int or bool arguments only");
      TORCH_INTERNAL_ASSERT(scalars < kEwOpArgs, schema.name(), ": at most ", kEwOpArgs, " scalar arguments");
      p.arg[scalars++] = v.isDouble() ? v.toDouble() : v.isInt() ? static_cast<double>(v.toInt()) : v.toBool();
    }
  }
  TORCH_INTERNAL_ASSERT(static_cast<int>(tensors.size()) == ew_arity(op), schema.name(), ": the schema has ",
                        tensors.size(), " tensors, the table row ", ew_arity(op));
  const c10::ScalarType compute = ewComputeType(op, inputs);
  if (!ewNative(op, compute, inputs)) {
    std::vector<c10::ScalarType> dtypes;
    for (const at::Tensor& t : tensors) dtypes.push_back(t.scalar_type());
    TORCH_CHECK(false, schema.name(), ": expected floating-point tensors (float, double, half or bfloat16), but got ",
                dtypes);
  }
  at::DimVector shape(tensors[0].sizes());
  for (size_t i = 1; i < tensors.size(); ++i) shape = at::infer_size_dimvector(shape, tensors[i].sizes());
  at::Tensor out = at::empty(shape, tensors[0].options().dtype(ew_is_predicate(op) ? at::kBool : compute));
  ewRun(op, compute, inputs, out, p);
  torch::jit::drop(*stack, n);
  torch::jit::push(*stack, std::move(out));
}

} // namespace

#define MT_REGISTER_Table(name, aten)
#define MT_REGISTER_Hand(name, aten)
#define MT_REGISTER_Op(name, aten) m.impl(#aten, torch::CppFunction::makeFromBoxedFunction<&rowKernel<EwOp::name>>());

TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) {
#define MT_POINTWISE(name, arity, dtypes, result, group, glue, aten, overload, foreach) MT_REGISTER_##glue(name, aten)
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
}

} // namespace mytorch
