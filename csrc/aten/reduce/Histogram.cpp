// Op table: torch.histc and torch.bincount on mytorch (kernels: mytorch/histogram.h, Note [histc bins]). CUDA's semantics: integer
// inputs are counted too (Hugging Face's mixture-of-experts layers count tokens per expert with histc on int32);
// the output has the input's dtype; min == max takes the range from the data, widened by 1 when it is empty.
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/histogram.h"

namespace mytorch {
namespace {

using at::Tensor;

Tensor& histcOut(const Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max, Tensor& out) {
  TORCH_CHECK(bins > 0, "torch.histogram(): bins must be > 0, but got ", bins, " for dimension 0");
  const auto t = self.scalar_type();
  TORCH_CHECK(t != at::kBool && !c10::isComplexType(t) && toKernelDType(t) != DType::Other,
              "torch.histc: unsupported input dtype ", t);
  checkOutDtype(out, t);
  double lo = min.toDouble(), hi = max.toDouble();
  Tensor in = self.contiguous();
  if (lo == hi && in.numel() > 0) {
    lo = at::amin(in).item<double>();
    hi = at::amax(in).item<double>();
  }
  if (lo == hi) {
    lo -= 1;
    hi += 1;
  }
  TORCH_CHECK(!(std::isinf(lo) || std::isinf(hi) || std::isnan(lo) || std::isnan(hi)), "torch.histc: range of [", lo,
              ", ", hi, "] is not finite");
  TORCH_CHECK(lo < hi, "torch.histc: max must be larger than min");
  Tensor counts = at::zeros({bins}, self.options().dtype(at::kLong));
  HistcArgs a;
  a.dtype = toKernelDType(t);
  a.in = in.const_data_ptr();
  a.n = in.numel();
  a.bins = bins;
  a.lo = lo;
  a.hi = hi;
  a.counts = counts.data_ptr<int64_t>();
  if (a.n > 0) {
    c10::DeviceGuard guard(self.device());
    MT_RT_CHECK(kernels::histc(a, streamFor(self)));
  }
  at::native::resize_output(out, {bins});
  out.copy_(counts);
  return out;
}

Tensor histc(const Tensor& self, int64_t bins, const at::Scalar& min, const at::Scalar& max) {
  Tensor out = at::empty({0}, self.options());
  return histcOut(self, bins, min, max, out);
}

// bincount with ATen's rules: 1-D non-negative integers; int64 counts, or sums of the weights in float32 for
// float32 weights and float64 otherwise; max(max value + 1, minlength) bins (the max is read on the host, as
// CUDA does); an empty input gives minlength int64 zeros.
Tensor bincount(const Tensor& self, const std::optional<Tensor>& weights_opt, int64_t minlength) {
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1 && c10::isIntegralType(self.scalar_type(), /*includeBool=*/false),
              "bincount only supports 1-d non-negative integral inputs.");
  const bool weighted = weights_opt.has_value() && weights_opt->defined();
  if (weighted)
    TORCH_CHECK(weights_opt->dim() == 1 && weights_opt->size(0) == self.size(0),
                "weights should be 1-d and have the same length as input");
  if (self.numel() == 0) return at::zeros({minlength}, self.options().dtype(at::kLong));
  Tensor in = self.to(at::kLong).contiguous();
  TORCH_CHECK(at::amin(in).item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
  const int64_t bins = std::max(at::amax(in).item<int64_t>() + 1, minlength);
  BincountArgs a;
  a.in = in.const_data_ptr<int64_t>();
  a.n = in.numel();
  Tensor w, sums, counts;
  if (weighted) {
    w = weights_opt->to(self.device(), at::kDouble).contiguous();
    sums = at::zeros({bins}, self.options().dtype(at::kDouble));
    a.weights = w.const_data_ptr<double>();
    a.sums = sums.data_ptr<double>();
  } else {
    counts = at::zeros({bins}, self.options().dtype(at::kLong));
    a.counts = counts.data_ptr<int64_t>();
  }
  c10::DeviceGuard guard(self.device());
  MT_RT_CHECK(kernels::bincount(a, streamFor(self)));
  if (!weighted) return counts;
  return weights_opt->scalar_type() == at::kFloat ? sums.to(at::kFloat) : sums;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "bincount", bincount);
  MT_IMPL(m, "histc", histc);
  MT_IMPL(m, "histc.out", histcOut);
}

} // namespace mytorch
