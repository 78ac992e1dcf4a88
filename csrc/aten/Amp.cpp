// Op table: the ops torch.amp.GradScaler runs on the device, as native kernels.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/Glue.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/amp.h"

namespace mytorch {
namespace {

void checkScalarOnDevice(const at::Tensor& t, const char* what, at::ScalarType dtype, const at::Device& device) {
  TORCH_CHECK(t.numel() == 1, what, " must be a one-element tensor, but has ", t.numel(), " elements");
  TORCH_CHECK(t.scalar_type() == dtype, what, " must be ", dtype, ", but got ", t.scalar_type());
  TORCH_CHECK(t.device() == device, what, " must be on ", device, ", but is on ", t.device());
}

void wrapper_non_finite_check_and_unscale_(at::TensorList self, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  if (self.empty()) return;
  const at::Device device = found_inf.device();
  checkScalarOnDevice(found_inf, "found_inf", at::kFloat, device);
  checkScalarOnDevice(inv_scale, "inv_scale", at::kFloat, device);
  c10::DeviceGuard guard(device);
  const rt::Stream stream = nativeHandle(currentStream(device.index()));
  for (const at::Tensor& t : self) {
    TORCH_CHECK(t.device() == device, "all tensors must be on ", device, ", but one is on ", t.device());
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), "grads must be floating point, but one is ", t.scalar_type());
    if (t.numel() == 0) continue;
    // Dense tensors are one run of memory; others go through a dense copy.
    at::Tensor dense = t.is_non_overlapping_and_dense() ? t : t.contiguous();
    UnscaleParams p;
    p.data = dense.data_ptr();
    p.dtype = toKernelDType(dense.scalar_type());
    p.numel = dense.numel();
    p.inv_scale = inv_scale.const_data_ptr<float>();
    p.found_inf = found_inf.mutable_data_ptr<float>();
    MT_RT_CHECK(kernels::non_finite_check_and_unscale(p, stream));
    if (!dense.is_same(t)) const_cast<at::Tensor&>(t).copy_(dense);
  }
}

at::Tensor& wrapper_update_scale_(at::Tensor& self, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                                  double growth_factor, double backoff_factor, int64_t growth_interval) {
  const at::Device device = self.device();
  checkScalarOnDevice(self, "current_scale", at::kFloat, device);
  checkScalarOnDevice(growth_tracker, "growth_tracker", at::kInt, device);
  checkScalarOnDevice(found_inf, "found_inf", at::kFloat, device);
  c10::DeviceGuard guard(device);
  UpdateScaleParams p;
  p.scale = self.mutable_data_ptr<float>();
  p.growth_tracker = growth_tracker.mutable_data_ptr<int32_t>();
  p.found_inf = found_inf.const_data_ptr<float>();
  p.growth_factor = growth_factor;
  p.backoff_factor = backoff_factor;
  p.growth_interval = growth_interval;
  MT_RT_CHECK(kernels::update_scale(p, nativeHandle(currentStream(device.index()))));
  return self;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_amp_foreach_non_finite_check_and_unscale_", wrapper_non_finite_check_and_unscale_);
  MT_IMPL(m, "_amp_update_scale_", wrapper_update_scale_);
}

} // namespace mytorch
