// Op table: resampling by index maps (Note [Resampling by index maps]): reflection and replication padding, nearest
// and nearest-exact upsampling of every rank, max unpooling, forward and backward.
//
// Note [Resampling by index maps]
// Each of these operators moves elements without arithmetic: output position o along a spatial dimension reads
// input position src(o), a map that depends on that dimension alone (reflection: (n-1) - |(n-1) - |o - pad||;
// replication: clamp(o - pad, 0, n-1); nearest: floor(o * scale), nearest-exact: floor((o + 0.5) * scale), both in
// ATen's float arithmetic and clamped to n-1). The forward is one index_select per dimension (a gather, the last
// dimension first; one through the maps composed into one for a contiguous input of at most 4,096 output positions a
// plane), the backward one index_add per dimension in the reverse order (every output position adds its
// gradient to its source: ATen's CPU and CUDA backwards sum the same terms). The maps are a few hundred integers
// computed on the host in ATen's own arithmetic (its index helpers are scalar code too) and handed to the device
// without a wait, all of a call's maps through one pinned buffer and one non-blocking copy. Built on the device they took three to five
// pointwise launches per dimension, which cost small inputs 3-6x the CPU's time (docs/speed.md). Max unpooling
// scatters each plane's values to their recorded positions. Shapes and argument checks are ATen's own: each call
// runs the operator on meta tensors first, which raises ATen's messages and gives the output shape. Complex and the
// dtypes the index kernels lack take the CPU fallback.
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_upsample_nearest_exact1d_backward_meta_dispatch.h>
#include <ATen/ops/_upsample_nearest_exact1d_backward_ops.h>
#include <ATen/ops/_upsample_nearest_exact1d_meta_dispatch.h>
#include <ATen/ops/_upsample_nearest_exact1d_ops.h>
#include <ATen/ops/_upsample_nearest_exact2d_backward_meta_dispatch.h>
#include <ATen/ops/_upsample_nearest_exact2d_backward_ops.h>
#include <ATen/ops/_upsample_nearest_exact2d_meta_dispatch.h>
#include <ATen/ops/_upsample_nearest_exact2d_ops.h>
#include <ATen/ops/_upsample_nearest_exact3d_backward_meta_dispatch.h>
#include <ATen/ops/_upsample_nearest_exact3d_backward_ops.h>
#include <ATen/ops/_upsample_nearest_exact3d_meta_dispatch.h>
#include <ATen/ops/_upsample_nearest_exact3d_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/max_unpool2d_ops.h>
#include <ATen/ops/max_unpool3d_ops.h>
#include <ATen/ops/reflection_pad1d_backward_ops.h>
#include <ATen/ops/reflection_pad1d_ops.h>
#include <ATen/ops/reflection_pad2d_backward_ops.h>
#include <ATen/ops/reflection_pad2d_ops.h>
#include <ATen/ops/reflection_pad3d_backward_ops.h>
#include <ATen/ops/reflection_pad3d_ops.h>
#include <ATen/ops/replication_pad1d_backward_ops.h>
#include <ATen/ops/replication_pad1d_ops.h>
#include <ATen/ops/replication_pad2d_backward_ops.h>
#include <ATen/ops/replication_pad2d_ops.h>
#include <ATen/ops/replication_pad3d_backward_ops.h>
#include <ATen/ops/replication_pad3d_ops.h>
#include <ATen/ops/upsample_nearest1d_backward_meta_dispatch.h>
#include <ATen/ops/upsample_nearest1d_backward_ops.h>
#include <ATen/ops/upsample_nearest1d_meta_dispatch.h>
#include <ATen/ops/upsample_nearest1d_ops.h>
#include <ATen/ops/upsample_nearest3d_backward_meta_dispatch.h>
#include <ATen/ops/upsample_nearest3d_backward_ops.h>
#include <ATen/ops/upsample_nearest3d_meta_dispatch.h>
#include <ATen/ops/upsample_nearest3d_ops.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/MetaCache.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptD = std::optional<double>;

// A tensor of the same shape, strides and dtype on the meta device: ATen's meta kernels check it for free.

bool indexable(const Tensor& t) { return !t.is_complex() && toKernelDType(t.scalar_type()) != DType::Other; }

// The out= dtype rule: structured kernels' message (checkOutDtype), or the older kernels' (reflection_pad2d and its
// backward, max_unpool), which are not structured.
void checkOut(const Tensor& out, c10::ScalarType expected, bool structured) {
  if (structured) return checkOutDtype(out, expected);
  TORCH_CHECK(out.scalar_type() == expected, "expected scalar type ", expected, " but found ", out.scalar_type());
}

bool structuredPad(const char* name) {
  const std::string_view n(name);
  return n != "aten::reflection_pad2d" && n != "aten::reflection_pad2d_backward";
}

// Host maps (innermost dimension first), as int64 tensors on the device of `like`: one staging buffer in pinned
// memory and one copy on the current stream without a wait (the caching host allocator keeps the staging block until
// the copy is done; on the sim the copy is a memcpy), each map a slice of it.
using HostMaps = std::vector<std::vector<int64_t>>;
std::vector<Tensor> deviceMaps(const HostMaps& host, const Tensor& like) {
  int64_t n = 0;
  for (const auto& m : host) n += static_cast<int64_t>(m.size());
  Tensor staging = at::empty({n}, at::TensorOptions().dtype(at::kLong).pinned_memory(true));
  int64_t* at = staging.data_ptr<int64_t>();
  for (const auto& m : host) at = std::copy(m.begin(), m.end(), at);
  const Tensor all = at::empty({n}, like.options().dtype(at::kLong)).copy_(staging, /*non_blocking=*/true);
  if (host.size() == 1) return {all};
  std::vector<Tensor> maps;
  int64_t start = 0;
  for (const auto& m : host) {
    maps.push_back(all.narrow(0, start, static_cast<int64_t>(m.size())));
    start += static_cast<int64_t>(m.size());
  }
  return maps;
}

// The index maps (Note [Resampling by index maps]), on the host.
std::vector<int64_t> padMap(int64_t in, int64_t pad_before, int64_t out, bool reflect) {
  std::vector<int64_t> map(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t i = o - pad_before;
    map[o] = reflect ? (in - 1) - std::abs((in - 1) - std::abs(i)) : std::clamp<int64_t>(i, 0, in - 1);
  }
  return map;
}

// ATen's compute_scales_value<float>: 1 / scale when given and positive, else in / out.
float nearestScale(OptD scale, int64_t in, int64_t out) {
  return scale.has_value() && *scale > 0 ? static_cast<float>(1.0 / *scale)
                                         : static_cast<float>(in) / static_cast<float>(out);
}

// ATen's nearest_neighbor_compute_source_index and nearest_neighbor_exact_compute_source_index (the CPU and CUDA
// forwards): nearest is floorf(o * scale) in float; nearest-exact is floorf((o + 0.5) * scale), the product in
// double and rounded to float before the floor; both clamped to in - 1. A given scale is used as given, also where
// out == in or out == 2 * in (scale_factor=1.05 on 9 elements reads 0, 0, 1, ... on the CPU, not the identity).
// `cpu_backward`: the CPU's nearest 1-d and 3-d backwards read ATen's nearest_idx instead, which takes out == in as
// the identity and out == 2 * in as o >> 1 whatever the scale, so their gradient is not the forward's for such a
// scale; the backward follows the CPU, the reference it is checked against.
std::vector<int64_t> nearestMap(int64_t in, int64_t out, OptD scale, bool exact, bool cpu_backward) {
  std::vector<int64_t> map(static_cast<size_t>(out));
  const float s = nearestScale(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    const float src = exact ? static_cast<float>((static_cast<double>(o) + 0.5) * s) : static_cast<float>(o) * s;
    map[o] = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    if (cpu_backward && !exact && out == in) map[o] = o;
    if (cpu_backward && !exact && out == 2 * in) map[o] = o >> 1;
  }
  return map;
}

// Forward: gather the trailing spatial dimensions through their maps, the last dimension first. A contiguous input
// with an output of at most kFlatGather positions per plane takes one gather through the maps composed into one
// (the input viewed as planes x positions): one launch instead of one per dimension, for the small inputs where the
// launches are the cost.
constexpr int64_t kFlatGather = 4096;
Tensor gatherMaps(const Tensor& self, const HostMaps& host) {
  const int64_t k = static_cast<int64_t>(host.size());
  int64_t positions = 1, in_positions = 1;
  for (int64_t j = 0; j < k; ++j) {
    positions *= static_cast<int64_t>(host[j].size());
    in_positions *= self.size(self.dim() - 1 - j);
  }
  if (k > 1 && positions <= kFlatGather && self.is_contiguous()) {
    std::vector<int64_t> flat(1, 0); // the source of each output position, in row-major order
    int64_t stride = 1;
    std::vector<int64_t> strides(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) {
      strides[j] = stride;
      stride *= self.size(self.dim() - 1 - j);
    }
    for (int64_t j = k - 1; j >= 0; --j) {
      std::vector<int64_t> next;
      next.reserve(flat.size() * host[j].size());
      for (const int64_t base : flat)
        for (const int64_t src : host[j]) next.push_back(base + src * strides[j]);
      flat = std::move(next);
    }
    std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - k);
    const int64_t planes = c10::multiply_integers(shape);
    for (int64_t j = k - 1; j >= 0; --j) shape.push_back(static_cast<int64_t>(host[j].size()));
    const Tensor map = deviceMaps({flat}, self)[0];
    return at::index_select(self.reshape({planes, in_positions}), 1, map).view(shape);
  }
  const std::vector<Tensor> maps = deviceMaps(host, self);
  Tensor result = self;
  for (int64_t j = 0; j < k; ++j) result = at::index_select(result, self.dim() - 1 - j, maps[j]);
  return result.contiguous(self.suggest_memory_format());
}

// Backward: every output position adds its gradient to its source, dimension by dimension in reverse order; the
// half types accumulate in float32 and round once, as ATen's CPU backwards.
Tensor scatterMaps(const Tensor& grad, at::IntArrayRef input_sizes, const HostMaps& host) {
  const bool reduced = grad.scalar_type() == at::kHalf || grad.scalar_type() == at::kBFloat16;
  if (reduced) return scatterMaps(grad.to(at::kFloat), input_sizes, host).to(grad.scalar_type());
  const std::vector<Tensor> maps = deviceMaps(host, grad);
  Tensor g = grad;
  const int64_t k = static_cast<int64_t>(maps.size()), nd = static_cast<int64_t>(input_sizes.size());
  for (int64_t j = k - 1; j >= 0; --j) {
    const int64_t d = nd - 1 - j;
    std::vector<int64_t> shape = g.sizes().vec();
    shape[d] = input_sizes[d];
    g = at::zeros(shape, grad.options()).index_add_(d, maps[j], g);
  }
  return g;
}

// ---- padding --------------------------------------------------------------------------------------------------

HostMaps padMaps(const Tensor& self, at::IntArrayRef padding, at::IntArrayRef out_sizes, bool reflect) {
  HostMaps maps;
  for (size_t j = 0; j < padding.size() / 2; ++j) {
    const int64_t d = self.dim() - 1 - static_cast<int64_t>(j);
    maps.push_back(padMap(self.size(d), padding[2 * j], out_sizes[d], reflect));
  }
  return maps;
}

template <typename Op, bool kReflect>
Tensor& padOut(const Tensor& self, at::IntArrayRef padding, Tensor& out) {
  if (!indexable(self)) return Fallback<Op>::call(self, padding, out);
  checkOut(out, self.scalar_type(), structuredPad(Op::name));
  // ATen's checks and output shape: torch's Python meta kernel (Note [Cached meta results])
  const Tensor meta_out = cachedMeta(
      Op::name,
      [&] {
        Tensor m = metaLike(out);
        Op::call(metaLike(self), c10::fromIntArrayRefSlow(padding), m);
        return m;
      },
      self, padding, out);
  if (meta_out.numel() == 0) {
    at::native::resize_output(out, meta_out.sizes());
    return out;
  }
  return assignOut(out, gatherMaps(self, padMaps(self, padding, meta_out.sizes(), kReflect)));
}

template <typename Op, bool kReflect>
Tensor& padBackwardOut(const Tensor& grad, const Tensor& self, at::IntArrayRef padding, Tensor& grad_input) {
  if (!indexable(self) || grad.scalar_type() != self.scalar_type())
    return Fallback<Op>::call(grad, self, padding, grad_input);
  checkOut(grad_input, grad.scalar_type(), structuredPad(Op::name));
  cachedMeta(
      Op::name,
      [&] {
        Tensor m = metaLike(grad_input);
        Op::call(metaLike(grad), metaLike(self), c10::fromIntArrayRefSlow(padding), m);
        return m;
      },
      grad, self, padding, grad_input);
  if (self.numel() == 0 || grad.numel() == 0) return assignOut(grad_input, at::zeros(self.sizes(), grad.options()));
  return assignOut(grad_input, scatterMaps(grad, self.sizes(), padMaps(self, padding, grad.sizes(), kReflect)));
}

// ---- nearest upsampling ---------------------------------------------------------------------------------------

HostMaps nearestMaps(at::IntArrayRef in_sizes, at::IntArrayRef out_spatial, std::vector<OptD> scales, bool exact,
                     bool cpu_backward) {
  // scales are given outermost first (d, h, w); maps are built innermost first
  HostMaps maps;
  const int64_t k = static_cast<int64_t>(out_spatial.size()), nd = static_cast<int64_t>(in_sizes.size());
  for (int64_t j = 0; j < k; ++j)
    maps.push_back(nearestMap(in_sizes[nd - 1 - j], out_spatial[k - 1 - j], scales[k - 1 - j], exact, cpu_backward));
  return maps;
}

template <bool kExact>
Tensor& nearestForward(const Tensor& self, at::IntArrayRef output_size, std::vector<OptD> scales, Tensor& out,
                       const Tensor& meta_out) {
  if (meta_out.numel() == 0) {
    at::native::resize_output(out, meta_out.sizes());
    return out;
  }
  return assignOut(out, gatherMaps(self, nearestMaps(self.sizes(), output_size, std::move(scales), kExact, false)));
}

template <bool kExact>
Tensor& nearestBackward(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                        std::vector<OptD> scales, Tensor& grad_input) {
  if (grad.numel() == 0) return assignOut(grad_input, at::zeros(input_size, grad.options()));
  return assignOut(
      grad_input, scatterMaps(grad, input_size, nearestMaps(input_size, output_size, std::move(scales), kExact, true)));
}

#define MT_NEAREST_1D(NAME, OP, EXACT)                                                                           \
  Tensor& NAME##Out(const Tensor& self, at::IntArrayRef output_size, OptD s, Tensor& out) {                      \
    if (!indexable(self)) return Fallback<at::_ops::OP##_out>::call(self, output_size, s, out);                  \
    checkOutDtype(out, self.scalar_type());                                                                      \
    Tensor meta_out = metaLike(out);                                                                             \
    at::meta::OP##_outf(metaLike(self), output_size, s, meta_out);                                               \
    return nearestForward<EXACT>(self, output_size, {s}, out, meta_out);                                         \
  }                                                                                                              \
  Tensor& NAME##BackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size, OptD s, \
                            Tensor& grad_input) {                                                                \
    if (!indexable(grad))                                                                                        \
      return Fallback<at::_ops::OP##_backward_grad_input>::call(grad, output_size, input_size, s, grad_input);   \
    checkOutDtype(grad_input, grad.scalar_type());                                                               \
    Tensor meta_in = metaLike(grad_input);                                                                       \
    at::meta::OP##_backward_outf(metaLike(grad), output_size, input_size, s, meta_in);                           \
    return nearestBackward<EXACT>(grad, output_size, input_size, {s}, grad_input);                               \
  }

#define MT_NEAREST_2D(NAME, OP, EXACT)                                                                              \
  Tensor& NAME##Out(const Tensor& self, at::IntArrayRef output_size, OptD sh, OptD sw, Tensor& out) {               \
    if (!indexable(self)) return Fallback<at::_ops::OP##_out>::call(self, output_size, sh, sw, out);                \
    checkOutDtype(out, self.scalar_type());                                                                         \
    Tensor meta_out = metaLike(out);                                                                                \
    at::meta::OP##_outf(metaLike(self), output_size, sh, sw, meta_out);                                             \
    return nearestForward<EXACT>(self, output_size, {sh, sw}, out, meta_out);                                       \
  }                                                                                                                 \
  Tensor& NAME##BackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size, OptD sh,   \
                            OptD sw, Tensor& grad_input) {                                                          \
    if (!indexable(grad))                                                                                           \
      return Fallback<at::_ops::OP##_backward_grad_input>::call(grad, output_size, input_size, sh, sw, grad_input); \
    checkOutDtype(grad_input, grad.scalar_type());                                                                  \
    Tensor meta_in = metaLike(grad_input);                                                                          \
    at::meta::OP##_backward_outf(metaLike(grad), output_size, input_size, sh, sw, meta_in);                         \
    return nearestBackward<EXACT>(grad, output_size, input_size, {sh, sw}, grad_input);                             \
  }

#define MT_NEAREST_3D(NAME, OP, EXACT)                                                                            \
  Tensor& NAME##Out(const Tensor& self, at::IntArrayRef output_size, OptD sd, OptD sh, OptD sw, Tensor& out) {    \
    if (!indexable(self)) return Fallback<at::_ops::OP##_out>::call(self, output_size, sd, sh, sw, out);          \
    checkOutDtype(out, self.scalar_type());                                                                       \
    Tensor meta_out = metaLike(out);                                                                              \
    at::meta::OP##_outf(metaLike(self), output_size, sd, sh, sw, meta_out);                                       \
    return nearestForward<EXACT>(self, output_size, {sd, sh, sw}, out, meta_out);                                 \
  }                                                                                                               \
  Tensor& NAME##BackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size, OptD sd, \
                            OptD sh, OptD sw, Tensor& grad_input) {                                               \
    if (!indexable(grad))                                                                                         \
      return Fallback<at::_ops::OP##_backward_grad_input>::call(grad, output_size, input_size, sd, sh, sw,        \
                                                                grad_input);                                      \
    checkOutDtype(grad_input, grad.scalar_type());                                                                \
    Tensor meta_in = metaLike(grad_input);                                                                        \
    at::meta::OP##_backward_outf(metaLike(grad), output_size, input_size, sd, sh, sw, meta_in);                   \
    return nearestBackward<EXACT>(grad, output_size, input_size, {sd, sh, sw}, grad_input);                       \
  }

MT_NEAREST_1D(nearest1d, upsample_nearest1d, false)
MT_NEAREST_1D(nearestExact1d, _upsample_nearest_exact1d, true)
MT_NEAREST_2D(nearestExact2d, _upsample_nearest_exact2d, true)
MT_NEAREST_3D(nearest3d, upsample_nearest3d, false)
MT_NEAREST_3D(nearestExact3d, _upsample_nearest_exact3d, true)

// ---- max unpooling --------------------------------------------------------------------------------------------

// Each plane's values land at their recorded flat positions of the output plane; the rest is zero.
Tensor unpoolPlanes(const Tensor& self, const Tensor& indices, at::IntArrayRef out_sizes, int64_t spatial) {
  const int64_t nd = static_cast<int64_t>(out_sizes.size());
  int64_t plane = 1;
  for (int64_t d = nd - spatial; d < nd; ++d) plane *= out_sizes[d];
  const int64_t planes = plane > 0 ? c10::multiply_integers(out_sizes) / plane : 0;
  Tensor out = at::zeros({planes, plane}, self.options());
  if (self.numel() > 0 && plane > 0) out.scatter_(1, indices.reshape({planes, -1}), self.reshape({planes, -1}));
  return out.view(out_sizes);
}

// The checks of max_unpool2d/3d, in the order and words of torch's decomposition (torch/_decomp/decompositions.py,
// which is their meta function: run through it, they cost 0.3 ms of Python a call), and the output's sizes: the
// input's leading dimensions, then output_size.
std::vector<int64_t> unpoolSizes(const Tensor& self, const Tensor& indices, at::IntArrayRef output_size, int64_t dim,
                                 at::IntArrayRef stride = {}, at::IntArrayRef padding = {}) {
  const char* hwd = dim == 2 ? "two elements (height, width)" : "three elements (depth, height, width)";
  TORCH_CHECK(indices.scalar_type() == at::kLong, "elements in indices should be type int64",
              dim == 2 ? " but got: " : "", dim == 2 ? c10::toString(indices.scalar_type()) : "");
  if (dim == 2) {
    TORCH_CHECK(output_size.size() == 2, "There should be exactly ", hwd, " in output_size, but got ",
                output_size.size(), " elements.");
  }
  TORCH_CHECK(self.dim() == dim + 1 || self.dim() == dim + 2, "Input to max_unpooling", dim, "d should be a ", dim + 1,
              "d or ", dim + 2, "d Tensor, but got a tensor with ", self.dim(), " dimensions.");
  if (dim == 3) {
    TORCH_CHECK(output_size.size() == 3, "There should be exactly ", hwd, " in output_size, but got ",
                output_size.size(), " elements.");
    TORCH_CHECK(stride.size() == 3, "There should be exactly ", hwd, " in stride, but got: ", stride.size(),
                " elements.");
    TORCH_CHECK(padding.size() == 3, "There should be exactly ", hwd, " in padding, but got: ", padding.size(),
                " elements.");
  }
  TORCH_CHECK(self.sizes() == indices.sizes(), "Expected shape of indices to be same as that of the input tensor (",
              self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t i = 1; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0, "max_unpooling", dim, "d(): Expected input to have non-zero size for non-batch ",
                "dimensions, but got ", self.sizes(), " with dimension ", i, " being empty.");
  if (dim == 3)
    TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0,
                "strides should be greater than zero, but got stride: ", stride);
  at::globalContext().alertNotDeterministic(dim == 2 ? "max_unpooling2d_forward_out" : "max_unpooling3d_forward_out");
  for (size_t i = 0; i < output_size.size(); ++i)
    TORCH_CHECK(output_size[i] >= 0, "max_unpooling", dim, "d(): output_size must contain non-negative spatial ",
                "dimensions, but got output_size[", i, "]=", output_size[i]);
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end() - dim);
  sizes.insert(sizes.end(), output_size.begin(), output_size.end());
  return sizes;
}

Tensor& maxUnpool2dOut(const Tensor& self, const Tensor& indices, at::IntArrayRef output_size, Tensor& out) {
  if (!indexable(self)) return Fallback<at::_ops::max_unpool2d_out>::call(self, indices, output_size, out);
  checkOut(out, self.scalar_type(), false);
  const std::vector<int64_t> sizes = unpoolSizes(self, indices, output_size, 2);
  return assignOut(out, unpoolPlanes(self.contiguous(), indices.contiguous(), sizes, 2));
}

Tensor maxUnpool2d(const Tensor& self, const Tensor& indices, at::IntArrayRef output_size) {
  Tensor out = at::empty({0}, self.options());
  return maxUnpool2dOut(self, indices, output_size, out);
}

Tensor& maxUnpool3dOut(const Tensor& self, const Tensor& indices, at::IntArrayRef output_size, at::IntArrayRef stride,
                       at::IntArrayRef padding, Tensor& out) {
  if (!indexable(self))
    return Fallback<at::_ops::max_unpool3d_out>::call(self, indices, output_size, stride, padding, out);
  checkOut(out, self.scalar_type(), false);
  const std::vector<int64_t> sizes = unpoolSizes(self, indices, output_size, 3, stride, padding);
  return assignOut(out, unpoolPlanes(self.contiguous(), indices.contiguous(), sizes, 3));
}

Tensor maxUnpool3d(const Tensor& self, const Tensor& indices, at::IntArrayRef output_size, at::IntArrayRef stride,
                   at::IntArrayRef padding) {
  Tensor out = at::empty({0}, self.options());
  return maxUnpool3dOut(self, indices, output_size, stride, padding, out);
}

// The functional forms: a fresh out= of the input's dtype.
template <typename Op, bool kReflect>
Tensor pad(const Tensor& self, at::IntArrayRef padding) {
  Tensor out = at::empty({0}, self.options());
  return padOut<Op, kReflect>(self, padding, out);
}

template <typename Op, bool kReflect>
Tensor padBackward(const Tensor& grad, const Tensor& self, at::IntArrayRef padding) {
  Tensor grad_input = at::empty({0}, grad.options());
  return padBackwardOut<Op, kReflect>(grad, self, padding, grad_input);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
#define MT_PAD(NAME, REFLECT)                                                                                \
  MT_IMPL(m, #NAME ".out", (padOut<at::_ops::NAME##_out, REFLECT>));                                         \
  MT_IMPL(m, #NAME, (pad<at::_ops::NAME##_out, REFLECT>));                                                   \
  MT_IMPL(m, #NAME "_backward.grad_input", (padBackwardOut<at::_ops::NAME##_backward_grad_input, REFLECT>)); \
  MT_IMPL(m, #NAME "_backward", (padBackward<at::_ops::NAME##_backward_grad_input, REFLECT>));
  MT_PAD(reflection_pad1d, true)
  MT_PAD(reflection_pad2d, true)
  MT_PAD(reflection_pad3d, true)
  MT_PAD(replication_pad1d, false)
  MT_PAD(replication_pad2d, false)
  MT_PAD(replication_pad3d, false)
#undef MT_PAD
  MT_IMPL(m, "upsample_nearest1d.out", nearest1dOut);
  MT_IMPL(m, "upsample_nearest1d_backward.grad_input", nearest1dBackwardOut);
  MT_IMPL(m, "_upsample_nearest_exact1d.out", nearestExact1dOut);
  MT_IMPL(m, "_upsample_nearest_exact1d_backward.grad_input", nearestExact1dBackwardOut);
  MT_IMPL(m, "_upsample_nearest_exact2d.out", nearestExact2dOut);
  MT_IMPL(m, "_upsample_nearest_exact2d_backward.grad_input", nearestExact2dBackwardOut);
  MT_IMPL(m, "upsample_nearest3d.out", nearest3dOut);
  MT_IMPL(m, "upsample_nearest3d_backward.grad_input", nearest3dBackwardOut);
  MT_IMPL(m, "_upsample_nearest_exact3d.out", nearestExact3dOut);
  MT_IMPL(m, "_upsample_nearest_exact3d_backward.grad_input", nearestExact3dBackwardOut);
  MT_IMPL(m, "max_unpool2d", maxUnpool2d);
  MT_IMPL(m, "max_unpool2d.out", maxUnpool2dOut);
  MT_IMPL(m, "max_unpool3d", maxUnpool3d);
  MT_IMPL(m, "max_unpool3d.out", maxUnpool3dOut);
}

} // namespace mytorch
