// Op table: the FFT family (_fft_c2c, _fft_r2c, _fft_c2r: torch.fft, stft, istft) on mytorch (Note [FFT family] in
// kernels/include/mytorch/fft.h). cuda: cuFFT over packed copies, at most three dimensions a plan, as ATen's
// CUDA FFT; sim: torch's CPU FFT on host views of the same buffers. Half and complex32 (which the CPU refuses) take
// the counted CPU fallback.
#include <ATen/WrapDimUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_fft_c2c.h>
#include <ATen/ops/_fft_c2c_ops.h>
#include <ATen/ops/_fft_c2r.h>
#include <ATen/ops/_fft_c2r_ops.h>
#include <ATen/ops/_fft_r2c.h>
#include <ATen/ops/_fft_r2c_ops.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/conj_physical.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/remainder.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/HostRoute.h"
#include "csrc/aten/glue/MetaCache.h"
#include "csrc/core/Runtime.h"
#include "csrc/core/Stream.h"
#include "mytorch/fft.h"

namespace mytorch {
namespace {

using at::Tensor;

// The precisions cuFFT and the CPU library share: float32 and float64 (complex64 and complex128).
bool fftDtype(const Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kDouble || s == at::kComplexFloat || s == at::kComplexDouble;
}

std::vector<int64_t> wrapDims(at::IntArrayRef dim, int64_t ndim) {
  std::vector<int64_t> d(dim.begin(), dim.end());
  for (auto& x : d) x = at::maybe_wrap_dim(x, ndim);
  return d;
}

// ---- cuda: cuFFT on packed copies -------------------------------------------------------------------------------

// One cuFFT call over up to three dimensions `dims` of x: x is permuted so that the other dimensions lead (the batch)
// and `dims` come last in their order, copied contiguous (a C2R input is always a fresh copy: cuFFT may overwrite
// it), transformed, and permuted back. `last_out` is the output's size on the last of `dims` (C2R's real length,
// R2C's one-sided length), `signal` the transform's sizes.
Tensor execFft(FftKind kind, const Tensor& x, const std::vector<int64_t>& dims, bool forward, int64_t last_out) {
  const int64_t nd = x.dim();
  std::vector<int64_t> perm;
  std::vector<bool> transformed(nd, false);
  for (int64_t d : dims) transformed[d] = true;
  int64_t batch = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!transformed[d]) {
      perm.push_back(d);
      batch *= x.size(d);
    }
  for (int64_t d : dims) perm.push_back(d);
  Tensor in = x.permute(perm).clone(at::MemoryFormat::Contiguous);
  std::vector<int64_t> out_sizes = in.sizes().vec();
  out_sizes.back() = last_out;
  const auto real = c10::toRealValueType(x.scalar_type());
  const auto out_dtype = kind == FftKind::C2R ? real : c10::toComplexType(real);
  Tensor out = at::empty(out_sizes, x.options().dtype(out_dtype));
  FftArgs a;
  a.kind = kind;
  a.dtype = toKernelDType(real);
  a.rank = static_cast<int>(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) a.n[i] = x.size(dims[i]);
  if (kind == FftKind::C2R) a.n[dims.size() - 1] = last_out;  // the signal is the real side
  a.batch = batch;
  a.in = in.const_data_ptr();
  a.out = out.data_ptr();
  a.forward = forward;
  if (out.numel() > 0 && in.numel() > 0) {
    c10::DeviceGuard guard(x.device());
    MT_RT_CHECK(kernels::fft(a, streamFor(x)));
  }
  std::vector<int64_t> inverse(nd);
  for (int64_t i = 0; i < nd; ++i) inverse[perm[i]] = i;
  return out.permute(inverse);
}

// Complex-to-complex over any number of dimensions: separable, three at a time.
Tensor c2cChunks(Tensor x, const std::vector<int64_t>& dims, bool forward) {
  for (size_t i = 0; i < dims.size(); i += 3) {
    std::vector<int64_t> chunk(dims.begin() + i, dims.begin() + std::min(dims.size(), i + 3));
    x = execFft(FftKind::C2C, x, chunk, forward, x.size(chunk.back()));
  }
  return x;
}

// The full spectrum of a real signal from its one-sided half: X[k] = conj(X[-k]) over every transformed dimension.
Tensor fillConjugate(const Tensor& half, const std::vector<int64_t>& dims, int64_t n) {
  const int64_t last = dims.back(), h = half.size(last);
  if (n - h <= 0) return half;
  Tensor part = half.narrow(last, 1, n - h).flip(last);  // positions n-h .. 1: X[n - k] for k = h .. n-1
  for (size_t i = 0; i + 1 < dims.size(); ++i) {
    const int64_t size = half.size(dims[i]);
    Tensor negated = at::remainder(at::arange(0, -size, -1, half.options().dtype(at::kLong)), size);
    part = at::index_select(part, dims[i], negated);
  }
  return at::cat({half, at::conj_physical(part)}, last);
}

double normScale(int64_t normalization, const Tensor& signal, const std::vector<int64_t>& dims) {
  double n = 1;
  for (int64_t d : dims) n *= static_cast<double>(signal.size(d));
  if (normalization == 1) return 1.0 / std::sqrt(n);
  if (normalization == 2) return 1.0 / n;
  return 1.0;
}

Tensor normalized(Tensor x, double scale) { return scale == 1.0 ? x : x.mul_(scale); }

// The sim's host route (Note [Sim host route]): the CPU's FFT operator itself on a host view of the input (its checks,
// its result and that result's layout, which is what a CPU user gets), its result moved into device memory. The
// CPU's out= kernels are that same call and a copy, and the meta call they needed for the out='s layout ran torch's
// Python meta kernel: 15-25 us a call, three times the CPU's whole transform of 20 x 20 (Note [Cached meta results]).
// An empty input takes the meta path below instead: an empty result, as torch.cuda gives (MKL refuses to plan it).
Tensor onDevice(const Tensor& host_result, const Tensor& like) {
  Tensor out =
      at::empty_strided(host_result.sizes(), host_result.strides(), host_result.options().device(like.device()));
  if (host_result.numel() > 0) hostView(out).copy_(host_result);
  return out;
}

// ---- the operators ----------------------------------------------------------------------------------------------

Tensor fftC2c(const Tensor& self, at::IntArrayRef dim, int64_t normalization, bool forward) {
  if (!fftDtype(self)) return Fallback<at::_ops::_fft_c2c>::call(self, dim, normalization, forward);
  if (self.numel() > 0 && simHostRoute(HostRoute::Fft))
    return onDevice(at::_fft_c2c(hostView(self), dim, normalization, forward), self);
  Tensor shape = cachedMeta(  // ATen's checks and result layout
      "_fft_c2c", [&] { return at::_fft_c2c(metaLike(self), dim, normalization, forward); }, self, dim, normalization,
      forward);
  if (self.numel() == 0 || dim.empty()) return emptyLike(shape, self).copy_(self);
  const auto dims = wrapDims(dim, self.dim());
  return normalized(c2cChunks(self, dims, forward), normScale(normalization, self, dims));
}

Tensor fftR2c(const Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided) {
  if (!fftDtype(self) || self.is_complex())
    return Fallback<at::_ops::_fft_r2c>::call(self, dim, normalization, onesided);
  if (self.numel() > 0 && simHostRoute(HostRoute::Fft))
    return onDevice(at::_fft_r2c(hostView(self), dim, normalization, onesided), self);
  Tensor shape = cachedMeta(
      "_fft_r2c", [&] { return at::_fft_r2c(metaLike(self), dim, normalization, onesided); }, self, dim, normalization,
      onesided);
  if (shape.numel() == 0) return emptyLike(shape, self);
  const auto dims = wrapDims(dim, self.dim());
  const int64_t split = std::max<int64_t>(0, static_cast<int64_t>(dims.size()) - 3);
  std::vector<int64_t> lead(dims.begin(), dims.begin() + split), tail(dims.begin() + split, dims.end());
  const int64_t n = self.size(dims.back());
  Tensor y = execFft(FftKind::R2C, self, tail, true, n / 2 + 1);
  y = c2cChunks(y, lead, true);
  if (!onesided) y = fillConjugate(y, dims, n);
  y = normalized(y, normScale(normalization, self, dims));
  if (y.strides().equals(shape.strides())) return y;
  Tensor out = emptyLike(shape, self);  // ATen's layout (its meta function's), which an out= resized from it takes
  return out.copy_(y);
}

Tensor fftC2r(const Tensor& self, at::IntArrayRef dim, int64_t normalization, c10::SymInt last_dim_size_sym) {
  const int64_t last_dim_size = last_dim_size_sym.guard_int(__FILE__, __LINE__);
  if (!fftDtype(self) || !self.is_complex())
    return Fallback<at::_ops::_fft_c2r>::call(self, dim, normalization, last_dim_size);
  Tensor shape = cachedMeta(
      "_fft_c2r", [&] { return at::_fft_c2r(metaLike(self), dim, normalization, last_dim_size); }, self, dim,
      normalization, last_dim_size);
  const auto wrapped = wrapDims(dim, self.dim());
  if (!wrapped.empty() && self.size(wrapped.back()) < last_dim_size / 2 + 1)  // a short half spectrum: the CPU's call
    return Fallback<at::_ops::_fft_c2r>::call(self, dim, normalization, last_dim_size);
  if (self.numel() > 0 && simHostRoute(HostRoute::Fft))
    return onDevice(at::_fft_c2r(hostView(self), dim, normalization, last_dim_size), self);
  if (shape.numel() == 0) return emptyLike(shape, self);
  const auto& dims = wrapped;
  const int64_t split = std::max<int64_t>(0, static_cast<int64_t>(dims.size()) - 3);
  std::vector<int64_t> lead(dims.begin(), dims.begin() + split), tail(dims.begin() + split, dims.end());
  // The input's half spectrum may be longer than the output needs (ATen trims it to last_dim_size / 2 + 1).
  Tensor x = self.narrow(dims.back(), 0, std::min(self.size(dims.back()), last_dim_size / 2 + 1));
  x = c2cChunks(x, lead, false);
  Tensor y = execFft(FftKind::C2R, x, tail, false, last_dim_size);
  return normalized(y, normScale(normalization, y, dims));
}

// An out= of the result's dtype is resized and written (assignOut); one of another dtype goes to the CPU's out=
// kernel, whose casting rules (and refusals) it then gets.
Tensor& fftC2cOut(const Tensor& self, at::IntArrayRef dim, int64_t normalization, bool forward, Tensor& out) {
  if (!fftDtype(self) || out.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::_fft_c2c_out>::call(self, dim, normalization, forward, out);
  return assignOut(out, fftC2c(self, dim, normalization, forward), OutLayout::Contiguous);
}

Tensor& fftR2cOut(const Tensor& self, at::IntArrayRef dim, int64_t normalization, bool onesided, Tensor& out) {
  if (!fftDtype(self) || self.is_complex() || out.scalar_type() != c10::toComplexType(self.scalar_type()))
    return Fallback<at::_ops::_fft_r2c_out>::call(self, dim, normalization, onesided, out);
  return assignOut(out, fftR2c(self, dim, normalization, onesided), OutLayout::Contiguous);
}

Tensor& fftC2rOut(const Tensor& self, at::IntArrayRef dim, int64_t normalization, c10::SymInt last_dim_size,
                  Tensor& out) {
  if (!fftDtype(self) || !self.is_complex() || out.scalar_type() != c10::toRealValueType(self.scalar_type()))
    return Fallback<at::_ops::_fft_c2r_out>::call(self, dim, normalization, last_dim_size.guard_int(__FILE__, __LINE__),
                                                  out);
  return assignOut(out, fftC2r(self, dim, normalization, std::move(last_dim_size)), OutLayout::Contiguous);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "_fft_c2c", fftC2c);
  MT_IMPL(m, "_fft_c2c.out", fftC2cOut);
  MT_IMPL(m, "_fft_r2c", fftR2c);
  MT_IMPL(m, "_fft_r2c.out", fftR2cOut);
  MT_IMPL(m, "_fft_c2r", fftC2r);
  MT_IMPL(m, "_fft_c2r.out", fftC2rOut);
}

} // namespace mytorch
