// Glue of the elementwise engine: turns an op's tensors and scalars into ElementwiseArgs. The op's facts (the
// dtypes its kernels take, whether integral inputs compute in floating point, its result and out= rule) come
// from its row in the pointwise table (kernels/include/mytorch/tables/pointwise.def).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/util/ArrayRef.h>

#include <type_traits>
#include <vector>

#include "mytorch/ew_ops.h"

namespace mytorch {

// An operand of the engine: a tensor or a Scalar. A tensor given as an lvalue is borrowed, a temporary is owned:
// an EwInput lives in one glue call's argument list, and the caller's tensors outlive it. Borrowing is the point:
// copying a tensor that only its Python object holds takes the GIL twice (c10's intrusive_ptr increfs the PyObject
// when the count goes from 1 to 2, and decrefs it on the way back), which was a tenth of a small op's time.
class EwInput {
 public:
  EwInput(const at::Tensor& t) : t_(&t) {}  // NOLINT(google-explicit-constructor): built from {self, other}
  EwInput(at::Tensor&& t) : owned_(std::move(t)), t_(&owned_) {}  // NOLINT(google-explicit-constructor)
  EwInput(const c10::Scalar& s) : s_(s) {}  // NOLINT(google-explicit-constructor)
  template <typename N, std::enable_if_t<std::is_arithmetic_v<N>, int> = 0>
  EwInput(N v) : s_(v) {}  // NOLINT(google-explicit-constructor)
  EwInput(const EwInput& o) : owned_(o.owned_), t_(o.t_ == &o.owned_ ? &owned_ : o.t_), s_(o.s_) {}
  EwInput& operator=(const EwInput&) = delete;

  bool isTensor() const { return t_ != nullptr; }
  const at::Tensor& tensor() const { return *t_; }
  const c10::Scalar& scalar() const { return s_; }

 private:
  at::Tensor owned_;
  const at::Tensor* t_ = nullptr;
  c10::Scalar s_;
};

// Type promotion as ATen's: result_type over tensors and scalars; `to_float` promotes integral/bool results
// to the default floating dtype.
c10::ScalarType ewComputeType(c10::ArrayRef<EwInput> inputs, bool to_float);
// The compute dtype of `op` on these inputs: promoted to floating point for the table's ToFloat and ToWide rows.
c10::ScalarType ewComputeType(EwOp op, c10::ArrayRef<EwInput> inputs);

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
bool ewNative(EwOp op, c10::ScalarType compute, c10::ArrayRef<EwInput> inputs);

// out = op(inputs) computed in `compute`. Broadcasting, overlap checks, output resizing and the output
// cast check are ATen's; the result dtype and the out= rule are the row's; inputs of another dtype are cast
// once; 0-dim CPU tensors and Scalars are passed by value. `out` may alias an input (in-place). out_may_overlap:
// an out whose elements share memory is written as given (masked_fill_ on an expanded self, which ATen allows).
void ewRun(EwOp op, c10::ScalarType compute, c10::ArrayRef<EwInput> inputs, const at::Tensor& out,
           const EwParams& params = {}, bool out_may_overlap = false);

// out = op(inputs) on mytorch's kernels when they take the call (complex add/sub/mul/abs/sgn/neg composed on
// real views, Complex.cpp); false when they do not, and the caller runs the CPU fallback. The one way an op's
// glue runs the engine.
bool ewTry(EwOp op, c10::ArrayRef<EwInput> inputs, const at::Tensor& out, const EwParams& params = {});

// Note [Elementwise fast path]
// A functional or in-place elementwise call whose tensor operands are all contiguous, of one size, on one device and
// already of a floating compute dtype (CPU scalars aside) has an evident result: contiguous, of those sizes, of the
// compute dtype (bool for a predicate) -- what the structured kernel's meta function and TensorIterator give it.
// Such a call is allocated and run as one contiguous run (Note [Elementwise contiguous run]) without the meta
// function's TensorIterator and the dispatcher's trip to empty, which were two thirds of a small op's time. Any
// other call returns undefined / false, and the caller runs the structured kernel
// (at::compositeexplicitautogradnonfunctional::<op>: ATen's meta function, then the op's out= glue), so every
// check and layout rule outside the evident case stays ATen's.
at::Tensor ewFast(EwOp op, c10::ArrayRef<EwInput> inputs, const EwParams& params = {});
// self = op(inputs) in place (inputs[0] is self): false, with nothing written, when the call is not such a run.
bool ewFastInplace(EwOp op, const at::Tensor& self, c10::ArrayRef<EwInput> inputs, const EwParams& params = {});

// ewTry, else fallback() (which returns the out= the CPU fallback wrote).
template <typename F>
at::Tensor& ewOr(EwOp op, c10::ArrayRef<EwInput> inputs, at::Tensor& out, const EwParams& params, F&& fallback) {
  if (ewTry(op, inputs, out, params)) return out;
  return fallback();
}

// Complex add, sub and mul composed from the real kernels on real views (Complex.cpp): false when the call is
// not one of those (the caller falls back).
bool ewComplex(EwOp op, c10::ScalarType compute, c10::ArrayRef<EwInput> inputs, const at::Tensor& out,
               const EwParams& params);
// Complex abs (to a real or complex out), sgn (z / |z|, 0 at 0) and neg, composed the same way.
bool ewComplexUnary(EwOp op, const at::Tensor& self, const at::Tensor& out);
// where(cond, self, other) with a complex result: the real selection on both parts (Complex.cpp); false when an
// operand is not a tensor of out's device (the caller falls back).
bool whereComplex(const at::Tensor& cond, const at::Tensor& self, const at::Tensor& other, at::Tensor& out);

} // namespace mytorch
