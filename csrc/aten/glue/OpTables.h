// The op tables' rows as data (kernels/include/mytorch/tables/*.def), for mytorch._C._op_tables(): the test
// that checks every row reaches a native kernel on the runtime under test reads them (test/test_op_tables.py).
#pragma once

#include <string>
#include <vector>

namespace mytorch {

struct OpTableRow {
  std::string table;      // "pointwise", "reduction" or "scan"
  std::string name;       // the kernels' enumerator
  int arity;              // tensor operands (1 for reductions and scans)
  std::string dtypes;     // the dtypes column
  std::string result;     // pointwise: Cast / Exact / Bool; reductions: the accumulator
  std::string group;      // pointwise: the CUDA group
  std::string glue;       // Table (registered from the row) or Hand (its own glue)
  std::string aten;       // aten::<aten>.<overload>, the operator the row implements
  std::string overload;
  bool foreach;           // pointwise: on the multi-tensor path
};

std::vector<OpTableRow> opTableRows();
// The reduction and scan rows (ReduceTable.cpp).
void appendReductionRows(std::vector<OpTableRow>& rows);

} // namespace mytorch
