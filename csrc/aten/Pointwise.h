// Glue of the elementwise engine: turns an op's tensors and scalars into ElementwiseArgs.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <variant>
#include <vector>

#include "mytorch/elementwise.h"

namespace mytorch {

using EwInput = std::variant<at::Tensor, c10::Scalar>;

enum class EwResult { Compute, Bool }; // the result dtype: the compute dtype, or bool (predicates)

// Whether the kernels take this call: false when an input or the compute dtype is one they do not cover
// (the caller then runs the CPU fallback).
bool ewNative(EwOp op, c10::ScalarType compute, const std::vector<EwInput>& inputs);

// out = op(inputs) computed in `compute`. Broadcasting, overlap checks, output resizing and the output
// cast check are ATen's; inputs of another dtype are cast once; 0-dim CPU tensors and Scalars are passed
// by value. `out` may alias an input (in-place).
void ewRun(EwOp op, c10::ScalarType compute, EwResult result, const std::vector<EwInput>& inputs,
           const at::Tensor& out, const EwParams& params = {});

// Complex add, sub and mul composed from the real kernels on real views (Complex.cpp): false when the call is
// not one of those (the caller falls back).
bool ewComplex(EwOp op, c10::ScalarType compute, const std::vector<EwInput>& inputs, const at::Tensor& out,
               const EwParams& params);
// Complex abs (to a real or complex out), sgn (z / |z|, 0 at 0) and neg, composed the same way.
bool ewComplexUnary(EwOp op, const at::Tensor& self, const at::Tensor& out);

// Type promotion as ATen's: result_type over tensors and scalars; `to_float` promotes integral/bool results
// to the default floating dtype.
c10::ScalarType ewComputeType(const std::vector<EwInput>& inputs, bool to_float);

} // namespace mytorch
