// Glue of the reduction engine (Note [Reduction engine] in kernels/include/mytorch/reduce.h).
#pragma once

#include <ATen/core/Tensor.h>

#include "mytorch/reduce.h"

namespace mytorch {

// Reduces `self` over `dims` (empty or absent: all) into `out` (resized, written in out's dtype) and, for
// arg/max/min/var_mean, `out2` (indices or mean). `self` is read in its own dtype.
void runReduce(RedOp op, const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim, const at::Tensor& out,
               const at::Tensor& out2 = at::Tensor(), double p = 2, double correction = 1, bool take_sqrt = false,
               bool want_values = true);

// `self` cast to `dtype` when the call names one.
at::Tensor castFor(const at::Tensor& self, std::optional<at::ScalarType> dtype);

// The input of a reduction or scan as the kernel should read it: cast to the dtype the call names; else, for a
// float64 out= of a narrower floating input, cast to float64, as ATen computes in the out='s dtype (the kernels
// accumulate a narrower input in float32). Integral inputs into a wider integral out= are read as they are:
// the kernels accumulate them in the out='s type without a copy of the input.
at::Tensor computeInput(const at::Tensor& self, std::optional<at::ScalarType> dtype, const at::Tensor& out);

// A reduction's out= when the call names a dtype: that dtype (ATen's structured reductions); without one, any
// dtype.
void checkNamedDtype(const at::Tensor& out, std::optional<at::ScalarType> dtype);

// Inclusive scan along `dim`, computed and written in out's dtype.
// out[i] = the scan of self along dim up to i; indices (int64, the indexed rows only): where each value came from.
void runScan(ScanOp op, const at::Tensor& self, int64_t dim, const at::Tensor& out,
             const at::Tensor& indices = at::Tensor());

} // namespace mytorch
