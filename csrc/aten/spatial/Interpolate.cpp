// Op table: resampling by weight matrices (Note [Resampling by weight matrices]): linear, trilinear and bicubic
// upsampling, antialiased bilinear and bicubic (Note [Antialiased resampling]) and 3-D adaptive average pooling,
// forward and backward.
//
// Note [Resampling by weight matrices]
// Linear and cubic interpolation and adaptive average pooling are separable: output position o along a spatial
// dimension is a weighted sum of a few input positions along that dimension alone, with weights that depend on
// (o, input size, output size, align_corners, scale) only. So each dimension is one small matrix W (out x in) and
// the operator is x contracted with W along each spatial dimension, the last first: GEMMs on the device. The
// backward contracts with W^T in the reverse order (every term ATen's backward adds, the same weights). The
// weights are ATen's own arithmetic (area_pixel_compute_scale / _source_index in opmath, the index clamped and
// lambda guarded as guard_index_and_lambda does; Keys' cubic with A = -0.75 and clamped taps; adaptive windows
// [floor(o*in/out), ceil((o+1)*in/out))), computed on the host and copied to the device once per call. Half types
// compute in float32 and round once, as ATen's CPU kernels. Products of weights taken one dimension at a time
// round differently from ATen's sum over all corners at once: within the shared tolerance, not bit for bit.
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_adaptive_avg_pool3d_backward_ops.h>
#include <ATen/ops/_adaptive_avg_pool3d_ops.h>
#include <ATen/ops/_upsample_bicubic2d_aa_backward_meta_dispatch.h>
#include <ATen/ops/_upsample_bicubic2d_aa_backward_ops.h>
#include <ATen/ops/_upsample_bicubic2d_aa_meta_dispatch.h>
#include <ATen/ops/_upsample_bicubic2d_aa_ops.h>
#include <ATen/ops/_upsample_bilinear2d_aa_backward_meta_dispatch.h>
#include <ATen/ops/_upsample_bilinear2d_aa_backward_ops.h>
#include <ATen/ops/_upsample_bilinear2d_aa_meta_dispatch.h>
#include <ATen/ops/_upsample_bilinear2d_aa_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/upsample_bicubic2d_backward_meta_dispatch.h>
#include <ATen/ops/upsample_bicubic2d_backward_ops.h>
#include <ATen/ops/upsample_bicubic2d_meta_dispatch.h>
#include <ATen/ops/upsample_bicubic2d_ops.h>
#include <ATen/ops/upsample_linear1d_backward_meta_dispatch.h>
#include <ATen/ops/upsample_linear1d_backward_ops.h>
#include <ATen/ops/upsample_linear1d_meta_dispatch.h>
#include <ATen/ops/upsample_linear1d_ops.h>
#include <ATen/ops/upsample_trilinear3d_backward_meta_dispatch.h>
#include <ATen/ops/upsample_trilinear3d_backward_ops.h>
#include <ATen/ops/upsample_trilinear3d_meta_dispatch.h>
#include <ATen/ops/upsample_trilinear3d_ops.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/MetaCache.h"
#include "csrc/aten/spatial/Pooling.h"
#include "mytorch/cubic.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptD = std::optional<double>;

enum class Kind { Linear, Cubic, LinearAA, CubicAA, AdaptiveAvg };

// ATen's area_pixel_compute_scale and area_pixel_compute_source_index, in the opmath type A.
template <typename A>
A pixelScale(int64_t in, int64_t out, bool align_corners, OptD scale) {
  if (align_corners) return out > 1 ? static_cast<A>(in - 1) / static_cast<A>(out - 1) : A(0);
  return scale.has_value() && *scale > 0 ? static_cast<A>(1.0 / *scale) : static_cast<A>(in) / static_cast<A>(out);
}
template <typename A>
A sourceIndex(A scale, int64_t o, bool align_corners, bool cubic) {
  if (align_corners) return scale * static_cast<A>(o);
  const A src = scale * (static_cast<A>(o) + A(0.5)) - A(0.5);
  return (!cubic && src < A(0)) ? A(0) : src;
}

// Note [Antialiased resampling]
// F.interpolate(antialias=True) (ATen's _upsample_bilinear2d_aa / _upsample_bicubic2d_aa): output o averages the
// inputs within `support` of its center scale * (o + 0.5), support = interp / 2 (interp = 2 linear, 4 cubic)
// widened by the scale when downsampling, each weighted by the filter (the triangle, or Keys' cubic with
// a = -0.5, as PIL) at its distance over the scale, the weights normalised to sum 1: ATen's
// _compute_indices_min_size_weights_aa in A, its window [xmin, xmin + xsize) truncated as ATen's casts do.
template <typename A>
A aaFilter(int interp, A x) {
  x = std::abs(x);
  if (interp == 2) return x < A(1) ? A(1) - x : A(0);
  constexpr A a = A(-0.5);
  if (x < A(1)) return ((a + A(2)) * x - (a + A(3))) * x * x + A(1);
  if (x < A(2)) return ((a * x - A(5) * a) * x + A(8) * a) * x - A(4) * a;
  return A(0);
}

template <typename A>
void antialiasWeights(int interp, int64_t in, int64_t out, A scale, std::vector<A>& w) {
  const A support = scale >= A(1) ? (static_cast<A>(interp) * A(0.5)) * scale : static_cast<A>(interp) * A(0.5);
  const int64_t max_size = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  const A invscale = scale >= A(1) ? A(1) / scale : A(1);
  for (int64_t o = 0; o < out; ++o) {
    const A center = scale * (static_cast<A>(o) + A(0.5));
    const int64_t xmin = std::max(static_cast<int64_t>(center - support + A(0.5)), int64_t(0));
    const int64_t xsize =
        std::clamp(std::min(static_cast<int64_t>(center + support + A(0.5)), in) - xmin, int64_t(0), max_size);
    A total = A(0);
    std::vector<A> row(static_cast<size_t>(xsize));
    for (int64_t j = 0; j < xsize; ++j) {
      row[j] = aaFilter<A>(interp, (static_cast<A>(j + xmin) - center + A(0.5)) * invscale);
      total += row[j];
    }
    for (int64_t j = 0; j < xsize; ++j)
      w[static_cast<size_t>(o * in + xmin + j)] = total != A(0) ? row[j] / total : row[j];
  }
}

// The out x in weights of one dimension, in A, on the host.
template <typename A>
std::vector<A> weights(Kind kind, int64_t in, int64_t out, bool align_corners, OptD scale) {
  std::vector<A> w(static_cast<size_t>(out * in), A(0));
  auto at = [&](int64_t o, int64_t i) -> A& { return w[static_cast<size_t>(o * in + i)]; };
  if (kind == Kind::AdaptiveAvg) {
    for (int64_t o = 0; o < out; ++o) {
      const int64_t s = (o * in) / out, e = ((o + 1) * in + out - 1) / out;
      for (int64_t i = s; i < e; ++i) at(o, i) = A(1) / static_cast<A>(e - s);
    }
    return w;
  }
  const A ratio = pixelScale<A>(in, out, align_corners, scale);
  if (kind == Kind::LinearAA || kind == Kind::CubicAA) {
    antialiasWeights<A>(kind == Kind::CubicAA ? 4 : 2, in, out, ratio, w);
    return w;
  }
  for (int64_t o = 0; o < out; ++o) {
    if (kind == Kind::Linear) {
      if (in == out) {  // ATen copies
        at(o, o) = A(1);
        continue;
      }
      const A real = sourceIndex<A>(ratio, o, align_corners, false);
      const int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
      const A l1 = std::min(std::max(real - static_cast<A>(i0), A(0)), A(1));
      const int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
      at(o, i0) += A(1) - l1;
      at(o, i1) += l1;
    } else {
      const A real = sourceIndex<A>(ratio, o, align_corners, true);
      const int64_t i0 = static_cast<int64_t>(std::floor(real));
      A c[4];
      cubic::coefficients<A>(real - static_cast<A>(i0), c);
      for (int k = 0; k < 4; ++k) at(o, std::min(std::max<int64_t>(i0 - 1 + k, 0), in - 1)) += c[k];
    }
  }
  return w;
}

// W (out x in) of one dimension on `like`'s device, in the opmath dtype `acc`.
Tensor weightMatrix(Kind kind, int64_t in, int64_t out, bool align_corners, OptD scale, c10::ScalarType acc,
                    const Tensor& like) {
  Tensor host = at::empty({out, in}, at::TensorOptions().dtype(acc));
  if (acc == at::kDouble) {
    auto w = weights<double>(kind, in, out, align_corners, scale);
    std::copy(w.begin(), w.end(), host.data_ptr<double>());
  } else {
    auto w = weights<float>(kind, in, out, align_corners, scale);
    std::copy(w.begin(), w.end(), host.data_ptr<float>());
  }
  return host.to(like.device());
}

// Contract the trailing spatial dimensions of x with their matrices (forward: W, sizes in -> out; backward: W^T).
Tensor contract(const Tensor& x, const std::vector<Tensor>& mats, bool backward) {
  Tensor y = x;
  const int64_t k = static_cast<int64_t>(mats.size()), nd = x.dim();
  for (int64_t j = 0; j < k; ++j) {
    const int64_t idx = backward ? j : k - 1 - j;  // the last dimension first forward, the first one first backward
    const int64_t d = nd - k + idx;
    const Tensor& w = mats[idx];
    y = at::matmul(y.movedim(d, -1), backward ? w : w.t()).movedim(-1, d);
  }
  return y;
}

bool interpolable(const Tensor& t) { return kernelFloating(t.scalar_type()); }

// Forward and backward of one operator: the spatial sizes in and out, the scales (outermost first).
Tensor resample(Kind kind, const Tensor& x, at::IntArrayRef in_spatial, at::IntArrayRef out_spatial, bool align_corners,
                const std::vector<OptD>& scales, bool backward) {
  const auto acc = opmathType(x.scalar_type());
  std::vector<Tensor> mats;
  for (size_t i = 0; i < in_spatial.size(); ++i)
    mats.push_back(weightMatrix(kind, in_spatial[i], out_spatial[i], align_corners, scales[i], acc, x));
  return contract(x.to(acc), mats, backward).to(x.scalar_type()).contiguous(x.suggest_memory_format());
}

at::IntArrayRef spatialOf(at::IntArrayRef sizes, size_t k) { return sizes.slice(sizes.size() - k); }

// kMeta: ATen's structured meta function of Op (at::meta::..._outf), called directly for ATen's checks and output
// shape (Note [Structured meta functions] in Glue.h).
template <typename Op, auto kMeta, Kind kKind, typename... Scales>
Tensor& upsampleOut(const Tensor& self, at::IntArrayRef output_size, bool align_corners, Tensor& out,
                    Scales... scales) {
  if (!interpolable(self)) return Fallback<Op>::call(self, output_size, align_corners, scales..., out);
  checkOutDtype(out, self.scalar_type());
  Tensor meta_out = metaLike(out);
  kMeta(metaLike(self), output_size, align_corners, scales..., meta_out);
  if (meta_out.numel() == 0) {
    at::native::resize_output(out, meta_out.sizes());
    return out;
  }
  const size_t k = output_size.size();
  return assignOut(out,
                   resample(kKind, self, spatialOf(self.sizes(), k), output_size, align_corners, {scales...}, false));
}

template <typename Op, auto kMeta, Kind kKind, typename... Scales>
Tensor& upsampleBackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                            bool align_corners, Tensor& grad_input, Scales... scales) {
  if (!interpolable(grad))
    return Fallback<Op>::call(grad, output_size, input_size, align_corners, scales..., grad_input);
  checkOutDtype(grad_input, grad.scalar_type());
  Tensor meta_in = metaLike(grad_input);
  kMeta(metaLike(grad), output_size, input_size, align_corners, scales..., meta_in);
  if (grad.numel() == 0) return assignOut(grad_input, at::zeros(input_size, grad.options()));
  const size_t k = output_size.size();
  return assignOut(grad_input,
                   resample(kKind, grad, spatialOf(input_size, k), output_size, align_corners, {scales...}, true));
}

Tensor& linear1dOut(const Tensor& self, at::IntArrayRef output_size, bool align_corners, OptD s, Tensor& out) {
  return upsampleOut<at::_ops::upsample_linear1d_out, &at::meta::upsample_linear1d_outf, Kind::Linear>(
      self, output_size, align_corners, out, s);
}
Tensor& linear1dBackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                            bool align_corners, OptD s, Tensor& grad_input) {
  return upsampleBackwardOut<at::_ops::upsample_linear1d_backward_grad_input,
                             &at::meta::upsample_linear1d_backward_outf, Kind::Linear>(grad, output_size, input_size,
                                                                                       align_corners, grad_input, s);
}
Tensor& trilinear3dOut(const Tensor& self, at::IntArrayRef output_size, bool align_corners, OptD sd, OptD sh, OptD sw,
                       Tensor& out) {
  return upsampleOut<at::_ops::upsample_trilinear3d_out, &at::meta::upsample_trilinear3d_outf, Kind::Linear>(
      self, output_size, align_corners, out, sd, sh, sw);
}
Tensor& trilinear3dBackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                               bool align_corners, OptD sd, OptD sh, OptD sw, Tensor& grad_input) {
  return upsampleBackwardOut<at::_ops::upsample_trilinear3d_backward_grad_input,
                             &at::meta::upsample_trilinear3d_backward_outf, Kind::Linear>(
      grad, output_size, input_size, align_corners, grad_input, sd, sh, sw);
}
Tensor& bicubic2dOut(const Tensor& self, at::IntArrayRef output_size, bool align_corners, OptD sh, OptD sw,
                     Tensor& out) {
  return upsampleOut<at::_ops::upsample_bicubic2d_out, &at::meta::upsample_bicubic2d_outf, Kind::Cubic>(
      self, output_size, align_corners, out, sh, sw);
}
Tensor& bicubic2dBackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                             bool align_corners, OptD sh, OptD sw, Tensor& grad_input) {
  return upsampleBackwardOut<at::_ops::upsample_bicubic2d_backward_grad_input,
                             &at::meta::upsample_bicubic2d_backward_outf, Kind::Cubic>(
      grad, output_size, input_size, align_corners, grad_input, sh, sw);
}
Tensor& bilinear2dAaOut(const Tensor& self, at::IntArrayRef output_size, bool align_corners, OptD sh, OptD sw,
                        Tensor& out) {
  return upsampleOut<at::_ops::_upsample_bilinear2d_aa_out, &at::meta::_upsample_bilinear2d_aa_outf, Kind::LinearAA>(
      self, output_size, align_corners, out, sh, sw);
}
Tensor& bilinear2dAaBackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                                bool align_corners, OptD sh, OptD sw, Tensor& grad_input) {
  return upsampleBackwardOut<at::_ops::_upsample_bilinear2d_aa_backward_grad_input,
                             &at::meta::_upsample_bilinear2d_aa_backward_outf, Kind::LinearAA>(
      grad, output_size, input_size, align_corners, grad_input, sh, sw);
}
Tensor& bicubic2dAaOut(const Tensor& self, at::IntArrayRef output_size, bool align_corners, OptD sh, OptD sw,
                       Tensor& out) {
  return upsampleOut<at::_ops::_upsample_bicubic2d_aa_out, &at::meta::_upsample_bicubic2d_aa_outf, Kind::CubicAA>(
      self, output_size, align_corners, out, sh, sw);
}
Tensor& bicubic2dAaBackwardOut(const Tensor& grad, at::IntArrayRef output_size, at::IntArrayRef input_size,
                               bool align_corners, OptD sh, OptD sw, Tensor& grad_input) {
  return upsampleBackwardOut<at::_ops::_upsample_bicubic2d_aa_backward_grad_input,
                             &at::meta::_upsample_bicubic2d_aa_backward_outf, Kind::CubicAA>(
      grad, output_size, input_size, align_corners, grad_input, sh, sw);
}

// Note [Adaptive average pooling in 3-D]
// Two ways: the spatial family's direct windows (a pass over each output's window, Pooling.h) or the GEMMs of
// Note [Resampling by weight matrices]. The GEMMs' per-call work (three weight matrices, three matmuls) costs 4x
// ATen's time on small inputs, and the windows' scalar loops lose to them on large inputs with large outputs, so the
// windows take inputs under 2^20 elements and outputs of at most 64 positions. Measured in one process on this
// machine (forward / backward ratio to the CPU, windows against GEMMs): 8^4 -> (5, 7, 4) 0.92/0.90 vs 0.25/0.31;
// 2 x 4 x 16^3 -> 8^3 0.78/0.99 vs 0.44/0.46; 4 x 8 x 16^3 -> 3^3 0.97/1.02 vs 0.50/0.19; 4 x 16 x 16 x 32^2 ->
// (8, 16, 16) 0.78/1.22 vs 1.28/1.20; 4 x 32 x 32^3 -> (7, 9, 11) 0.95/1.15 vs 1.36/1.78.
bool pool3dByWindows(const Tensor& self, at::IntArrayRef out_spatial) {
  return self.numel() < (int64_t(1) << 20) || c10::multiply_integers(out_spatial) <= 64;
}

// 3-D adaptive average pooling: (N, C,) D, H, W -> output_size.
Tensor adaptiveAvgPool3d(const Tensor& self, at::IntArrayRef output_size) {
  Tensor shape = cachedMeta(
      "_adaptive_avg_pool3d",
      [&] { return at::_ops::_adaptive_avg_pool3d::call(metaLike(self), c10::fromIntArrayRefSlow(output_size)); }, self,
      output_size);
  if (!interpolable(self)) return Fallback<at::_ops::_adaptive_avg_pool3d>::call(self, output_size);
  if (shape.numel() == 0) return at::empty(shape.sizes(), self.options());
  if (pool3dByWindows(self, output_size))
    return adaptiveAvgPool3dWindows(self, output_size,
                                    at::empty_strided(shape.sizes(), shape.strides(), self.options()));
  return resample(Kind::AdaptiveAvg, self, spatialOf(self.sizes(), 3), output_size, false, {{}, {}, {}}, false);
}

Tensor adaptiveAvgPool3dBackward(const Tensor& grad, const Tensor& self) {
  if (!interpolable(self) || grad.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::_adaptive_avg_pool3d_backward>::call(grad, self);
  cachedMeta(
      "_adaptive_avg_pool3d_backward",
      [&] { return at::_ops::_adaptive_avg_pool3d_backward::call(metaLike(grad), metaLike(self)); }, grad, self);
  if (grad.numel() == 0 || self.numel() == 0) return at::zeros(self.sizes(), self.options());
  if (pool3dByWindows(self, spatialOf(grad.sizes(), 3))) return adaptiveAvgPool3dWindowsBackward(grad, self);
  return resample(Kind::AdaptiveAvg, grad, spatialOf(self.sizes(), 3), spatialOf(grad.sizes(), 3), false, {{}, {}, {}},
                  true);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "upsample_linear1d.out", linear1dOut);
  MT_IMPL(m, "upsample_linear1d_backward.grad_input", linear1dBackwardOut);
  MT_IMPL(m, "upsample_trilinear3d.out", trilinear3dOut);
  MT_IMPL(m, "upsample_trilinear3d_backward.grad_input", trilinear3dBackwardOut);
  MT_IMPL(m, "upsample_bicubic2d.out", bicubic2dOut);
  MT_IMPL(m, "upsample_bicubic2d_backward.grad_input", bicubic2dBackwardOut);
  MT_IMPL(m, "_upsample_bilinear2d_aa.out", bilinear2dAaOut);
  MT_IMPL(m, "_upsample_bilinear2d_aa_backward.grad_input", bilinear2dAaBackwardOut);
  MT_IMPL(m, "_upsample_bicubic2d_aa.out", bicubic2dAaOut);
  MT_IMPL(m, "_upsample_bicubic2d_aa_backward.grad_input", bicubic2dAaBackwardOut);
  MT_IMPL(m, "_adaptive_avg_pool3d", adaptiveAvgPool3d);
  MT_IMPL(m, "_adaptive_avg_pool3d_backward", adaptiveAvgPool3dBackward);
}

} // namespace mytorch
