// mytorch::add_layer_norm and mytorch::add_rms_norm: the residual add fused into the norm (y = norm(x + residual),
// and the sum), on the row-normalisation kernels (csrc/aten/nn/LayerNorm.h). Schemas: Library.cpp; autograd, fake
// kernels and the CPU references: python/mytorch/ops/norm.py.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "csrc/aten/nn/LayerNorm.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

std::tuple<Tensor, Tensor, Tensor, Tensor> addLayerNorm(const Tensor& x, const Tensor& residual,
                                                        at::IntArrayRef normalized_shape, const OptT& weight,
                                                        const OptT& bias, double eps) {
  return rowNormForward(false, x, residual, normalized_shape, weight, bias, eps, "mytorch::add_layer_norm");
}

std::tuple<Tensor, Tensor, Tensor> addRmsNorm(const Tensor& x, const Tensor& residual, at::IntArrayRef normalized_shape,
                                              const OptT& weight, std::optional<double> eps) {
  auto [y, mean, rstd, sum] = rowNormForward(true, x, residual, normalized_shape, weight, std::nullopt, rmsEps(x, eps),
                                             "mytorch::add_rms_norm");
  return {y, rstd, sum};
}

} // namespace

TORCH_LIBRARY_IMPL(mytorch, PrivateUse1, m) {
  m.impl("add_layer_norm", TORCH_FN(addLayerNorm));
  m.impl("add_rms_norm", TORCH_FN(addRmsNorm));
}

} // namespace mytorch
