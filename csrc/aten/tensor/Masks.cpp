// Op table: nonzero, masked_select and masked_scatter_, composed of native kernels (a comparison, a running count
// and the index engine's writes; Note [Composed ops]).
#include <ATen/ExpandUtils.h>
#include <ATen/core/List.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/take.h>
#include <ATen/ops/where.h>
#include <torch/library.h>

#include <vector>

#include "csrc/core/Checked.h"

namespace mytorch {
namespace {

using at::Tensor;

// dst[positions] = values through index_put_ (the index engine's scatter).
void writeAt(Tensor& dst, const Tensor& positions, const Tensor& values) {
  c10::List<std::optional<Tensor>> idx;
  idx.push_back(positions);
  at::index_put_(dst, idx, values);
}

// Linear positions (row-major) of the non-zero elements: a running count gives each non-zero element its slot,
// and an index write puts its position there.
Tensor flatNonzero(const Tensor& self) {
  Tensor flags = at::ne(self.reshape({-1}), 0);
  const int64_t n = flags.numel();
  if (n == 0) return at::empty({0}, self.options().dtype(at::kLong));
  Tensor pos = at::cumsum(flags, 0, at::kLong);
  const int64_t count = pos[n - 1].item<int64_t>();
  Tensor slots = at::where(flags, at::sub(pos, 1), count);  // zeros go to a spare slot at the end
  Tensor out = at::empty({count + 1}, self.options().dtype(at::kLong));
  writeAt(out, slots, at::arange(n, self.options().dtype(at::kLong)));
  return out.narrow(0, 0, count);
}

Tensor& nonzeroOut(const Tensor& self, Tensor& out) {
  TORCH_CHECK(out.scalar_type() == at::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type", out.scalar_type());
  Tensor lin = flatNonzero(self);
  std::vector<Tensor> coords(static_cast<size_t>(self.dim()));
  Tensor rem = lin;
  for (int64_t d = self.dim() - 1; d >= 0; --d) {
    coords[static_cast<size_t>(d)] = rem.remainder(self.size(d));
    rem = rem.div(self.size(d), "floor");
  }
  Tensor result = self.dim() ? at::stack(coords, 1) : at::empty({lin.numel(), 0}, lin.options());
  at::native::resize_output(out, result.sizes());
  return out.copy_(result);
}

Tensor nonzeroFn(const Tensor& self) {
  Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return nonzeroOut(self, out);
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
