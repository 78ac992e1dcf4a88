// Sparse COO tensors on mytorch (torch.Tensor.to_sparse, torch.sparse_coo_tensor(device="mytorch"), to_dense,
// coalesce). A COO tensor is a SparseTensorImpl holding two ordinary mytorch tensors, its indices and values, so
// ATen's own device-generic sparse functions (SparseTensor.cpp: constructors, metadata, copy, clone, resize,
// to_dense, dense_to_sparse) work on it unchanged: they are registered here for SparsePrivateUse1 as CUDA registers
// them for SparseCUDA, and every tensor operation inside them runs on mytorch's kernels. They are registered with
// m.impl, not MT_IMPL: Checked's overlap and out= checks read strides, which sparse tensors do not have. The two
// ATen implements per device are composed from native ops: _coalesce (linear indices, a stable sort, equal indices
// merged by an index_add of their values) and _to_dense (the coalesced values put into zeros).
#include <ATen/core/Tensor.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_coalesce_native.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_sparse_coo_tensor_unsafe.h>
#include <ATen/ops/_to_sparse_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/clone_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/copy_sparse_to_sparse_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/resize_as_sparse_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/unique_consecutive.h>
#include <ATen/ops/values_native.h>
#include <ATen/ops/zero_native.h>
#include <ATen/ops/zeros.h>
#include <ATen/core/List.h>
#include <torch/library.h>

#include <vector>

namespace mytorch {
namespace {

using at::Tensor;

// Equal indices merged (their values summed), the indices in row-major order.
Tensor coalesce(const Tensor& self) {
  const int64_t sparse_dim = self.sparse_dim(), nnz = self._nnz();
  Tensor indices = self._indices(), values = self._values();
  if (nnz < 2) {
    Tensor out = at::_sparse_coo_tensor_unsafe(indices.clone(), values.clone(), self.sizes(), self.options());
    return out._coalesced_(true);
  }
  // The linear index of each entry over the sparse dimensions (row-major).
  Tensor linear = at::zeros({nnz}, indices.options());
  int64_t stride = 1;
  for (int64_t d = sparse_dim - 1; d >= 0; --d) {
    linear.add_(indices[d], stride);
    stride *= self.size(d);
  }
  auto sorted = linear.sort(/*stable=*/true, 0, false);
  const Tensor& order = std::get<1>(sorted);
  auto uniq = at::unique_consecutive(std::get<0>(sorted), /*return_inverse=*/true, /*return_counts=*/false, 0);
  const Tensor& keys = std::get<0>(uniq);
  const Tensor& slot = std::get<1>(uniq);  // the merged entry of each sorted entry
  std::vector<int64_t> vshape = values.sizes().vec();
  vshape[0] = keys.size(0);
  Tensor merged = at::zeros(vshape, values.options());
  merged.index_add_(0, slot, values.index_select(0, order));
  Tensor out_indices = at::empty({sparse_dim, keys.size(0)}, indices.options());
  Tensor rest = keys.clone();
  for (int64_t d = sparse_dim - 1; d >= 0; --d) {
    out_indices[d].copy_(rest.remainder(self.size(d)));
    rest = rest.div(self.size(d), "floor");
  }
  Tensor out = at::_sparse_coo_tensor_unsafe(out_indices, merged, self.sizes(), self.options());
  return out._coalesced_(true);
}

// The dense tensor: zeros, the (coalesced) values put at their indices. ATen's sparse_to_dense adds the sparse
// tensor to zeros, an add ATen implements per device.
Tensor toDense(const Tensor& self, std::optional<at::ScalarType> dtype, std::optional<bool> masked_grad) {
  TORCH_CHECK(!dtype.has_value() || *dtype == self.scalar_type(), "dtype argument is not supported by sparse_to_dense");
  (void)masked_grad;
  Tensor dst = at::zeros(self.sizes(), self.options().layout(at::kStrided));
  if (self._nnz() == 0) return dst;
  const Tensor c = self.is_coalesced() ? self : self.coalesce();
  const Tensor indices = c._indices();
  c10::List<std::optional<Tensor>> where;
  for (int64_t d = 0; d < c.sparse_dim(); ++d) where.push_back(indices[d]);
  dst.index_put_(where, c._values(), /*accumulate=*/false);
  return dst;
}

// A strided tensor's values at the mask's indices, as a sparse tensor with the mask's indices (to_sparse's backward).
Tensor sparseMask(const Tensor& t, const Tensor& mask) {
  TORCH_CHECK(mask.sizes().equals(t.sizes()), "sparse_mask(): operands have incompatible sizes; self has size ",
              t.sizes(), " but mask has size ", mask.sizes());
  TORCH_CHECK(t.layout() == at::kStrided, "mytorch: sparse_mask of a ", t.layout(),
              " tensor is not supported (a strided tensor masked by a sparse COO one is)");
  const Tensor indices = mask._indices();
  c10::List<std::optional<Tensor>> where;
  for (int64_t d = 0; d < mask.sparse_dim(); ++d) where.push_back(indices[d]);
  Tensor values = mask._nnz() == 0 ? at::empty({0}, t.options()) : t.index(where);
  if (mask._nnz() == 0) {
    std::vector<int64_t> vshape{0};
    for (int64_t d = mask.sparse_dim(); d < t.dim(); ++d) vshape.push_back(t.size(d));
    values = at::empty(vshape, t.options());
  }
  Tensor out = at::_sparse_coo_tensor_unsafe(indices.clone(), values, mask.sizes(), t.options().layout(at::kSparse));
  return out._coalesced_(mask.is_coalesced());
}

Tensor denseToSparse(const Tensor& self, std::optional<c10::Layout> layout, at::OptionalIntArrayRef blocksize,
                     std::optional<int64_t> dense_dim) {
  return at::native::dense_to_sparse(self, layout, blocksize, dense_dim);
}
Tensor denseToSparseDim(const Tensor& self, int64_t sparse_dim) {
  return at::native::dense_to_sparse(self, sparse_dim);
}
Tensor sparseToSparse(const Tensor& self, std::optional<c10::Layout> layout, at::OptionalIntArrayRef blocksize,
                      std::optional<int64_t> dense_dim) {
  return at::native::sparse_coo_to_sparse(self, layout, blocksize, dense_dim);
}
Tensor sparseToSparseDim(const Tensor& self, int64_t sparse_dim) {
  return at::native::sparse_coo_to_sparse(self, sparse_dim);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims", TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("_sparse_coo_tensor_with_dims_and_tensors", TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_dimI", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("_dimV", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("copy_", TORCH_FN(at::native::copy_sparse_wrapper_));
  m.impl("copy_sparse_to_sparse_", TORCH_FN(at::native::copy_sparse_));
  m.impl("clone", TORCH_FN(at::native::clone_sparse));
  m.impl("zero_", TORCH_FN(at::native::zero_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_", TORCH_FN(at::native::sparse_resize_and_clear_));
  m.impl("resize_as_sparse_", TORCH_FN(at::native::resize_as_sparse_));
  m.impl("_to_dense", TORCH_FN(toDense));
  m.impl("_coalesce", TORCH_FN(coalesce));
  m.impl("sparse_mask", TORCH_FN(sparseMask));
  m.impl("_to_sparse", TORCH_FN(sparseToSparse));
  m.impl("_to_sparse.sparse_dim", TORCH_FN(sparseToSparseDim));
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_to_sparse", TORCH_FN(denseToSparse));
  m.impl("_to_sparse.sparse_dim", TORCH_FN(denseToSparseDim));
}

} // namespace mytorch
