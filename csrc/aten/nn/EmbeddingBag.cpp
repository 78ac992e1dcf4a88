// Op table: nn.EmbeddingBag (aten::_embedding_bag, _embedding_bag_forward_only, their dense backward and the
// per-sample-weights backward), composed from native kernels (Note [Composed ops]).
//
// Note [Embedding bag]
// Bag b holds indices [offsets[b], offsets[b + 1]) (the last to the end, or to the last offset with
// include_last_offset); an index equal to padding_idx (>= 0) is in no bag. The rows are gathered (index_select)
// in the accumulation type and
// - sum: added into their bag (index_add), each times its per-sample weight when given;
// - mean: the sum over the bag's count (bag_size), 0 for an empty bag;
// - max: per column the first largest row of the bag, as ATen's loop keeps it (a later row replaces the current
//   one only when strictly greater, so a NaN counts only as a bag's first row), 0 for an empty bag; max_indices
//   holds the winning rows' indices (0 for an empty bag, as ATen's CPU kernel).
// The other outputs are ATen's: offset2bag per index, bag_size (the counts for mean and max, zeros for sum) and
// max_indices (a copy of bag_size for mean, zeros for sum). The weight's gradient routes each bag's gradient to its
// rows (over the count for mean, times the per-sample weight for sum) through the deterministic
// embedding_dense_backward (which also applies scale_grad_by_freq and skips padding_idx), or for max to the
// winning rows. On the sim the forward is the CPU's kernel on host views, as the sim's GEMMs and FFTs (the
// composition, about 25x slower there than ATen's fused loop, is what the GPU and the emulated build run); the
// backward is the composition everywhere. Arguments the composition does not take -- malformed offsets, indices out of range (found with
// one host read), empty inputs, include_last_offset whose last offset leaves indices out, the sparse gradient,
// mixed index dtypes -- are the CPU's kernel, counted, with its result or error.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/_embedding_bag_backward_ops.h>
#include <ATen/ops/_embedding_bag_dense_backward_ops.h>
#include <ATen/ops/_embedding_bag_forward_only.h>
#include <ATen/ops/_embedding_bag_forward_only_ops.h>
#include <ATen/ops/_embedding_bag_ops.h>
#include <ATen/ops/_embedding_bag_per_sample_weights_backward_ops.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/embedding_dense_backward.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <limits>
#include <optional>
#include <tuple>

#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/HostRoute.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Runtime.h"

namespace mytorch {
namespace {

using at::Tensor;
using Bags = std::tuple<Tensor, Tensor, Tensor, Tensor>;
constexpr int64_t kSum = 0, kMean = 1, kMax = 2;

bool indexDtype(const Tensor& t) { return t.scalar_type() == at::kLong || t.scalar_type() == at::kInt; }

// Whether the composition takes these arguments (Note [Embedding bag]); one host read for the value checks.
bool composable(const Tensor& weight, const Tensor& indices, const Tensor& offsets, int64_t mode,
                const std::optional<Tensor>& psw, bool include_last_offset) {
  if (!kernelFloating(weight.scalar_type()) || weight.dim() != 2 || indices.dim() != 1 || offsets.dim() != 1)
    return false;
  if (indices.device() != weight.device() || offsets.device() != weight.device()) return false;
  if (!indexDtype(indices) || indices.scalar_type() != offsets.scalar_type() || mode < kSum || mode > kMax)
    return false;
  const bool weighted = psw.has_value() && psw->defined();
  if (weighted && (mode != kSum || psw->scalar_type() != weight.scalar_type() || psw->sizes() != indices.sizes()))
    return false;
  const int64_t n = indices.numel(), bags = offsets.numel() - (include_last_offset ? 1 : 0);
  if (n == 0 || bags <= 0 || weight.size(0) == 0) return false;
  const Tensor off = offsets.to(at::kLong), idx = indices.to(at::kLong);
  const Tensor last = include_last_offset ? off[bags].eq(n) : off[-1].le(n);
  const Tensor ok =
      at::stack({off[0].eq(0), last, off.diff().ge(0).all(), idx.min().ge(0), idx.max().lt(weight.size(0))}).all();
  return ok.item<bool>();
}

// The bag of each index (offsets sorted, starting at 0, covering every index).
Tensor offset2bag(const Tensor& offsets, int64_t bags, int64_t n) {
  const Tensor starts = offsets.to(at::kLong).narrow(0, 0, bags);
  return at::searchsorted(starts, at::arange(n, starts.options()), /*out_int32=*/false, /*right=*/true).sub_(1);
}

// The sim's forward: the CPU's kernel on host views of the buffers (its results copied into device memory), as the
// sim answers GEMMs and FFTs; offset2bag is the composition's when the backward will read it (the CPU's fast path
// may leave it empty).
Bags simBags(const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad_by_freq, int64_t mode,
             bool sparse, const std::optional<Tensor>& psw, bool include_last_offset, int64_t padding_idx,
             bool for_backward) {
  const std::optional<Tensor> host_psw =
      psw.has_value() && psw->defined() ? std::optional<Tensor>(hostView(*psw)) : std::nullopt;
  auto [out, bag, bag_size, max_indices] =
      at::_embedding_bag_forward_only(hostView(weight), hostView(indices), hostView(offsets), scale_grad_by_freq, mode,
                                      sparse, host_psw, include_last_offset, padding_idx);
  const at::Device d = weight.device();
  const int64_t bags = offsets.numel() - (include_last_offset ? 1 : 0);
  return {out.to(d), for_backward ? offset2bag(offsets, bags, indices.numel()) : bag.to(d), bag_size.to(d),
          max_indices.to(d)};
}

Bags embeddingBag(const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad_by_freq,
                  int64_t mode, bool sparse, const std::optional<Tensor>& psw, bool include_last_offset,
                  int64_t padding_idx) {
  if (!composable(weight, indices, offsets, mode, psw, include_last_offset))
    return Fallback<at::_ops::_embedding_bag>::call(weight, indices, offsets, scale_grad_by_freq, mode, sparse, psw,
                                                    include_last_offset, padding_idx);
  if (simHostRoute(HostRoute::EmbeddingBag))
    return simBags(weight, indices, offsets, scale_grad_by_freq, mode, sparse, psw, include_last_offset, padding_idx,
                   true);
  const int64_t n = indices.numel(), bags = offsets.numel() - (include_last_offset ? 1 : 0), dim = weight.size(1);
  const Tensor idx = indices.to(at::kLong), bag = offset2bag(offsets, bags, n);
  const Tensor valid = padding_idx >= 0 ? idx.ne(padding_idx) : at::ones_like(idx, idx.options().dtype(at::kBool));
  const Tensor counts = at::zeros({bags}, idx.options()).index_add_(0, bag, valid.to(at::kLong));
  const auto acc = opmathType(weight.scalar_type());
  Tensor rows = weight.index_select(0, idx).to(acc);
  Tensor out, bag_size, max_indices;
  if (mode == kMax) {
    // NaN rows take part only as their bag's first row: -inf elsewhere (Note [Embedding bag])
    const Tensor first = at::zeros({bags}, idx.options())
                             .fill_(n)
                             .scatter_reduce_(0, bag, at::where(valid, at::arange(n, idx.options()), n), "amin");
    const Tensor is_first = first.index_select(0, bag).eq(at::arange(n, idx.options())).unsqueeze(1);
    const double inf = std::numeric_limits<double>::infinity();
    const Tensor live = valid.unsqueeze(1).logical_and(rows.isnan().logical_not().logical_or(is_first));
    const Tensor vals = at::where(live, rows, -inf);
    const Tensor bag2 = bag.unsqueeze(1).expand({n, dim});
    out = at::full({bags, dim}, -inf, rows.options()).scatter_reduce_(0, bag2, vals, "amax");
    const Tensor hit = live.logical_and(vals.eq(out.gather(0, bag2)).logical_or(vals.isnan()));
    const Tensor pos =
        at::full({bags, dim}, n, idx.options())
            .scatter_reduce_(0, bag2, at::where(hit, at::arange(n, idx.options()).unsqueeze(1), n), "amin");
    const Tensor empty = counts.eq(0).unsqueeze(1);
    max_indices = at::where(empty, 0, idx.index_select(0, pos.clamp_max(n - 1).flatten()).view({bags, dim}));
    out = at::where(empty, 0.0, out);
    bag_size = counts;
  } else {
    if (psw.has_value() && psw->defined()) rows.mul_(psw->to(acc).unsqueeze(1));
    rows = at::where(valid.unsqueeze(1), rows, 0.0); // (not a product: a padding row may hold NaN)
    out = at::zeros({bags, dim}, rows.options()).index_add_(0, bag, rows);
    if (mode == kMean) out.div_(counts.clamp_min(1).unsqueeze(1));
    bag_size = mode == kMean ? counts : at::zeros({bags}, idx.options());
    max_indices = mode == kMean ? counts.clone() : at::zeros({bags}, idx.options());
  }
  return {out.to(weight.scalar_type()), bag, bag_size, max_indices};
}

Bags embeddingBagForwardOnly(const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                             bool scale_grad_by_freq, int64_t mode, bool sparse, const std::optional<Tensor>& psw,
                             bool include_last_offset, int64_t padding_idx) {
  if (!composable(weight, indices, offsets, mode, psw, include_last_offset))
    return Fallback<at::_ops::_embedding_bag_forward_only>::call(weight, indices, offsets, scale_grad_by_freq, mode,
                                                                 sparse, psw, include_last_offset, padding_idx);
  if (simHostRoute(HostRoute::EmbeddingBag))
    return simBags(weight, indices, offsets, scale_grad_by_freq, mode, sparse, psw, include_last_offset, padding_idx,
                   false);
  return embeddingBag(weight, indices, offsets, scale_grad_by_freq, mode, sparse, psw, include_last_offset,
                      padding_idx);
}

// The weight's gradient from the forward's offset2bag, bag_size and max_indices (Note [Embedding bag]), or nullopt
// for arguments that are not those of a composed forward.
std::optional<Tensor> denseBackward(const Tensor& grad, const Tensor& indices, const Tensor& bag,
                                    const Tensor& bag_size, const Tensor& max_indices, int64_t num_weights,
                                    bool scale_grad_by_freq, int64_t mode, const std::optional<Tensor>& psw,
                                    int64_t padding_idx) {
  if (!kernelFloating(grad.scalar_type()) || grad.dim() != 2 || !indexDtype(indices) || indices.dim() != 1 ||
      bag.scalar_type() != at::kLong || bag.sizes() != indices.sizes() || mode < kSum || mode > kMax)
    return std::nullopt;
  const int64_t bags = grad.size(0), dim = grad.size(1);
  const auto acc = opmathType(grad.scalar_type());
  if (mode == kMax) {
    if (max_indices.sizes() != grad.sizes() || bag_size.numel() != bags) return std::nullopt;
    const Tensor live = bag_size.gt(0).unsqueeze(1).expand({bags, dim}).flatten();
    const Tensor cols = at::arange(dim, max_indices.options()).unsqueeze(0);
    const Tensor target = at::where(live, (max_indices.to(at::kLong) * dim + cols).flatten(), 0);
    const Tensor g = at::where(live, grad.to(acc).flatten(), 0.0);
    return at::zeros({num_weights * dim}, g.options())
        .index_add_(0, target, g)
        .view({num_weights, dim})
        .to(grad.scalar_type());
  }
  Tensor rows = grad.to(acc).index_select(0, bag);
  if (mode == kMean) {
    if (bag_size.numel() != bags) return std::nullopt;
    rows.div_(bag_size.to(acc).clamp_min(1).index_select(0, bag).unsqueeze(1));
  }
  if (psw.has_value() && psw->defined()) rows.mul_(psw->to(acc).unsqueeze(1));
  return at::embedding_dense_backward(rows.to(grad.scalar_type()), indices, num_weights,
                                      padding_idx >= 0 ? padding_idx : -1, scale_grad_by_freq);
}

Tensor embeddingBagBackward(const Tensor& grad, const Tensor& indices, const Tensor& offsets, const Tensor& bag,
                            const Tensor& bag_size, const Tensor& max_indices, c10::SymInt num_weights,
                            bool scale_grad_by_freq, int64_t mode, bool sparse, const std::optional<Tensor>& psw,
                            int64_t padding_idx) {
  const int64_t w = num_weights.guard_int(__FILE__, __LINE__);
  const auto r =
      sparse ? std::nullopt
             : denseBackward(grad, indices, bag, bag_size, max_indices, w, scale_grad_by_freq, mode, psw, padding_idx);
  if (r) return *r;
  return Fallback<at::_ops::_embedding_bag_backward>::call(grad, indices, offsets, bag, bag_size, max_indices, w,
                                                           scale_grad_by_freq, mode, sparse, psw, padding_idx);
}

Tensor embeddingBagDenseBackward(const Tensor& grad, const Tensor& indices, const Tensor& bag, const Tensor& bag_size,
                                 const Tensor& max_indices, c10::SymInt num_weights, bool scale_grad_by_freq,
                                 int64_t mode, const std::optional<Tensor>& psw, int64_t padding_idx) {
  const int64_t w = num_weights.guard_int(__FILE__, __LINE__);
  const auto r =
      denseBackward(grad, indices, bag, bag_size, max_indices, w, scale_grad_by_freq, mode, psw, padding_idx);
  if (r) return *r;
  return Fallback<at::_ops::_embedding_bag_dense_backward>::call(grad, indices, bag, bag_size, max_indices, w,
                                                                 scale_grad_by_freq, mode, psw, padding_idx);
}

// d loss / d per_sample_weights[i] = <grad[bag of i], weight[indices[i]]>, 0 for padding_idx.
Tensor perSampleWeightsBackward(const Tensor& grad, const Tensor& weight, const Tensor& indices, const Tensor& offsets,
                                const Tensor& bag, int64_t mode, int64_t padding_idx) {
  if (mode != kSum || !kernelFloating(grad.scalar_type()) || grad.scalar_type() != weight.scalar_type() ||
      grad.dim() != 2 || weight.dim() != 2 || grad.size(1) != weight.size(1) || !indexDtype(indices) ||
      indices.dim() != 1 || bag.sizes() != indices.sizes())
    return Fallback<at::_ops::_embedding_bag_per_sample_weights_backward>::call(grad, weight, indices, offsets, bag,
                                                                                mode, padding_idx);
  const auto acc = opmathType(grad.scalar_type());
  const Tensor idx = indices.to(at::kLong);
  Tensor r = (grad.to(acc).index_select(0, bag) * weight.to(acc).index_select(0, idx)).sum(1);
  if (padding_idx >= 0) r = at::where(idx.eq(padding_idx), 0.0, r);
  return r.to(grad.scalar_type());
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_embedding_bag", embeddingBag);
  MT_IMPL(m, "_embedding_bag_forward_only", embeddingBagForwardOnly);
  MT_IMPL(m, "_embedding_bag_backward", embeddingBagBackward);
  MT_IMPL(m, "_embedding_bag_dense_backward", embeddingBagDenseBackward);
  MT_IMPL(m, "_embedding_bag_per_sample_weights_backward", perSampleWeightsBackward);
}

} // namespace mytorch
