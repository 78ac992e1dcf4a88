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

// Inclusive scan along `dim`, computed and written in out's dtype.
void runScan(bool prod, const at::Tensor& self, int64_t dim, const at::Tensor& out);

} // namespace mytorch
