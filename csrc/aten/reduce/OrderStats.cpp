// Op table: order statistics along a dimension (median, nanmedian, kthvalue, mode) and uniqueConsecutive, read
// off the native stable sort (Note [Order statistics from the sort]).
//
// Note [Order statistics from the sort]
// ATen's CPU kernels select with std::nth_element and its CUDA kernels sort; mytorch sorts each slice once with
// its native stable sort (NaN last, as ATen orders it) and gathers the selected position (slices of up to
// kRankSelectMax elements take one ranking kernel to the same element instead: Note [Selection in short slices]):
//  - median: the lower median, position (n - 1) / 2; a slice holding NaN answers its first NaN, which the stable
//    sort puts at position n - (number of NaNs);
//  - nanmedian: the lower median of the slice's non-NaN values, position (valid - 1) / 2 (position 0, a NaN,
//    when all are NaN);
//  - kthvalue: position k - 1 (for a small k, the k-th of the ascending top-k: the same pair, without the sort);
//  - mode: the first (so smallest) value of the longest run of equal sorted values, and the last index in that
//    run (ATen's CPU sorts (value, index) pairs and keeps the run's last), found by scans: the run's start at each
//    position is a running maximum, a run's length is read at its end, and the first maximal length is an argmax.
// An index among equal values is implementation-defined in ATen (documented for median and kthvalue); the stable
// sort makes mytorch's deterministic. Every step runs on native kernels, none copies to the host.
#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/argmax.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cummax.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/diff.h>
#include <ATen/ops/div.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/kthvalue_ops.h>
#include <ATen/ops/masked_select.h>
#include <ATen/ops/median_ops.h>
#include <ATen/ops/mode_ops.h>
#include <ATen/ops/nanmedian_ops.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/unique_consecutive_ops.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "mytorch/sort.h"

namespace mytorch {
namespace {

using at::Tensor;

enum class Select { Median, NanMedian, Kth, Mode };

const char* opName(Select s) {
  switch (s) {
    case Select::Median: return "median()";
    case Select::NanMedian: return "nanmedian()";
    case Select::Kth: return "kthvalue()";
    case Select::Mode: return "mode()";
  }
  return "";
}

bool sortable(const Tensor& self) { return !self.is_complex() && toKernelDType(self.scalar_type()) != DType::Other; }

// Positions 0..n-1 along dim d of a tensor of `ndim` dimensions, shaped to broadcast against it.
Tensor positionsAlong(int64_t n, int64_t d, int64_t ndim, const Tensor& like) {
  std::vector<int64_t> shape(ndim, 1);
  shape[d] = n;
  return at::arange(n, like.options().dtype(at::kLong)).view(shape);
}

// The mode's position in each sorted slice (keepdim shape): the first maximal run, read at the run's end.
Tensor modePosition(const Tensor& sorted, int64_t d) {
  const int64_t n = sorted.size(d);
  Tensor boundary = at::ne(sorted.narrow(d, 1, n - 1), sorted.narrow(d, 0, n - 1));  // a new run starts at i+1
  std::vector<int64_t> one_shape = sorted.sizes().vec();
  one_shape[d] = 1;
  Tensor yes = at::ones(one_shape, sorted.options().dtype(at::kBool));
  Tensor starts = at::cat({yes, boundary}, d), ends = at::cat({boundary, yes}, d);
  Tensor pos = positionsAlong(n, d, sorted.dim(), sorted).expand(sorted.sizes());
  Tensor run_start = std::get<0>(at::cummax(at::where(starts, pos, 0), d));
  Tensor length_at_end = at::where(ends, at::add(at::sub(pos, run_start), 1), 0);
  return at::argmax(length_at_end, d, /*keepdim=*/true);
}

// median, nanmedian or kthvalue along dim d of at most kRankSelectMax elements: one kernel (Note [Selection in short
// slices]).
std::tuple<Tensor, Tensor> rankSelect(const Tensor& self, int64_t d, bool keepdim, Select what, int64_t k) {
  const Tensor rows = (d == self.dim() - 1 ? self : self.movedim(d, -1)).contiguous();
  std::vector<int64_t> shape = self.sizes().vec();
  shape.erase(shape.begin() + d);
  Tensor values = at::empty(shape, self.options()), indices = at::empty(shape, self.options().dtype(at::kLong));
  RankSelectArgs a;
  a.dtype = toKernelDType(self.scalar_type());
  a.in = rows.const_data_ptr();
  a.slices = values.numel();
  a.length = self.size(d);
  a.what = what == Select::Median      ? RankSelect::Median
           : what == Select::NanMedian ? RankSelect::NanMedian
                                       : RankSelect::Kth;
  a.k = k;
  a.values = values.data_ptr();
  a.indices = indices.data_ptr<int64_t>();
  c10::DeviceGuard guard(self.device());
  MT_RT_CHECK(kernels::rank_select(a, streamFor(self)));
  return keepdim ? std::make_tuple(values.unsqueeze(d), indices.unsqueeze(d)) : std::make_tuple(values, indices);
}

// (values, indices) of the selection along dim, with ATen's checks; the outputs are fresh tensors.
std::tuple<Tensor, Tensor> selectAlong(const Tensor& self, int64_t dim, bool keepdim, Select what, int64_t k = 0) {
  const int64_t d = at::maybe_wrap_dim(dim, self.dim());
  if (self.dim() == 0) {
    TORCH_CHECK(what != Select::Kth || k == 1, "kthvalue(): selected number k out of range for dimension ", d);
    return {self.clone(), at::zeros({}, self.options().dtype(at::kLong))};
  }
  const int64_t n = self.size(d);
  TORCH_CHECK_INDEX(n > 0, opName(what), ": Expected reduction dim ", d, " to have non-zero size.");
  TORCH_CHECK(what != Select::Kth || (k >= 1 && k <= std::max<int64_t>(n, 1)),
              "kthvalue(): selected number k out "
              "of range for dimension ",
              d);
  std::vector<int64_t> out_shape = self.sizes().vec();
  out_shape[d] = 1;
  if (self.numel() == 0) {
    Tensor v = at::empty(out_shape, self.options()), i = at::empty(out_shape, self.options().dtype(at::kLong));
    return keepdim ? std::make_tuple(v, i) : std::make_tuple(v.squeeze(d), i.squeeze(d));
  }
  // the top-k below for a small k (long slices: k <= 8 or n / 32; short ones: k <= n / 16), other selections in
  // short slices rank. kthvalue over 4096 slices, torch CPU time / mytorch time: the heap 1.8-2.0x at k = 2 of 60-64
  // and 0.95-1.27x at k = 2 of 32, but 0.23-0.71x at k = 4-8 of 16-64, where the ranking gives 0.37-0.95x.
  const bool small_k = what == Select::Kth && self.scalar_type() != at::kBool &&
                       (n > kRankSelectMax ? (k <= 8 || k * 32 <= n) : k * 16 <= n);
  if (what != Select::Mode && !small_k && n <= kRankSelectMax) return rankSelect(self, d, keepdim, what, k);
  if (small_k) {
    // a small k: the k first pairs of the ascending top-k are the stable sort's first k (the sort engine's order is
    // a total order on (value, index): Note [Sim sort and top-k]), kept by a heap of k instead of sorting every
    // slice (kthvalue(2) over slices of 60 at 0.34x the CPU's selection, and faster than the ranking there).
    auto [tv, ti] = at::topk(self, k, d, /*largest=*/false, /*sorted=*/true);
    Tensor v = tv.narrow(d, k - 1, 1), i = ti.narrow(d, k - 1, 1);
    return keepdim ? std::make_tuple(v, i) : std::make_tuple(v.squeeze(d), i.squeeze(d));
  }
  auto [sorted, order] = at::sort(self, /*stable=*/true, d, /*descending=*/false);
  Tensor pos;
  if (what == Select::Mode) {
    pos = n == 1 ? at::zeros(out_shape, self.options().dtype(at::kLong)) : modePosition(sorted, d);
  } else if (what == Select::Kth) {
    pos = at::full(out_shape, k - 1, self.options().dtype(at::kLong));
  } else if (!at::isFloatingType(self.scalar_type())) {
    pos = at::full(out_shape, (n - 1) / 2, self.options().dtype(at::kLong));
  } else {
    Tensor nans = at::sum(at::isnan(self), d, /*keepdim=*/true);  // int64
    if (what == Select::Median) {
      pos = at::where(at::gt(nans, 0), at::sub(at::full({}, n, nans.options()), nans), (n - 1) / 2);
    } else {
      Tensor valid = at::sub(at::full({}, n, nans.options()), nans);
      pos = at::div(at::sub(valid, 1).clamp_min(0), 2, "floor");
    }
  }
  Tensor values = at::gather(sorted, d, pos), indices = at::gather(order, d, pos);
  if (!keepdim) return {values.squeeze(d), indices.squeeze(d)};
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> assignPair(std::tuple<Tensor, Tensor> result, const Tensor& self, Tensor& values,
                                        Tensor& indices) {
  checkOutDtype(values, self.scalar_type());
  checkOutDtype(indices, at::kLong);
  at::native::resize_output(values, std::get<0>(result).sizes());
  at::native::resize_output(indices, std::get<1>(result).sizes());
  values.copy_(std::get<0>(result));
  indices.copy_(std::get<1>(result));
  return {values, indices};
}

std::tuple<Tensor&, Tensor&> medianDimOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,
                                          Tensor& indices) {
  if (!sortable(self)) return Fallback<at::_ops::median_dim_values>::call(self, dim, keepdim, values, indices);
  return assignPair(selectAlong(self, dim, keepdim, Select::Median), self, values, indices);
}

std::tuple<Tensor&, Tensor&> nanmedianDimOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values,
                                             Tensor& indices) {
  if (!sortable(self)) return Fallback<at::_ops::nanmedian_dim_values>::call(self, dim, keepdim, values, indices);
  return assignPair(selectAlong(self, dim, keepdim, Select::NanMedian), self, values, indices);
}

// median() / nanmedian() of all elements: the dim form over the flattened tensor (an empty one gives NaN).
Tensor medianAll(const Tensor& self) {
  if (!sortable(self) || self.numel() == 0) return Fallback<at::_ops::median>::call(self);
  return std::get<0>(selectAlong(self.reshape({-1}), 0, false, Select::Median));
}

Tensor nanmedianAll(const Tensor& self) {
  if (!sortable(self) || self.numel() == 0) return Fallback<at::_ops::nanmedian>::call(self);
  return std::get<0>(selectAlong(self.reshape({-1}), 0, false, Select::NanMedian));
}

std::tuple<Tensor&, Tensor&> kthvalueOut(const Tensor& self, int64_t k, int64_t dim, bool keepdim, Tensor& values,
                                         Tensor& indices) {
  if (!sortable(self)) return Fallback<at::_ops::kthvalue_values>::call(self, k, dim, keepdim, values, indices);
  at::assert_no_overlap(self, values);  // as ATen's kthvalue, which refuses an out= that is the input
  at::assert_no_overlap(self, indices);
  return assignPair(selectAlong(self, dim, keepdim, Select::Kth, k), self, values, indices);
}

std::tuple<Tensor&, Tensor&> modeOut(const Tensor& self, int64_t dim, bool keepdim, Tensor& values, Tensor& indices) {
  if (!sortable(self)) return Fallback<at::_ops::mode_values>::call(self, dim, keepdim, values, indices);
  return assignPair(selectAlong(self, dim, keepdim, Select::Mode), self, values, indices);
}

std::tuple<Tensor, Tensor> mode(const Tensor& self, int64_t dim, bool keepdim) {
  if (!sortable(self)) return Fallback<at::_ops::mode>::call(self, dim, keepdim);
  return selectAlong(self, dim, keepdim, Select::Mode);
}

// uniqueConsecutive: a run starts where a slice differs from the one before it; outputs, inverse and counts
// follow from the starts by a selection, a scan and a difference.
std::tuple<Tensor, Tensor, Tensor> uniqueConsecutive(const Tensor& self, bool return_inverse, bool return_counts,
                                                     std::optional<int64_t> dim) {
  if (!sortable(self) || (dim.has_value() && self.dim() == 0))
    return Fallback<at::_ops::unique_consecutive>::call(self, return_inverse, return_counts, dim);
  const auto long_opts = self.options().dtype(at::kLong);
  if (self.numel() == 0) {
    Tensor none = at::empty({0}, long_opts);
    if (!dim.has_value())
      return {at::empty({0}, self.options()), return_inverse ? at::empty(self.sizes(), long_opts) : none, none};
    const int64_t d = at::maybe_wrap_dim(*dim, self.dim());
    for (int64_t i = 0; i < self.dim(); ++i)
      TORCH_CHECK(i == d || self.size(i) != 0,
                  "There are 0 sized dimensions, and they aren't selected, so unique cannot be applied");
    return {self.clone(), none, none};
  }
  Tensor rows;  // one row per element (dim=None) or per slice along dim
  int64_t d = 0;
  if (dim.has_value()) {
    d = at::maybe_wrap_dim(*dim, self.dim());
    rows = self.movedim(d, 0).reshape({self.size(d), -1});
  } else {
    rows = self.reshape({-1, 1});
  }
  const int64_t n = rows.size(0);
  Tensor starts = at::ones({n}, long_opts.dtype(at::kBool));
  if (n > 1) {
    Tensor differs = at::ne(rows.narrow(0, 1, n - 1), rows.narrow(0, 0, n - 1));
    starts.narrow(0, 1, n - 1).copy_(rows.size(1) == 1 ? differs.squeeze(1) : differs.any(1));
  }
  Tensor first = at::nonzero(starts).squeeze(1);
  Tensor output = dim.has_value() ? at::index_select(self, d, first) : at::index_select(self.reshape({-1}), 0, first);
  Tensor inverse = at::empty({0}, long_opts), counts = at::empty({0}, long_opts);
  if (return_inverse) {
    inverse = at::sub(at::cumsum(starts, 0), 1);
    if (!dim.has_value()) inverse = inverse.view(self.sizes());
  }
  if (return_counts) counts = at::diff(first, 1, 0, std::nullopt, at::full({1}, n, long_opts));
  return {output, inverse, counts};
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "median", medianAll);
  MT_IMPL(m, "median.dim_values", medianDimOut);
  MT_IMPL(m, "nanmedian", nanmedianAll);
  MT_IMPL(m, "nanmedian.dim_values", nanmedianDimOut);
  MT_IMPL(m, "kthvalue.values", kthvalueOut);
  MT_IMPL(m, "mode", mode);
  MT_IMPL(m, "mode.values", modeOut);
  MT_IMPL(m, "unique_consecutive", uniqueConsecutive);
}

} // namespace mytorch
