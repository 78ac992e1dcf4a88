// The elementwise ops: the EwOp enum and each op's traits, all derived from the pointwise op table
// (tables/pointwise.def), and the per-op constants. The op math is one functor per op (ops_math.h); the
// launcher interface is in elementwise.h, so families that only use the op math do not depend on it.
//
// Note [Op tables]
// An operator's facts live in one row of a table (X-macro .def files in tables/): its name, arity, the dtypes
// the kernels take, its result, the CUDA translation unit it compiles in, the aten operator it implements and
// whether the multi-tensor kernels run it. Each consumer includes the table with its own definition of the row
// macro and takes the columns it needs, as PyTorch's codegen reads native_functions.yaml:
//   - here: the enum and constexpr traits (ew_arity, ew_dtypes, ew_result, ew_group, ew_foreach);
//   - the sim loops and the CUDA launchers: a switch over every row (sim/elementwise.cpp, cuda/elementwise*.cu);
//   - csrc/aten/glue/PointwiseTable.cpp: the aten registration of `Table` rows; Foreach.cpp: the `_foreach_*` ops;
//     csrc/ops/PointwiseOps.cpp: the mytorch operators of `Op` rows (mytorch's own fused pointwise ops);
//   - mytorch._C._op_tables(): the rows as data, for the test that checks each reaches a native kernel on the
//     runtime under test (test/test_op_tables.py).
// Adding an op is a row and a functor (docs/contributing.md); a row without a functor does not compile.
#pragma once

#include <cstdint>
#include <type_traits>

namespace mytorch {

enum class EwOp : int {
#define MT_POINTWISE(name, ...) name,
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
};

// The column values (tables/pointwise.def explains each).
enum class EwDtypes : int { All, Num, Int, IntBool, Float, ToFloat, ToWide, Mask };
enum class EwResult : int { Cast, Exact, Bool };
// The CUDA translation units (kernels/cuda/elementwise_<group>.cu), one per value.
#define MT_EW_GROUPS(_) _(Arith) _(Logic) _(Ternary) _(UnaryFloat) _(Unary) _(Nn) _(Special)
enum class EwGroup : int {
#define MT_EW_GROUP_ENUM(g) g,
  MT_EW_GROUPS(MT_EW_GROUP_ENUM)
#undef MT_EW_GROUP_ENUM
};
enum class EwGlue : int { Table, Hand, Op };

namespace ew_table {
constexpr bool Foreach = true, No = false;
struct Row {
  int arity;
  EwDtypes dtypes;
  EwResult result;
  EwGroup group;
  EwGlue glue;
  bool foreach;
};
constexpr Row kRows[] = {
#define MT_POINTWISE(name, arity, dtypes, result, group, glue, aten, overload, foreach) \
  {arity, EwDtypes::dtypes, EwResult::result, EwGroup::group, EwGlue::glue, foreach},
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
};
constexpr const char* kNames[] = {
#define MT_POINTWISE(name, ...) #name,
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
};
constexpr int kCount = static_cast<int>(sizeof(kRows) / sizeof(kRows[0]));
} // namespace ew_table

constexpr const ew_table::Row& ew_row(EwOp op) { return ew_table::kRows[static_cast<int>(op)]; }
constexpr int ew_arity(EwOp op) { return ew_row(op).arity; }
constexpr EwDtypes ew_dtypes(EwOp op) { return ew_row(op).dtypes; }
constexpr EwResult ew_result(EwOp op) { return ew_row(op).result; }
constexpr EwGroup ew_group(EwOp op) { return ew_row(op).group; }
constexpr bool ew_foreach(EwOp op) { return ew_row(op).foreach; }
constexpr bool ew_is_predicate(EwOp op) { return ew_result(op) == EwResult::Bool; }
// Operand 0 is a bool mask (where): the loops read it as bool, whatever the compute dtype.
constexpr bool ew_has_mask(EwOp op) { return ew_dtypes(op) == EwDtypes::Mask; }
constexpr const char* ew_name(EwOp op) { return ew_table::kNames[static_cast<int>(op)]; }

// ew_visit(op, f, otherwise): f(std::integral_constant<EwOp, op>{}) for a runtime `op`, a switch over every row;
// otherwise() for a value outside the table. How the loops turn the op of a call into the op they instantiate.
template <typename F, typename G>
inline auto ew_visit(EwOp op, F&& f, G&& otherwise) {
  switch (op) {
#define MT_POINTWISE(name, ...) \
  case EwOp::name: return f(std::integral_constant<EwOp, EwOp::name>{});
#include "mytorch/tables/pointwise.def"
#undef MT_POINTWISE
  }
  return otherwise();
}

// Per-op constants. Hardshrink / Softshrink (and backwards) lambda = lo; Threshold threshold = lo, value = hi;
// Polygamma n = ialpha; Logit / LogitBackward eps = lo when has_lo. NN ops: LeakyRelu slope = alpha; Softplus beta = lo, threshold = hi; Elu alpha = alpha,
// scale = lo, input_scale = hi, is_result = has_lo (backward from the output); Hardtanh bounds lo/hi;
// MseBackward / SmoothL1Backward / HuberBackward norm = alpha; SmoothL1 beta / Huber delta = lo. `Op` rows (mytorch's
// own ops): their schema's scalar arguments in arg[], in order.
constexpr int kEwOpArgs = 4;
struct EwParams {
  double alpha = 1, lo = 0, hi = 0, nan = 0, posinf = 0, neginf = 0;
  int64_t ialpha = 1, ilo = 0, ihi = 0;
  bool has_lo = false, has_hi = false;
  // An `Op` row's scalar arguments (float, int or bool), in the order of its schema (csrc/ops/PointwiseOps.cpp).
  double arg[kEwOpArgs] = {};
};

} // namespace mytorch
