// Op table: the ops torch.amp.GradScaler runs on the device, as native kernels.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/amp.h"

#include <utility>
#include <vector>

namespace mytorch {
namespace {

void checkScalarOnDevice(const at::Tensor& t, const char* what, at::ScalarType dtype, const at::Device& device) {
  TORCH_CHECK(t.numel() == 1, what, " must be a one-element tensor, but has ", t.numel(), " elements");
  TORCH_CHECK(t.scalar_type() == dtype, what, " must be ", dtype, ", but got ", t.scalar_type());
  TORCH_CHECK(t.device() == device, what, " must be on ", device, ", but is on ", t.device());
}

void nonFiniteCheckAndUnscaleInplace(at::TensorList self, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  if (self.empty()) return;
  const at::Device device = found_inf.device();
  checkScalarOnDevice(found_inf, "found_inf", at::kFloat, device);
  checkScalarOnDevice(inv_scale, "inv_scale", at::kFloat, device);
  c10::DeviceGuard guard(device);
  const rt::Stream stream = streamFor(device);
  // One launch per run of up to kMaxUnscaleTensors tensors of one dtype; non-dense tensors go through a dense copy.
  UnscaleArgs p;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (the user's tensor, its dense copy) of this launch
  auto flush = [&] {
    if (p.count > 0) MT_RT_CHECK(kernels::non_finite_check_and_unscale(p, stream));
    for (auto& [t, dense] : copies) const_cast<at::Tensor&>(t).copy_(dense);
    p.count = 0;
    copies.clear();
  };
  for (const at::Tensor& t : self) {
    TORCH_CHECK(t.device() == device, "all tensors must be on ", device, ", but one is on ", t.device());
    TORCH_CHECK(at::isFloatingType(t.scalar_type()), "grads must be floating point, but one is ", t.scalar_type());
    if (t.numel() == 0) continue;
    const DType dtype = toKernelDType(t.scalar_type());
    if (p.count == kMaxUnscaleTensors || (p.count > 0 && p.dtype != dtype)) flush();
    at::Tensor dense = t.is_non_overlapping_and_dense() ? t : t.contiguous();
    if (!dense.is_same(t)) copies.emplace_back(t, dense);
    p.dtype = dtype;
    p.data[p.count] = dense.data_ptr();
    p.numel[p.count] = dense.numel();
    p.inv_scale = inv_scale.const_data_ptr<float>();
    p.found_inf = found_inf.mutable_data_ptr<float>();
    ++p.count;
  }
  flush();
}

at::Tensor& updateScaleInplace(at::Tensor& self, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                               double growth_factor, double backoff_factor, int64_t growth_interval) {
  const at::Device device = self.device();
  checkScalarOnDevice(self, "current_scale", at::kFloat, device);
  checkScalarOnDevice(growth_tracker, "growth_tracker", at::kInt, device);
  checkScalarOnDevice(found_inf, "found_inf", at::kFloat, device);
  c10::DeviceGuard guard(device);
  UpdateScaleArgs p;
  p.scale = self.mutable_data_ptr<float>();
  p.growth_tracker = growth_tracker.mutable_data_ptr<int32_t>();
  p.found_inf = found_inf.const_data_ptr<float>();
  p.growth_factor = growth_factor;
  p.backoff_factor = backoff_factor;
  p.growth_interval = growth_interval;
  MT_RT_CHECK(kernels::update_scale(p, streamFor(device)));
  return self;
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_amp_foreach_non_finite_check_and_unscale_", nonFiniteCheckAndUnscaleInplace);
  MT_IMPL(m, "_amp_update_scale_", updateScaleInplace);
}

} // namespace mytorch
