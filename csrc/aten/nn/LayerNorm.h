// The row-normalisation forward that LayerNorm, RMSNorm and mytorch's residual add + norm ops share (Note [Fused
// LayerNorm] in kernels/include/mytorch/layernorm.h; the add + norm glue: csrc/ops/AddNorm.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <tuple>

namespace mytorch {

// y, mean (LayerNorm only; undefined for RMSNorm), rstd and, with a residual, the sum input + residual, normalised
// over the trailing normalized_shape with ATen's checks; `op` names the operator in error messages.
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> rowNormForward(
    bool rms, const at::Tensor& input, const at::Tensor& residual, at::IntArrayRef normalized_shape,
    const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias, double eps, const char* op);
// RMSNorm's eps when none is given: the machine epsilon of the input's dtype (float32's for the half types), as ATen.
double rmsEps(const at::Tensor& x, std::optional<double> eps);

} // namespace mytorch
