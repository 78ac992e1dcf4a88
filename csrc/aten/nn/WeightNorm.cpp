// Op table: the fused weight norm (torch.nn.utils.weight_norm, wav2vec2's positional convolution) on mytorch,
// composed of native kernels: w = v * (g / ||v||) with the norm over every dimension but `dim` (the first or
// the last, as ATen's fused kernels), norms in float32 for half/bfloat16 weights (as ATen returns them), and the
// backward grad_g = sum(grad_w * v) / ||v||, grad_v = (g / ||v||) * (grad_w - v * grad_g / ||v||).
#include <ATen/core/Tensor.h>
#include <ATen/ops/div.h>
#include <ATen/ops/linalg_vector_norm.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"

#include <vector>

namespace mytorch {
namespace {

using at::Tensor;

std::vector<int64_t> otherDims(const Tensor& v, int64_t dim) {
  TORCH_CHECK(dim == 0 || dim == v.dim() - 1,
              "_weight_norm_interface: expected dim to be the first or the last "
              "dimension (0 or ",
              v.dim() - 1, "), but got ", dim);
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < v.dim(); ++d)
    if (d != dim) dims.push_back(d);
  return dims;
}

c10::ScalarType accType(const Tensor& v) {
  return v.scalar_type() == at::kHalf || v.scalar_type() == at::kBFloat16 ? at::kFloat : v.scalar_type();
}

std::tuple<Tensor, Tensor> weightNorm(const Tensor& v, const Tensor& g, int64_t dim) {
  const auto dims = otherDims(v, dim);
  Tensor norms = at::linalg_vector_norm(v, 2, dims, /*keepdim=*/true, accType(v));
  Tensor w = at::mul(v, at::div(g.to(norms.scalar_type()), norms).to(v.scalar_type()));
  return {w, norms};
}

std::tuple<Tensor, Tensor> weightNormBackward(const Tensor& grad_w, const Tensor& saved_v, const Tensor& saved_g,
                                              const Tensor& saved_norms, int64_t dim) {
  const auto dims = otherDims(saved_v, dim);
  const auto acc = saved_norms.scalar_type();
  Tensor gw = grad_w.to(acc), v = saved_v.to(acc), g = saved_g.to(acc);
  Tensor grad_g = at::div(at::sum(at::mul(gw, v), dims, /*keepdim=*/true), saved_norms);
  Tensor grad_v = at::mul(at::div(g, saved_norms), at::sub(gw, at::mul(v, at::div(grad_g, saved_norms))));
  return {grad_v.to(saved_v.scalar_type()), grad_g.to(saved_g.scalar_type())};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_weight_norm_interface", weightNorm);
  MT_IMPL(m, "_weight_norm_interface_backward", weightNormBackward);
}

} // namespace mytorch
