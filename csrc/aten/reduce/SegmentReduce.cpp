// Op table: segment_reduce and its backward on the segment-reduction kernels (kernels/include/mytorch/segment.h,
// Note [Segment reduce]).
//
// ATen's segment_reduce and _segment_reduce_backward are device-generic glue (argument checks, lengths or offsets)
// over four DispatchStubs, one kernel per device. mytorch registers that glue for PrivateUse1 and answers the stubs
// with the kernels: the data viewed as (outer, length, inner), the lengths or offsets as they are (int32 or int64),
// a workspace for each row's boundaries, `initial` rounded to the data's dtype as ATen converts it.
#include <ATen/core/Tensor.h>
#include <ATen/native/SegmentReduce.h>
#include <ATen/ops/_segment_reduce_backward_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/segment_reduce_native.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <vector>

#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Checked.h"
#include "csrc/core/KernelDType.h"
#include "csrc/core/Runtime.h"
#include "mytorch/segment.h"

namespace mytorch {
namespace {

using at::Tensor;
using at::native::ReductionType;

SegmentOp segmentOp(ReductionType r) {
  switch (r) {
    case ReductionType::MAX: return SegmentOp::Max;
    case ReductionType::MIN: return SegmentOp::Min;
    case ReductionType::MEAN: return SegmentOp::Mean;
    case ReductionType::PROD: return SegmentOp::Prod;
    default: return SegmentOp::Sum;
  }
}

// `initial` as the data's dtype holds it (ATen's Scalar::to<scalar_t>, which refuses an overflow).
double roundedInitial(const c10::Scalar& v, at::ScalarType t) {
  switch (t) {
    case at::kHalf: return static_cast<float>(v.to<at::Half>());
    case at::kBFloat16: return static_cast<float>(v.to<at::BFloat16>());
    case at::kFloat: return v.to<float>();
    default: return v.to<double>();
  }
}

// The kernels' arguments for data (outer, length, inner) and its lengths or offsets; `held` keeps the contiguous
// copies and the boundaries' workspace alive for the launch.
SegmentArgs segmentArgs(ReductionType r, const Tensor& data, const Tensor& bounds, bool offsets,
                        const std::optional<c10::Scalar>& initial, std::vector<Tensor>& held) {
  TORCH_CHECK(at::isFloatingType(data.scalar_type()), "segment_reduce: expected floating-point data, got ",
              data.scalar_type());
  const int64_t axis = bounds.dim() - 1;  // ATen reduces along the last dimension of the lengths
  TORCH_CHECK(axis >= 0 && axis < data.dim(), "segment_reduce: expected lengths/offsets of 1 to ", data.dim(),
              " dimensions, got ", bounds.dim());
  TORCH_CHECK(bounds.device() == data.device(), "segment_reduce: expected lengths/offsets on ", data.device(), ", got ",
              bounds.device());
  TORCH_CHECK(bounds.sizes().slice(0, axis) == data.sizes().slice(0, axis), "segment_reduce: expected ",
              offsets ? "offsets" : "lengths", " whose leading dimensions are the data's ", data.sizes().slice(0, axis),
              ", got ", bounds.sizes());
  SegmentArgs a;
  a.dtype = toKernelDType(data.scalar_type());
  a.op = segmentOp(r);
  a.offsets = offsets;
  for (const auto d : c10::irange(axis)) a.outer *= data.size(d);
  for (const auto d : c10::irange(axis + 1, data.dim())) a.inner *= data.size(d);
  a.length = data.size(axis);
  a.count = offsets ? bounds.size(axis) - 1 : bounds.size(axis);
  TORCH_CHECK(a.count >= 0, "segment_reduce: expected offsets with at least one entry, got none");
  TORCH_CHECK(bounds.scalar_type() == at::kInt || bounds.scalar_type() == at::kLong, "segment_reduce: expected ",
              offsets ? "offsets" : "lengths", " of int32 or int64, got ", bounds.scalar_type());
  const Tensor b = bounds.contiguous();
  const Tensor x = data.contiguous();
  const Tensor work = at::empty({a.outer, a.count + 1}, b.options().dtype(at::kLong));
  held.insert(held.end(), {b, x, work});
  a.bounds_in = b.const_data_ptr();
  a.bounds_dtype = toKernelDType(b.scalar_type());
  a.bounds = work.mutable_data_ptr<int64_t>();
  a.data = x.const_data_ptr();
  a.has_initial = initial.has_value();
  if (initial.has_value()) a.initial = roundedInitial(*initial, data.scalar_type());
  return a;
}

Tensor reduceForward(ReductionType r, const Tensor& data, const Tensor& bounds, bool offsets,
                     const std::optional<c10::Scalar>& initial) {
  std::vector<Tensor> held;
  SegmentArgs a = segmentArgs(r, data, bounds, offsets, initial, held);
  auto shape = data.sizes().vec();
  shape[bounds.dim() - 1] = a.count;
  Tensor out = at::empty(shape, data.options());
  if (out.numel() == 0) return out;
  a.out = out.mutable_data_ptr();
  c10::DeviceGuard guard(data.device());
  MT_RT_CHECK(kernels::segment_reduce_forward(a, streamFor(data)));
  return out;
}

Tensor reduceBackward(const Tensor& grad, const Tensor& output, const Tensor& data, ReductionType r,
                      const Tensor& bounds, bool offsets, const std::optional<c10::Scalar>& initial) {
  std::vector<Tensor> held;
  SegmentArgs a = segmentArgs(r, data, bounds, offsets, initial, held);
  const int64_t segments = a.outer * a.count * a.inner;
  TORCH_CHECK(grad.numel() == segments && output.numel() == segments, "_segment_reduce_backward: expected grad and ",
              "output of ", segments, " elements (the forward's), got ", grad.numel(), " and ", output.numel());
  if (a.count == 0 || a.length == 0 || data.numel() == 0) return at::zeros(data.sizes(), grad.options());
  const Tensor g = grad.to(data.scalar_type()).contiguous(), o = output.to(data.scalar_type()).contiguous();
  held.insert(held.end(), {g, o});
  Tensor result = at::empty(data.sizes(), data.options());
  a.grad = g.const_data_ptr();
  a.output = o.const_data_ptr();
  a.out = result.mutable_data_ptr();
  c10::DeviceGuard guard(data.device());
  MT_RT_CHECK(kernels::segment_reduce_backward(a, streamFor(data)));
  return result.to(grad.scalar_type());
}

Tensor lengthsForward(ReductionType r, const Tensor& data, const Tensor& lengths, int64_t,
                      const std::optional<c10::Scalar>& initial) {
  return reduceForward(r, data, lengths, false, initial);
}

Tensor offsetsForward(ReductionType r, const Tensor& data, const Tensor& offsets, int64_t,
                      const std::optional<c10::Scalar>& initial) {
  return reduceForward(r, data, offsets, true, initial);
}

Tensor lengthsBackward(const Tensor& grad, const Tensor& output, const Tensor& data, ReductionType r,
                       const Tensor& lengths, int64_t, const std::optional<c10::Scalar>& initial) {
  return reduceBackward(grad, output, data, r, lengths, false, initial);
}

Tensor offsetsBackward(const Tensor& grad, const Tensor& output, const Tensor& data, ReductionType r,
                       const Tensor& offsets, int64_t, const std::optional<c10::Scalar>& initial) {
  return reduceBackward(grad, output, data, r, offsets, true, initial);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "segment_reduce", at::native::segment_reduce_kernel);
  MT_IMPL(m, "_segment_reduce_backward", at::native::_segment_reduce_backward_kernel);
}

} // namespace
} // namespace mytorch

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_segment_reduce_lengths_stub, &mytorch::lengthsForward);
REGISTER_PRIVATEUSE1_DISPATCH(_segment_reduce_offsets_stub, &mytorch::offsetsForward);
REGISTER_PRIVATEUSE1_DISPATCH(_segment_reduce_lengths_backward_stub, &mytorch::lengthsBackward);
REGISTER_PRIVATEUSE1_DISPATCH(_segment_reduce_offsets_backward_stub, &mytorch::offsetsBackward);
} // namespace at::native
