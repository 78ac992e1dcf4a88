// Op table: segment_reduce and its backward, composed from native kernels (Note [Segment reduce]).
//
// Note [Segment reduce]
// ATen's segment_reduce and _segment_reduce_backward are device-generic glue (argument checks, lengths or
// offsets) over four DispatchStubs, one kernel per device. mytorch registers that glue for PrivateUse1 and
// answers the stubs by composing native kernels: every position along the reduced axis finds its segment with
// one batched searchsorted over the segments' ends, the reduction is a scatter into the segments' initial
// values, and the backward gathers each segment's gradient and output back to its positions. Half and bfloat16
// are computed in float and rounded once (ATen's CPU kernel accumulates in the input dtype). ATen's semantics
// are kept: an empty segment holds `initial` or the reduction's identity (NaN for a mean without `initial`),
// NaN propagates through max and min, a max/min gradient is shared among tied positions only where it is
// positive (ATen's kernels divide only those), a product's gradient at a zero or NaN is the product of the
// others, and positions outside every segment (lengths or offsets that do not cover the axis, allowed under
// unsafe=True) change no segment and get no gradient.
#include <ATen/core/Tensor.h>
#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/native/SegmentReduce.h>
#include <ATen/ops/_segment_reduce_backward_native.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/segment_reduce_native.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <c10/util/irange.h>
#include <torch/library.h>

#include <limits>

#include "csrc/core/Checked.h"

namespace mytorch {
namespace {

using at::Tensor;
using at::native::ReductionType;

// Where each position along the axis lies: the data viewed as (outer, length, inner), the segments as (outer, S).
struct Segments {
  int64_t outer = 1, length = 0, inner = 1, count = 0;
  Tensor index;  // (outer, length, inner) int64: the position's segment (clamped into range)
  Tensor valid;  // (outer, length, 1) bool: the position lies in a segment
  Tensor sizes;  // (outer, count) int64: each segment's length
};

Segments locate(const Tensor& data, const Tensor& bounds, bool offsets) {
  TORCH_CHECK(at::isFloatingType(data.scalar_type()), "segment_reduce: expected floating-point data, got ",
              data.scalar_type());
  const int64_t axis = bounds.dim() - 1;  // ATen reduces along the last dimension of the lengths
  TORCH_CHECK(axis >= 0 && axis < data.dim(), "segment_reduce: expected lengths/offsets of 1 to ", data.dim(),
              " dimensions, got ", bounds.dim());
  Segments s;
  for (const auto d : c10::irange(axis)) s.outer *= data.size(d);
  for (const auto d : c10::irange(axis + 1, data.dim())) s.inner *= data.size(d);
  s.length = data.size(axis);
  const Tensor b = bounds.reshape({s.outer, bounds.size(axis)}).to(at::kLong);
  s.count = offsets ? b.size(1) - 1 : b.size(1);
  TORCH_CHECK(s.count >= 0, "segment_reduce: expected offsets with at least one entry, got none");
  Tensor start, end;
  if (offsets) {
    start = b.narrow(1, 0, s.count);
    end = b.narrow(1, 1, s.count).contiguous();
  } else {
    end = at::cumsum(b, 1);
    start = end - b;
  }
  s.sizes = end - start;
  const Tensor pos = at::arange(s.length, b.options()).expand({s.outer, s.length}).contiguous();
  // The first segment whose end lies past the position (right=True skips the empty segments ending there).
  Tensor seg = at::searchsorted(end, pos, /*out_int32=*/false, /*right=*/true);
  const Tensor clamped = seg.clamp_max(std::max<int64_t>(s.count - 1, 0));
  // Positions past the last end (lengths that do not cover the axis, under unsafe=True) or before the first
  // offset belong to no segment.
  s.valid = s.count == 0 ? at::zeros({s.outer, s.length, 1}, b.options().dtype(at::kBool))
                         : (seg < s.count).logical_and_(pos >= start.gather(1, clamped)).unsqueeze(-1);
  s.index = clamped.unsqueeze(-1).expand({s.outer, s.length, s.inner});
  return s;
}

double identity(ReductionType r) {
  switch (r) {
    case ReductionType::MAX: return -std::numeric_limits<double>::infinity();
    case ReductionType::MIN: return std::numeric_limits<double>::infinity();
    case ReductionType::PROD: return 1.0;
    default: return 0.0;
  }
}

// A (outer, count, inner) tensor of the segments' starting value, in the compute dtype: `initial` rounded to the
// data's dtype first, as ATen converts it.
// count: the segments to make room for (the forward adds one for the positions outside every segment).
Tensor startingValues(const Segments& s, int64_t count, const Tensor& data, const std::optional<c10::Scalar>& initial,
                      double id) {
  const auto opmath = at::toOpMathType(data.scalar_type());
  if (!initial.has_value()) return at::full({s.outer, count, s.inner}, id, data.options().dtype(opmath));
  return at::full({s.outer, count, s.inner}, *initial, data.options()).to(opmath);
}

Tensor reduceForward(ReductionType r, const Tensor& data, const Tensor& bounds, bool offsets,
                     const std::optional<c10::Scalar>& initial) {
  const Segments s = locate(data, bounds, offsets);
  const auto opmath = at::toOpMathType(data.scalar_type());
  const double id = identity(r);
  const Tensor d = data.reshape({s.outer, s.length, s.inner}).to(opmath);
  Tensor out;
  if (s.count > 0 && s.length > 0) {
    // positions outside every segment go to one more segment, dropped after (a choice on the (outer, length)
    // indices, where replacing their data took a pass over all of it)
    const Tensor index = at::where(s.valid, s.index.narrow(2, 0, 1), s.count).expand(s.index.sizes());
    out = startingValues(s, s.count + 1, data, initial, id);
    switch (r) {
      case ReductionType::SUM:
      case ReductionType::MEAN: out.scatter_add_(1, index, d); break;
      case ReductionType::PROD: out.scatter_reduce_(1, index, d, "prod"); break;
      case ReductionType::MAX: out.scatter_reduce_(1, index, d, "amax"); break;
      case ReductionType::MIN: out.scatter_reduce_(1, index, d, "amin"); break;
    }
    out = out.narrow(1, 0, s.count).contiguous();
  } else {
    out = startingValues(s, s.count, data, initial, id);
  }
  if (r == ReductionType::MEAN) {
    const Tensor n = s.sizes.unsqueeze(-1).to(opmath);
    out = initial.has_value() ? at::where(n > 0, out / n, out) : at::where(n > 0, out / n, NAN);
  }
  auto shape = data.sizes().vec();
  shape[bounds.dim() - 1] = s.count;
  return out.to(data.scalar_type()).view(shape);
}

Tensor reduceBackward(const Tensor& grad, const Tensor& output, const Tensor& data, ReductionType r,
                      const Tensor& bounds, bool offsets, const std::optional<c10::Scalar>& initial) {
  const Segments s = locate(data, bounds, offsets);
  if (s.count == 0 || s.length == 0) return at::zeros(data.sizes(), grad.options());
  const auto opmath = at::toOpMathType(data.scalar_type());
  const Tensor d = data.reshape({s.outer, s.length, s.inner}).to(opmath);
  const Tensor g = grad.reshape({s.outer, s.count, s.inner}).to(opmath).gather(1, s.index);
  const auto perSegment = [&](const Tensor& flags) {  // each position's count of flagged positions in its segment
    Tensor n = at::zeros({s.outer, s.count, s.inner}, d.options());
    return n.scatter_add_(1, s.index, flags.to(opmath)).gather(1, s.index);
  };
  Tensor result;
  switch (r) {
    case ReductionType::SUM: result = g; break;
    case ReductionType::MEAN:
      result = g / s.sizes.to(opmath).unsqueeze(-1).expand({s.outer, s.count, s.inner}).gather(1, s.index);
      break;
    case ReductionType::MAX:
    case ReductionType::MIN: {
      const Tensor o = output.reshape({s.outer, s.count, s.inner}).to(opmath).gather(1, s.index);
      const Tensor hit = at::isnan(d).logical_or_(d == o);
      const Tensor ties = perSegment(hit);
      result = at::where(hit, g, 0.0);
      result = at::where(hit.logical_and(ties >= 2).logical_and_(result > 0), result / ties, result);
      break;
    }
    case ReductionType::PROD: {
      const Tensor o = output.reshape({s.outer, s.count, s.inner}).to(opmath).gather(1, s.index);
      const Tensor nan = at::isnan(d), zero = d == 0, special = nan.logical_or(zero);
      // At a zero or NaN, the product of the others: `initial`, the other positions' finite non-zero product,
      // and NaN if another position is NaN, else 0 if another is zero.
      Tensor others = startingValues(s, s.count, data, initial, 1.0);
      others.scatter_reduce_(1, s.index, at::where(special, 1.0, d), "prod");
      others = others.gather(1, s.index);
      const Tensor otherNan = perSegment(nan) - nan.to(opmath), otherZero = perSegment(zero) - zero.to(opmath);
      const Tensor rest = at::where(otherNan > 0, NAN, at::where(otherZero > 0, 0.0, 1.0));
      // grad * output rounded to the data's dtype first, as ATen's kernel does: where it overflows a half, the
      // gradient is infinite there too.
      const Tensor go = (g * o).to(data.scalar_type()).to(opmath);
      result = at::where(special, g * (others * rest), go / d);
      break;
    }
  }
  result = at::where(s.valid, result, 0.0);
  return result.to(grad.scalar_type()).view(data.sizes());
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
