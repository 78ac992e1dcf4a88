// Op table: the aten registrations derived from the reduction table (kernels/include/mytorch/tables/
// reductions.def). A reduction row whose glue is `Table` registers aten::<aten>.<overload>, an out= overload
// with sum's signature (self, dim?, keepdim, dtype?, out), and its functional form aten::<aten>, here; `Hand` rows have their own glue (ReduceOps.cpp).
// Also the reduction and scan rows as data for mytorch._C._op_tables() (OpTables.h).
#include <ATen/Operators.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/OpTables.h"
#include "csrc/aten/glue/Reduce.h"

namespace mytorch {
namespace {

using at::Tensor;

// out = op(self cast to dtype) over dim, as sum.IntList_out; complex inputs and dtypes the kernels do not take go
// through the CPU fallback.
template <RedOp op, typename AtenOp>
Tensor& dimDtypeOut(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype,
                    Tensor& out) {
  checkNamedDtype(out, dtype);
  const Tensor in = computeInput(self, dtype, out);
  if (in.is_complex() || out.is_complex() || !reduce_supported(op, toKernelDType(in.scalar_type())))
    return Fallback<AtenOp>::call(self, dim, keepdim, dtype, out);
  runReduce(op, in, dim, keepdim, out);
  return out;
}

// The functional form (self, dim?, keepdim, dtype?): an out= of sum's result dtype (the named one; int64 for
// integral and bool inputs), through the out= kernel above. ATen gives these ops CPU and CUDA kernels of their
// own, no composite, so without it the functional form would fall back.
template <RedOp op, typename AtenOut>
Tensor dimDtype(const Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<at::ScalarType> dtype) {
  const auto t =
      dtype.value_or(c10::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? at::kLong : self.scalar_type());
  Tensor out = at::empty({0}, self.options().dtype(t));
  return dimDtypeOut<op, AtenOut>(self, dim, keepdim, dtype, out);
}

#define MT_REGISTER_Hand(name, aten, overload)
#define MT_REGISTER_Table(name, aten, overload)                                             \
  MT_IMPL(m, #aten "." #overload, (dimDtypeOut<RedOp::name, at::_ops::aten##_##overload>)); \
  MT_IMPL(m, #aten, (dimDtype<RedOp::name, at::_ops::aten##_##overload>));

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define MT_REDUCTION(name, dtypes, glue, aten, overload) MT_REGISTER_##glue(name, aten, overload)
#include "mytorch/tables/reductions.def"
}

void appendReductionRows(std::vector<OpTableRow>& rows) {
#define MT_REDUCTION(name, dtypes, glue, aten, overload) \
  rows.push_back({"reduction", #name, 1, #dtypes, "", "", #glue, #aten, #overload, false});
#define MT_SCAN(name, dtypes, glue, aten, overload) \
  rows.push_back({"scan", #name, 1, #dtypes, "", "", #glue, #aten, #overload, false});
#include "mytorch/tables/reductions.def"
}

} // namespace mytorch
