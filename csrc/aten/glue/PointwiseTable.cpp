// Op table: the aten registrations derived from the pointwise table (kernels/include/mytorch/tables/
// pointwise.def). A row whose glue is `Table` registers aten::<aten>.<overload> here as out = op(inputs) on the
// elementwise engine, with the CPU fallback for what the kernels do not take; `Hand` rows have their own glue
// (UnaryOps, BinaryOps, Activation), `Op` rows are mytorch's own operators (csrc/ops/PointwiseOps.cpp). Also the
// rows as data for mytorch._C._op_tables() (OpTables.h).
#include <ATen/Operators.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/OpTables.h"
#include "csrc/aten/glue/Pointwise.h"

namespace mytorch {
namespace {

using at::Tensor;

// The out= kernels of a Table row, by arity: (self, out) and (self, other, out), as every such aten overload.
template <EwOp op, typename AtenOp>
struct TableRow {
  static Tensor& out1(const Tensor& self, Tensor& out) {
    return ewOr(op, {self}, out, {}, [&]() -> Tensor& { return Fallback<AtenOp>::call(self, out); });
  }
  static Tensor& out2(const Tensor& self, const Tensor& other, Tensor& out) {
    return ewOr(op, {self, other}, out, {}, [&]() -> Tensor& { return Fallback<AtenOp>::call(self, other, out); });
  }
};

// Table rows register; Hand rows are registered by their own glue, Op rows (mytorch's own operators) by
// csrc/ops/PointwiseOps.cpp.
#define MT_REGISTER_Hand(name, arity, aten, overload)
#define MT_REGISTER_Op(name, arity, aten, overload)
#define MT_REGISTER_Table(name, arity, aten, overload)                                     \
  {                                                                                        \
    static_assert(arity <= 2, "a Table row of arity 3 needs its own glue (mark it Hand)"); \
    using Row = TableRow<EwOp::name, at::_ops::aten##_##overload>;                         \
    MT_IMPL(m, #aten "." #overload, Row::out##arity);                                      \
  }

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m){
#define MT_POINTWISE(name, arity, dtypes, result, group, glue, aten, overload, foreach) \
  MT_REGISTER_##glue(name, arity, aten, overload)
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
}

std::vector<OpTableRow> opTableRows() {
  std::vector<OpTableRow> rows = {
#define MT_POINTWISE(name, arity, dtypes, result, group, glue, aten, overload, foreach) \
  {"pointwise", #name, arity, #dtypes, #result, #group, #glue, #aten, #overload, ew_table::foreach},
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
  };
  appendReductionRows(rows);
  return rows;
}

} // namespace mytorch
