// Op table: grid_sampler_2d / grid_sampler_3d and their backwards (F.grid_sample, F.affine_grid's consumer) on the
// grid sampler family (kernels: mytorch/grid_sample.h, Note [Grid sampler]), with ATen's argument checks. Inputs and
// grids are made contiguous; the results are contiguous, as ATen's. The input gradient accumulates in the opmath
// type and is rounded to the input's dtype once.
#include <ATen/core/Tensor.h>
#include <ATen/native/GridSamplerUtils.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/grid_sampler_2d_backward_ops.h>
#include <ATen/ops/grid_sampler_2d_ops.h>
#include <ATen/ops/grid_sampler_3d_backward_ops.h>
#include <ATen/ops/grid_sampler_3d_ops.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Checked.h"
#include "csrc/core/Runtime.h"
#include "mytorch/grid_sample.h"

namespace mytorch {
namespace {

using at::Tensor;

// ATen's checks for a `dims`-D sampler, then the arguments for contiguous `x` and `g` (kept alive by the caller).
GridSampleArgs setup(const Tensor& input, const Tensor& grid, int64_t mode, int64_t padding, bool align, int dims) {
  at::native::check_grid_sampler_common(input, grid);
  if (dims == 2) at::native::check_grid_sampler_2d(input, grid);
  else at::native::check_grid_sampler_3d(input, grid, mode);
  TORCH_CHECK(mode >= 0 && mode <= 2, "grid_sampler(): expected interpolation_mode 0 (bilinear), 1 (nearest) or ",
              "2 (bicubic), but got ", mode);
  TORCH_CHECK(padding >= 0 && padding <= 2, "grid_sampler(): expected padding_mode 0 (zeros), 1 (border) or ",
              "2 (reflection), but got ", padding);
  TORCH_CHECK(grid.scalar_type() == input.scalar_type(), "grid_sampler(): expected grid of the input's dtype ",
              input.scalar_type(), ", but got ", grid.scalar_type());
  GridSampleArgs a;
  a.dtype = toKernelDType(input.scalar_type());
  a.dims = dims;
  a.interp = static_cast<GridInterp>(mode);
  a.padding = static_cast<GridPadding>(padding);
  a.align_corners = align;
  a.n = input.size(0);
  a.c = input.size(1);
  a.iw = input.size(-1);
  a.ih = input.size(-2);
  a.id = dims == 3 ? input.size(-3) : 1;
  a.ow = grid.size(-2);
  a.oh = grid.size(-3);
  a.od = dims == 3 ? grid.size(-4) : 1;
  return a;
}

std::vector<int64_t> outShape(const GridSampleArgs& a) {
  if (a.dims == 2) return {a.n, a.c, a.oh, a.ow};
  return {a.n, a.c, a.od, a.oh, a.ow};
}

void launch(const GridSampleArgs& a, const Tensor& like) {
  c10::DeviceGuard guard(like.device());
  MT_RT_CHECK(kernels::grid_sample(a, streamFor(like)));
}

Tensor forward(const Tensor& input, const Tensor& grid, int64_t mode, int64_t padding, bool align, int dims) {
  GridSampleArgs a = setup(input, grid, mode, padding, align, dims);
  Tensor x = input.contiguous(), g = grid.contiguous();
  Tensor out = at::empty(outShape(a), x.options());
  a.input = x.data_ptr();
  a.grid = g.data_ptr();
  a.out = out.data_ptr();
  launch(a, x);
  return out;
}

// ATen's contract: the input's gradient only when output_mask[0] (else undefined), the grid's always.
std::tuple<Tensor, Tensor> backward(const Tensor& grad_output, const Tensor& input, const Tensor& grid, int64_t mode,
                                    int64_t padding, bool align, std::array<bool, 2> output_mask, int dims) {
  GridSampleArgs a = setup(input, grid, mode, padding, align, dims);
  a.backward = true;
  TORCH_CHECK(grad_output.sizes() == at::IntArrayRef(outShape(a)), "grid_sampler_", dims,
              "d_backward: expected grad_output of shape ", at::IntArrayRef(outShape(a)), ", but got ",
              grad_output.sizes());
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(), "grid_sampler_", dims,
              "d_backward: expected grad_output of the input's dtype ", input.scalar_type(), ", but got ",
              grad_output.scalar_type());
  Tensor x = input.contiguous(), g = grid.contiguous(), go = grad_output.contiguous();
  Tensor acc = output_mask[0] ? at::zeros(x.sizes(), x.options().dtype(opmathType(x.scalar_type()))) : Tensor();
  Tensor grad_grid = at::empty(g.sizes(), g.options());
  a.input = x.data_ptr();
  a.grid = g.data_ptr();
  a.grad_out = go.data_ptr();
  a.grad_input = dataOrNull(acc);
  a.grad_grid = grad_grid.data_ptr();
  launch(a, x);
  Tensor grad_input = acc.defined() && acc.scalar_type() != x.scalar_type() ? acc.to(x.scalar_type()) : acc;
  return {grad_input, grad_grid};
}

// Dtypes the kernels lack (the CPU refuses them too) go to the CPU, for its message.
Tensor sampler2d(const Tensor& input, const Tensor& grid, int64_t mode, int64_t padding, bool align) {
  if (!kernelFloating(input.scalar_type()))
    return Fallback<at::_ops::grid_sampler_2d>::call(input, grid, mode, padding, align);
  return forward(input, grid, mode, padding, align, 2);
}
Tensor sampler3d(const Tensor& input, const Tensor& grid, int64_t mode, int64_t padding, bool align) {
  if (!kernelFloating(input.scalar_type()))
    return Fallback<at::_ops::grid_sampler_3d>::call(input, grid, mode, padding, align);
  return forward(input, grid, mode, padding, align, 3);
}
std::tuple<Tensor, Tensor> sampler2dBackward(const Tensor& grad_output, const Tensor& input, const Tensor& grid,
                                             int64_t mode, int64_t padding, bool align, std::array<bool, 2> mask) {
  if (!kernelFloating(input.scalar_type()))
    return Fallback<at::_ops::grid_sampler_2d_backward>::call(grad_output, input, grid, mode, padding, align, mask);
  return backward(grad_output, input, grid, mode, padding, align, mask, 2);
}
std::tuple<Tensor, Tensor> sampler3dBackward(const Tensor& grad_output, const Tensor& input, const Tensor& grid,
                                             int64_t mode, int64_t padding, bool align, std::array<bool, 2> mask) {
  if (!kernelFloating(input.scalar_type()))
    return Fallback<at::_ops::grid_sampler_3d_backward>::call(grad_output, input, grid, mode, padding, align, mask);
  return backward(grad_output, input, grid, mode, padding, align, mask, 3);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "grid_sampler_2d", sampler2d);
  MT_IMPL(m, "grid_sampler_2d_backward", sampler2dBackward);
  MT_IMPL(m, "grid_sampler_3d", sampler3d);
  MT_IMPL(m, "grid_sampler_3d_backward", sampler3dBackward);
}

} // namespace mytorch
