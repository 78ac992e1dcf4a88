// Glue of the elementwise engine: turns an op's tensors and scalars into ElementwiseArgs. The op's facts (the
// dtypes its kernels take, whether integral inputs compute in floating point, its result and out= rule) come
// from its row in the pointwise table (kernels/include/mytorch/tables/pointwise.def).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <variant>
#include <vector>

#include "mytorch/ew_ops.h"

namespace mytorch {

using EwInput = std::variant<at::Tensor, c10::Scalar>;

// Type promotion as ATen's: result_type over tensors and scalars; `to_float` promotes integral/bool results
// to the default floating dtype.
c10::ScalarType ewComputeType(const std::vector<EwInput>& inputs, bool to_float);
// The compute dtype of `op` on these inputs: promoted to floating point for the table's ToFloat and ToWide rows.
c10::ScalarType ewComputeType(EwOp op, const std::vector<EwInput>& inputs);

// The one out= dtype rule of the pointwise table: `result` (the compute dtype, or bool for predicates) must cast
// safely into out, and into exactly out's dtype for an Exact row (ATen's TensorIterator ops built with every dtype
// equal). Every path that writes a row's out= checks it here: the engine, and the complex compositions on real views.
void ewCheckOut(EwOp op, c10::ScalarType result, const at::Tensor& out);

// Resizes an elementwise op's out= to the broadcast shape of `inputs`, as ATen's TensorIterator does: with
// resize_output's warning, and the layout TensorIterator gives a resized out= (the inputs' dimension order) --
// for the compositions that write an out= themselves instead of through the engine.
void ewResizeOut(const at::Tensor& out, const std::vector<at::Tensor>& inputs);

// Whether the kernels take this call: false when an input or the compute dtype is one they do not cover
// (the caller then runs the CPU fallback).
bool ewNative(EwOp op, c10::ScalarType compute, const std::vector<EwInput>& inputs);

// out = op(inputs) computed in `compute`. Broadcasting, overlap checks, output resizing and the output
// cast check are ATen's; the result dtype and the out= rule are the row's; inputs of another dtype are cast
// once; 0-dim CPU tensors and Scalars are passed by value. `out` may alias an input (in-place). out_may_overlap:
// an out whose elements share memory is written as given (masked_fill_ on an expanded self, which ATen allows).
void ewRun(EwOp op, c10::ScalarType compute, const std::vector<EwInput>& inputs, const at::Tensor& out,
           const EwParams& params = {}, bool out_may_overlap = false);

// out = op(inputs) on mytorch's kernels when they take the call (complex add/sub/mul/abs/sgn/neg composed on
// real views, Complex.cpp); false when they do not, and the caller runs the CPU fallback. The one way an op's
// glue runs the engine.
bool ewTry(EwOp op, const std::vector<EwInput>& inputs, const at::Tensor& out, const EwParams& params = {});

// ewTry, else fallback() (which returns the out= the CPU fallback wrote).
template <typename F>
at::Tensor& ewOr(EwOp op, const std::vector<EwInput>& inputs, at::Tensor& out, const EwParams& params, F&& fallback) {
  if (ewTry(op, inputs, out, params)) return out;
  return fallback();
}

// Complex add, sub and mul composed from the real kernels on real views (Complex.cpp): false when the call is
// not one of those (the caller falls back).
bool ewComplex(EwOp op, c10::ScalarType compute, const std::vector<EwInput>& inputs, const at::Tensor& out,
               const EwParams& params);
// Complex abs (to a real or complex out), sgn (z / |z|, 0 at 0) and neg, composed the same way.
bool ewComplexUnary(EwOp op, const at::Tensor& self, const at::Tensor& out);
// where(cond, self, other) with a complex result: the real selection on both parts (Complex.cpp); false when an
// operand is not a tensor of out's device (the caller falls back).
bool whereComplex(const at::Tensor& cond, const at::Tensor& self, const at::Tensor& other, at::Tensor& out);

} // namespace mytorch
