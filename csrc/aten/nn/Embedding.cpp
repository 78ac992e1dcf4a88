// Op table: embedding_dense_backward, deterministic (Note [Embedding backward]); embedding's forward is
// index_select (native).
#include <ATen/core/Tensor.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/core/DeviceErrors.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "mytorch/embedding.h"

namespace mytorch {
namespace {

using at::Tensor;

Tensor embeddingDenseBackward(const Tensor& grad_output, const Tensor& indices, int64_t num_weights,
                              int64_t padding_idx, bool scale_grad_by_freq) {
  TORCH_CHECK(indices.scalar_type() == at::kLong || indices.scalar_type() == at::kInt,
              "embedding_dense_backward: expected indices of type Long or Int, but got ", indices.scalar_type());
  TORCH_CHECK(grad_output.scalar_type() == at::kFloat || grad_output.scalar_type() == at::kDouble ||
                  grad_output.scalar_type() == at::kHalf || grad_output.scalar_type() == at::kBFloat16,
              "embedding_dense_backward: expected a floating point gradient, but got ", grad_output.scalar_type());
  const int64_t n = indices.numel();
  const int64_t dim = grad_output.dim() == 0 ? 1 : grad_output.size(-1);
  TORCH_CHECK(grad_output.numel() == n * dim, "embedding_dense_backward: expected grad_output with ", n, " x ", dim,
              " elements, but got ", grad_output.sizes());
  Tensor out = at::zeros({num_weights, dim}, grad_output.options());
  if (n == 0 || dim == 0 || num_weights == 0) return out;
  Tensor g = grad_output.reshape({n, dim}).contiguous();
  auto [sorted, order] = at::sort(indices.reshape({n}).to(at::kLong), /*stable=*/true, 0, false);
  sorted = sorted.contiguous();
  order = order.contiguous();
  EmbeddingBackwardArgs a;
  a.dtype = toKernelDType(g.scalar_type());
  a.sorted = sorted.data_ptr<int64_t>();
  a.order = order.data_ptr<int64_t>();
  a.grad = g.data_ptr();
  a.out = out.data_ptr();
  a.n = n;
  a.dim = dim;
  a.num_weights = num_weights;
  a.padding_idx = padding_idx;
  a.scale_grad_by_freq = scale_grad_by_freq;
  a.error = deviceErrorSite(out.device(), "embedding_dense_backward", DeviceErrorFormat::EmbeddingIndex, true, -1,
                            num_weights);
  c10::DeviceGuard guard(out.device());
  MT_RT_CHECK(kernels::embedding_backward(a, streamFor(out)));
  afterErrorCheckedLaunch(out.device());  // Note [Device-side errors]
  return out;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { MT_IMPL(m, "embedding_dense_backward", embeddingDenseBackward); }

} // namespace mytorch
