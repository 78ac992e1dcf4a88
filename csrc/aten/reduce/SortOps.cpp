// Op table: sort and what is built on it (topk, unique), the binary searches (isin, searchsorted,
// bucketize), multinomial and the dropout backward, all on native kernels; random draws come from the device's
// Philox generator.
#include <ATen/ScalarOps.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/any.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/all.h>
#include <ATen/ops/aminmax.h>
#include <ATen/ops/searchsorted_ops.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/unique_dim_ops.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/log.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sum.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/sort.h"

namespace mytorch {
namespace {

using at::Tensor;

// Sorts along dim; returns (values, indices) shaped like self, or with k along dim for a top-k (k >= 0: only the
// first k of each sorted slice are computed, by selection on both runtimes: Notes [Sim sort and top-k], [CUDA radix
// sort and select]).
std::tuple<Tensor, Tensor> sortAlong(const Tensor& self, int64_t dim, bool descending, int64_t k = -1) {
  TORCH_CHECK(!self.is_complex(), "sort(): complex tensors cannot be sorted");
  TORCH_CHECK(toKernelDType(self.scalar_type()) != DType::Other, "sort(): unsupported dtype ", self.scalar_type());
  if (self.dim() == 0) return {self.clone(), at::zeros({}, self.options().dtype(at::kLong))};
  dim = at::maybe_wrap_dim(dim, self.dim());
  Tensor moved = self.movedim(dim, -1).contiguous();
  std::vector<int64_t> out_sizes = moved.sizes().vec();
  if (k >= 0) out_sizes.back() = k;
  Tensor values = at::empty(out_sizes, moved.options()),
         indices = at::empty(out_sizes, moved.options().dtype(at::kLong));
  SortArgs a;
  a.dtype = toKernelDType(self.scalar_type());
  a.in = moved.const_data_ptr();
  a.values = values.data_ptr();
  a.indices = indices.data_ptr<int64_t>();
  a.length = moved.size(-1);
  a.slices = a.length ? moved.numel() / a.length : 0;
  a.descending = descending;
  a.k = k;
  // the cuda radix sort's and select's (Note [CUDA radix sort and select]); the sim needs none
  const Tensor scratch = kernelWorkspace(onSim() ? 0 : sort_workspace_bytes(a), self);
  a.scratch = dataOrNull(scratch);
  if (moved.numel() > 0) {
    c10::DeviceGuard guard(self.device());
    MT_RT_CHECK(kernels::sort(a, streamFor(self)));
  }
  return {values.movedim(-1, dim), indices.movedim(-1, dim)};
}

// isin (every generate() with an EOS token calls it): the test values sorted once by the sort engine, then a
// binary search per element (sort.h). ATen's rules: bool and complex inputs are refused, both sides are
// promoted to their common dtype, the result is bool and shaped like the elements.
void checkIsinDtype(c10::ScalarType t) {
  TORCH_CHECK(t != at::kBool && !c10::isComplexType(t) && toKernelDType(t) != DType::Other,
              "Unsupported input type encountered for isin(): ", t);
}

Tensor& isinOut(const Tensor& elements, const Tensor& test_elements, bool /*assume_unique*/, bool invert, Tensor& out) {
  checkIsinDtype(elements.scalar_type());
  checkIsinDtype(test_elements.scalar_type());
  checkOutDtype(out, at::kBool);
  const Tensor& test = test_elements;  // on elements' device: the one check path (Checked.h) saw to it
  const auto common = at::result_type(elements, test);
  Tensor el = elements.to(common).contiguous();
  Tensor sorted = std::get<0>(sortAlong(test.to(common).reshape({-1}), 0, false));
  at::native::resize_output(out, elements.sizes());
  Tensor result = out.is_contiguous() ? out : at::empty(elements.sizes(), elements.options().dtype(at::kBool));
  IsinArgs a;
  a.dtype = toKernelDType(common);
  a.elements = el.const_data_ptr();
  a.n = el.numel();
  a.sorted = sorted.const_data_ptr();
  a.m = sorted.numel();
  a.invert = invert;
  a.out = result.data_ptr<bool>();
  if (a.n > 0) {
    c10::DeviceGuard guard(elements.device());
    MT_RT_CHECK(kernels::isin(a, streamFor(elements)));
  }
  if (!result.is_same(out)) out.copy_(result);
  return out;
}

Tensor isinTT(const Tensor& elements, const Tensor& test_elements, bool assume_unique, bool invert) {
  Tensor out = at::empty({0}, elements.options().dtype(at::kBool));
  return isinOut(elements, test_elements, assume_unique, invert, out);
}

Tensor& isinTSOut(const Tensor& elements, const at::Scalar& test_element, bool assume_unique, bool invert,
                  Tensor& out) {
  checkIsinDtype(test_element.type());
  return isinOut(elements, at::native::wrapped_scalar_tensor(test_element, elements.device()), assume_unique, invert,
                 out);
}

Tensor isinTS(const Tensor& elements, const at::Scalar& test_element, bool assume_unique, bool invert) {
  Tensor out = at::empty({0}, elements.options().dtype(at::kBool));
  return isinTSOut(elements, test_element, assume_unique, invert, out);
}

Tensor& isinSTOut(const at::Scalar& element, const Tensor& test_elements, bool assume_unique, bool invert,
                  Tensor& out) {
  return isinOut(at::native::wrapped_scalar_tensor(element, test_elements.device()), test_elements, assume_unique,
                 invert, out);
}

Tensor isinST(const at::Scalar& element, const Tensor& test_elements, bool assume_unique, bool invert) {
  Tensor out = at::empty({0}, test_elements.options().dtype(at::kBool));
  return isinSTOut(element, test_elements, assume_unique, invert, out);
}

std::tuple<Tensor&, Tensor&> sortOut(const Tensor& self, std::optional<bool>, int64_t dim, bool descending,
                                     Tensor& values, Tensor& indices) {
  checkOutDtype(values, self.scalar_type());
  checkOutDtype(indices, at::kLong);
  auto [v, i] = sortAlong(self, dim, descending);
  at::native::resize_output(values, v.sizes());
  at::native::resize_output(indices, i.sizes());
  values.copy_(v);
  indices.copy_(i);
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> topkOut(const Tensor& self, int64_t k, int64_t dim, bool largest, bool, Tensor& values,
                                     Tensor& indices) {
  checkOutDtype(values, self.scalar_type());
  checkOutDtype(indices, at::kLong);
  const int64_t d = self.dim() ? at::maybe_wrap_dim(dim, self.dim()) : 0;
  const int64_t n = self.dim() ? self.size(d) : 1;
  TORCH_CHECK(k >= 0 && k <= n, "selected index k out of range");
  auto [v, i] = self.dim() ? sortAlong(self, d, largest, k) : sortAlong(self, d, largest);
  Tensor tv = self.dim() ? v.narrow(d, 0, k) : v, ti = self.dim() ? i.narrow(d, 0, k) : i;
  at::native::resize_output(values, tv.sizes());
  at::native::resize_output(indices, ti.sizes());
  values.copy_(tv);
  indices.copy_(ti);
  return {values, indices};
}

std::tuple<Tensor, Tensor, Tensor> unique2(const Tensor& self, bool, bool return_inverse, bool return_counts) {
  Tensor flat = self.reshape({-1});
  auto [sorted, perm] = sortAlong(flat, 0, false);
  const int64_t n = flat.numel();
  auto opts = self.options().dtype(at::kLong);
  if (n == 0) {
    return {at::empty({0}, self.options()), at::empty(self.sizes(), opts), at::empty({0}, opts)};
  }
  // First element of each run of equal values.
  Tensor first = at::cat(
      {at::ones({1}, self.options().dtype(at::kBool)), at::ne(sorted.narrow(0, 1, n - 1), sorted.narrow(0, 0, n - 1))});
  Tensor values = at::masked_select(sorted, first);
  Tensor inverse, counts;
  if (return_inverse) {
    Tensor group = at::sub(at::cumsum(first, 0, at::kLong), 1);  // group of each sorted element
    inverse = at::empty({n}, opts);
    inverse.scatter_(0, perm, group);
    inverse = inverse.view(self.sizes());
  } else {
    inverse = at::empty({0}, opts);
  }
  if (return_counts) {
    Tensor starts = at::nonzero(first).reshape({-1});
    counts = at::diff(at::cat({starts, at::full({1}, n, opts)}));
  } else {
    counts = at::empty({0}, opts);
  }
  return {values, inverse, counts};
}

std::tuple<Tensor, Tensor> unique1(const Tensor& self, bool sorted, bool return_inverse) {
  auto [values, inverse, counts] = unique2(self, sorted, return_inverse, false);
  return {values, inverse};
}

// unique over slices along dim: slices ordered lexicographically by one stable sort per column (last
// column first, radix-style), then the first slice of each run of equal slices.
//
// Note [unique(dim) over NaN]
// ATen's CPU kernel orders the slices with std::sort under a lexicographic `<` in which NaN compares false both
// ways, so a slice holding NaN has no defined place and the answer is whatever that sort algorithm leaves (NaN slices are never merged: NaN != NaN). No rule reproduces that order short of running the
// same sort, so a floating input with a NaN takes the CPU's kernel (counted as a fallback); the check costs one
// reduction and a read, as the run boundaries below already do.
std::tuple<Tensor, Tensor, Tensor> uniqueDim(const Tensor& self, int64_t dim, bool is_sorted, bool return_inverse,
                                             bool return_counts) {
  dim = at::maybe_wrap_dim(dim, self.dim());
  if (at::isFloatingType(self.scalar_type()) && self.numel() > 0 && self.isnan().any().item<bool>())
    return Fallback<at::_ops::unique_dim>::call(self, dim, is_sorted, return_inverse, return_counts);
  const int64_t n = self.size(dim);
  auto opts = self.options().dtype(at::kLong);
  if (n == 0) return {self.clone(), at::empty({0}, opts), at::empty({0}, opts)};
  const int64_t m = n ? self.numel() / n : 0;
  Tensor rows = self.movedim(dim, 0).reshape({n, m});
  Tensor perm = at::arange(n, opts);
  for (int64_t c = m - 1; c >= 0; --c) {
    Tensor col = rows.select(1, c).index_select(0, perm);
    auto [unused, order] = sortAlong(col, 0, false);   // stable: keeps the order of the later columns
    perm = perm.index_select(0, order);
  }
  Tensor sorted = rows.index_select(0, perm);
  Tensor first = at::cat({at::ones({1}, self.options().dtype(at::kBool)),
                          n > 1 ? at::ne(sorted.narrow(0, 1, n - 1), sorted.narrow(0, 0, n - 1)).any(1)
                                : at::empty({0}, self.options().dtype(at::kBool))});
  Tensor starts = at::nonzero(first).reshape({-1});
  std::vector<int64_t> shape = self.movedim(dim, 0).sizes().vec();
  shape[0] = starts.numel();
  Tensor values = sorted.index_select(0, starts).reshape(shape).movedim(0, dim);
  Tensor inverse = at::empty({0}, opts), counts = at::empty({0}, opts);
  if (return_inverse) {
    inverse = at::empty({n}, opts);
    inverse.scatter_(0, perm, at::sub(at::cumsum(first, 0, at::kLong), 1));
  }
  if (return_counts) counts = at::diff(at::cat({starts, at::full({1}, n, opts)}));
  return {values, inverse, counts};
}

// searchsorted / bucketize (sort.h): ATen's checks (torch.searchsorted's pre-check; the sorter's range costs a
// synchronisation there too), both sides in their common dtype, a binary search per value.
void checkSearch(const Tensor& boundaries, const Tensor& input, const Tensor& out, bool out_int32, bool right,
                 std::optional<c10::string_view> side, const Tensor& sorter) {
  if (side.has_value()) {
    TORCH_CHECK(*side == "left" || *side == "right", "torch.searchsorted(): side can only be 'left' or 'right' but ",
                "got ", *side);
    TORCH_CHECK(!right || *side == "right", "torch.searchsorted(): side and right can't be set to opposites, got side ",
                "of ", *side, " while right was True");
  }
  if (sorter.defined()) {
    TORCH_CHECK(sorter.sizes() == boundaries.sizes(), "torch.searchsorted(): boundary and sorter must have the same ",
                "size, but got boundary tensor ", boundaries.sizes(), "and got sorter tensor ", sorter.sizes());
    TORCH_CHECK(sorter.scalar_type() == at::kLong, "torch.searchsorted(): sorter must be a tensor of long ",
                "dtype but got dtype ", sorter.scalar_type());
    if (sorter.numel() > 0) {
      auto [lo, hi] = at::aminmax(sorter);
      TORCH_CHECK(lo.item<int64_t>() >= 0 && hi.item<int64_t>() < sorter.sizes().back(),
                  "torch.searchsorted(): sorter index out of range");
    }
  }
  TORCH_CHECK(input.dim() > 0 || (input.numel() == 1 && boundaries.dim() == 1),
              "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1, but we ",
              "got boundaries tensor dim(", boundaries.dim(), ") and input value's dim(", input.dim(), ") numel(",
              input.numel(), ")");
  TORCH_CHECK(boundaries.dim() != 0, "torch.searchsorted(): boundaries tensor should have positive dimension, but ",
              "got 0 dimension");
  TORCH_CHECK(boundaries.dim() == 1 ||
                  (boundaries.dim() == input.dim() &&
                   boundaries.sizes().slice(0, boundaries.dim() - 1) == input.sizes().slice(0, input.dim() - 1)),
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
              "tensor and input value tensor must match, but we got boundaries tensor ",
              boundaries.sizes(), " and input value tensor ", input.sizes());
  const auto od = out.scalar_type();
  TORCH_CHECK(
      (od == at::kLong && !out_int32) || (od == at::kInt && out_int32),
      "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) or Long(int64) depending ",
      "on whether out_int32 flag is True, but we got output tensor's dtype ", od, " and out_int32 flag is ",
      out_int32 ? "True" : "False");
}

Tensor& searchsortedOut(const Tensor& boundaries, const Tensor& self, bool out_int32, bool right,
                        std::optional<c10::string_view> side, const std::optional<Tensor>& sorter_opt, Tensor& out) {
  const Tensor sorter = sorter_opt.has_value() ? *sorter_opt : Tensor();
  if (boundaries.is_complex() || self.is_complex())
    return Fallback<at::_ops::searchsorted_Tensor_out>::call(boundaries, self, out_int32, right, side, sorter_opt, out);
  checkSearch(boundaries, self, out, out_int32, right, side, sorter);
  at::native::resize_output(out, self.sizes());
  if (self.numel() == 0) return out;
  const auto common = at::result_type(boundaries, self);
  TORCH_CHECK(toKernelDType(common) != DType::Other && common != at::kBool, "torch.searchsorted(): unsupported dtype ",
              common);
  Tensor values = self.to(common).contiguous(), bd = boundaries.to(common).contiguous();
  Tensor order = sorter.defined() ? sorter.contiguous() : Tensor();
  Tensor result = out.is_contiguous() ? out : at::empty(self.sizes(), out.options());
  SearchArgs a;
  a.dtype = toKernelDType(common);
  a.values = values.const_data_ptr();
  a.n = values.numel();
  a.inner = self.dim() == 0 ? 1 : self.size(-1);
  a.boundaries = bd.const_data_ptr();
  a.bd_len = boundaries.size(-1);
  a.one_row = boundaries.dim() == 1;
  a.sorter = order.defined() ? order.const_data_ptr<int64_t>() : nullptr;
  a.right = side.has_value() ? *side == "right" : right;
  a.out_int32 = out_int32;
  a.out = result.data_ptr();
  {
    c10::DeviceGuard guard(self.device());
    MT_RT_CHECK(kernels::searchsorted(a, streamFor(self)));
  }
  if (!result.is_same(out)) out.copy_(result);
  return out;
}

Tensor searchsortedFn(const Tensor& boundaries, const Tensor& self, bool out_int32, bool right,
                      std::optional<c10::string_view> side, const std::optional<Tensor>& sorter) {
  Tensor out = at::empty({0}, self.options().dtype(out_int32 ? at::kInt : at::kLong));
  return searchsortedOut(boundaries, self, out_int32, right, side, sorter, out);
}

Tensor& searchsortedScalarOut(const Tensor& boundaries, const at::Scalar& self, bool out_int32, bool right,
                              std::optional<c10::string_view> side, const std::optional<Tensor>& sorter, Tensor& out) {
  return searchsortedOut(boundaries, at::scalar_to_tensor(self, boundaries.device()), out_int32, right, side, sorter,
                         out);
}

Tensor searchsortedScalar(const Tensor& boundaries, const at::Scalar& self, bool out_int32, bool right,
                          std::optional<c10::string_view> side, const std::optional<Tensor>& sorter) {
  return searchsortedFn(boundaries, at::scalar_to_tensor(self, boundaries.device()), out_int32, right, side, sorter);
}

Tensor& bucketizeOut(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right, Tensor& out) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return searchsortedOut(boundaries, self, out_int32, right, std::nullopt, std::nullopt, out);
}

Tensor bucketizeFn(const Tensor& self, const Tensor& boundaries, bool out_int32, bool right) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return searchsortedFn(boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}

Tensor bucketizeScalar(const at::Scalar& self, const Tensor& boundaries, bool out_int32, bool right) {
  return bucketizeFn(at::scalar_to_tensor(self, boundaries.device()), boundaries, out_int32, right);
}

Tensor& bucketizeScalarOut(const at::Scalar& self, const Tensor& boundaries, bool out_int32, bool right, Tensor& out) {
  return bucketizeOut(at::scalar_to_tensor(self, boundaries.device()), boundaries, out_int32, right, out);
}

Tensor multinomial(const Tensor& self, int64_t num_samples, bool replacement, std::optional<at::Generator> gen) {
  TORCH_CHECK(self.dim() == 1 || self.dim() == 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(num_samples > 0, "cannot sample n_sample <= 0 samples");
  const int64_t cats = self.size(-1);
  TORCH_CHECK(cats <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");  // as CPU and CUDA
  TORCH_CHECK(replacement || num_samples <= cats,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  Tensor p = self.dim() == 1 ? self.unsqueeze(0) : self;
  Tensor pf = p.to(at::kFloat);
  const bool valid = at::all(at::logical_and(at::ge(pf, 0), at::isfinite(pf))).item().toBool();
  TORCH_CHECK(valid, "probability tensor contains either `inf`, `nan` or element < 0");
  Tensor total = at::sum(pf, -1, true);
  TORCH_CHECK(at::all(at::gt(total, 0)).item().toBool(),
              "invalid multinomial distribution (sum of probabilities <= 0)");
  Tensor result;
  if (replacement && num_samples > 1) {
    Tensor cdf = at::div(at::cumsum(pf, -1), total);
    Tensor u = at::empty({p.size(0), num_samples}, pf.options()).uniform_(0, 1, gen);
    result = at::clamp_max(at::sum(at::lt(cdf.unsqueeze(-2), u.unsqueeze(-1)), -1), cats - 1);
  } else {
    // Exponential race (Gumbel top-k), as ATen: the k largest log(u) / p are a sample without replacement, and one
    // draw (with or without replacement) is their argmax: a reduction, never a sort (Note [CUDA radix sort and
    // select] for k > 1).
    Tensor u = at::empty(pf.sizes(), pf.options()).uniform_(0, 1, gen);
    Tensor keys = at::div(at::log(u), pf);
    result = num_samples == 1 ? at::argmax(keys, -1, true) : std::get<1>(sortAlong(keys, -1, true, num_samples));
  }
  result = result.contiguous();
  return self.dim() == 1 ? result.squeeze(0) : result;
}

Tensor nativeDropoutBackward(const Tensor& grad, const Tensor& mask, double scale) {
  return at::mul(at::mul(grad, mask), scale);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "sort.values_stable", sortOut);
  MT_IMPL(m, "topk.values", topkOut);
  MT_IMPL(m, "_unique2", unique2);
  MT_IMPL(m, "searchsorted.Tensor", searchsortedFn);
  MT_IMPL(m, "searchsorted.Tensor_out", searchsortedOut);
  MT_IMPL(m, "searchsorted.Scalar", searchsortedScalar);
  MT_IMPL(m, "searchsorted.Scalar_out", searchsortedScalarOut);
  MT_IMPL(m, "bucketize.Tensor", bucketizeFn);
  MT_IMPL(m, "bucketize.Tensor_out", bucketizeOut);
  MT_IMPL(m, "bucketize.Scalar", bucketizeScalar);
  MT_IMPL(m, "bucketize.Scalar_out", bucketizeScalarOut);
  MT_IMPL(m, "isin.Tensor_Tensor", isinTT);
  MT_IMPL(m, "isin.Tensor_Tensor_out", isinOut);
  MT_IMPL(m, "isin.Tensor_Scalar", isinTS);
  MT_IMPL(m, "isin.Tensor_Scalar_out", isinTSOut);
  MT_IMPL(m, "isin.Scalar_Tensor", isinST);
  MT_IMPL(m, "isin.Scalar_Tensor_out", isinSTOut);
  MT_IMPL(m, "_unique", unique1);
  MT_IMPL(m, "unique_dim", uniqueDim);
  MT_IMPL(m, "multinomial", multinomial);
  MT_IMPL(m, "native_dropout_backward", nativeDropoutBackward);
}

} // namespace mytorch
