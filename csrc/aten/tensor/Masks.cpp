// Op table: nonzero (the index family's nonzero_count and nonzero_write, Note [Nonzero by prefix sums]), and
// masked_select and masked_scatter_ composed of it and the index engine (Note [Composed ops]).
#include <ATen/ExpandUtils.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/any.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/take.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/index.h"

namespace mytorch {
namespace {

using at::Tensor;

// dst[positions] = values through index_put_ (the index engine's scatter).
void writeAt(Tensor& dst, const Tensor& positions, const Tensor& values) {
  c10::List<std::optional<Tensor>> idx;
  idx.push_back(positions);
  at::index_put_(dst, idx, values);
}

// The coordinates of self's non-zero elements, one row each in row-major order, stored by column (Note [Nonzero by
// prefix sums]); with flat, their linear positions (one column). A 0-d self is one element at position 0.
Tensor nonzeroRows(const Tensor& self, bool flat) {
  // Dtypes the kernels do not load: an unsigned integer is non-zero where its bits are (read as the signed type of
  // its size); complex32 where either half is non-zero; any other (float8) through `!= 0` as bools.
  Tensor x = self.contiguous();
  switch (self.scalar_type()) {
    case at::kUInt16: x = x.view(at::kShort); break;
    case at::kUInt32: x = x.view(at::kInt); break;
    case at::kUInt64: x = x.view(at::kLong); break;
    case at::kComplexHalf: x = at::view_as_real(x).ne(0).any(-1); break;
    default:
      if (toKernelDType(x.scalar_type()) == DType::Other) x = at::ne(x, 0).contiguous();
  }
  NonzeroArgs a;
  a.dtype = toKernelDType(x.scalar_type());
  a.in = x.const_data_ptr();
  a.n = x.numel();
  a.ndim = flat || x.dim() == 0 ? 1 : static_cast<int>(x.dim());
  TORCH_CHECK(a.ndim <= kMaxDims, "nonzero: at most ", kMaxDims, " dimensions are supported, got ", a.ndim);
  if (a.ndim == 1) a.sizes[0] = a.n;
  else
    for (int d = 0; d < a.ndim; ++d) a.sizes[d] = x.size(d);
  const auto longs = x.options().dtype(at::kLong);
  if (a.n == 0) return at::empty({a.ndim, 0}, longs).t();
  c10::DeviceGuard guard(x.device());
  const int64_t nb = nonzero_blocks(a.n);
  Tensor counts = at::empty({nb + 1}, longs);
  a.counts = counts.mutable_data_ptr<int64_t>();
  MT_RT_CHECK(kernels::nonzero_count(a, streamFor(x)));
  const int64_t total = counts[nb].item<int64_t>();
  Tensor out = at::empty({a.ndim, total}, longs).t();  // by column, as the CPU's and CUDA's
  a.out = out.mutable_data_ptr<int64_t>();
  if (total > 0) MT_RT_CHECK(kernels::nonzero_write(a, streamFor(x)));
  return out;
}

// Linear positions (row-major) of the non-zero elements.
Tensor flatNonzero(const Tensor& self) { return nonzeroRows(self, true).view({-1}); }

Tensor nonzeroFn(const Tensor& self) {
  Tensor rows = nonzeroRows(self, false);
  return self.dim() ? rows : at::empty({rows.size(0), 0}, rows.options());
}

Tensor& nonzeroOut(const Tensor& self, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type", out.scalar_type());
  Tensor result = nonzeroFn(self);
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

Tensor maskedSelect(const Tensor& self, const Tensor& mask) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_select: expected BoolTensor for mask");
  auto [s, m] = at::expand_outplace(self, mask);
  return at::take(s->contiguous(), flatNonzero(*m));
}

Tensor& maskedScatterInplace(Tensor& self, const Tensor& mask, const Tensor& source) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_scatter_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got ", self.scalar_type(), " and ",
              source.scalar_type());
  Tensor lin = flatNonzero(mask.expand(self.sizes()));
  TORCH_CHECK(lin.numel() <= source.numel(), "masked_scatter: expected source to have at least ", lin.numel(),
              " elements, but got ", source.numel());
  Tensor flat = self.is_contiguous() ? self.view({-1}) : self.contiguous().view({-1});
  writeAt(flat, lin, source.reshape({-1}).narrow(0, 0, lin.numel()));
  if (!self.is_contiguous()) self.copy_(flat.view(self.sizes()));
  return self;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "nonzero", nonzeroFn);
  MT_IMPL(m, "nonzero.out", nonzeroOut);
  MT_IMPL(m, "masked_select", maskedSelect);
  MT_IMPL(m, "masked_scatter_", maskedScatterInplace);
}

} // namespace mytorch
