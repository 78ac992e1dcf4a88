// Op tables: LayerNorm and RMSNorm on the fused row-normalisation kernels (Note [Fused LayerNorm]).
//  - aten: native_layer_norm and its backward (so F.layer_norm / nn.LayerNorm), _fused_rms_norm and its
//    backward, and rms_norm itself: torch 2.11-2.13 send F.rms_norm on a PrivateUse1 tensor to the
//    composite (pow, mean, rsqrt, mul: five kernels and their backwards), so rms_norm is registered at
//    AutogradPrivateUse1 (and PrivateUse1, for inference mode) to route to _fused_rms_norm, whose autograd
//    formula is aten's own.
//  - the forward the residual add + norm ops share (rowNormForward, LayerNorm.h; their glue: csrc/ops/AddNorm.cpp).
#include <ATen/core/Tensor.h>
#include <ATen/ops/_fused_rms_norm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/rms_norm_compositeimplicitautograd_dispatch.h>
#include <ATen/ops/zeros.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <limits>

#include "csrc/aten/nn/LayerNorm.h"
#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/core/Runtime.h"
#include "mytorch/layernorm.h"

namespace mytorch {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

// Rows and columns of a norm over the trailing `normalized_shape`, with ATen's checks.
std::pair<int64_t, int64_t> rowsCols(const Tensor& x, at::IntArrayRef normalized_shape, const char* op) {
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  TORCH_CHECK(nd >= 1, op,
              ": expected normalized_shape to be at least 1-dimensional, i.e., containing at least one "
              "element, but got normalized_shape = ",
              normalized_shape);
  TORCH_CHECK(x.dim() >= nd && x.sizes().slice(x.dim() - nd).equals(normalized_shape),
              "Given normalized_shape=", normalized_shape, ", expected input with shape [*", normalized_shape,
              "], but got input of size", x.sizes());
  TORCH_CHECK(kernelFloating(x.scalar_type()), op, ": expected a floating point input, but got ", x.scalar_type());
  int64_t cols = 1;
  for (int64_t s : normalized_shape) cols *= s;
  return {cols == 0 ? 0 : x.numel() / cols, cols};
}

std::vector<int64_t> statShape(const Tensor& x, size_t nd) {
  std::vector<int64_t> s(x.sizes().begin(), x.sizes().end() - static_cast<int64_t>(nd));
  s.insert(s.end(), nd, 1);
  return s;
}

c10::ScalarType paramDtype(const Tensor& x, const Tensor& w, const Tensor& b, int64_t cols, const char* op) {
  c10::ScalarType p = w.defined() ? w.scalar_type() : b.defined() ? b.scalar_type() : x.scalar_type();
  for (const Tensor& t : {w, b}) {
    if (!t.defined()) continue;
    TORCH_CHECK(t.numel() == cols, op, ": expected weight and bias with ", cols, " elements, but got ", t.sizes());
    TORCH_CHECK(t.scalar_type() == p, op, ": expected weight and bias of one dtype, but got ", w.scalar_type(), " and ",
                b.scalar_type());
  }
  TORCH_CHECK(p == x.scalar_type() || (p == at::kFloat && x.scalar_type() != at::kDouble), op,
              ": expected parameters of dtype ", x.scalar_type(), " or Float, but got ", p);
  return p;
}

RowNormArgs argsFor(bool rms, const Tensor& x, const Tensor& w, const Tensor& b, int64_t rows, int64_t cols,
                    c10::ScalarType p) {
  RowNormArgs a;
  a.rms = rms;
  a.dtype = toKernelDType(x.scalar_type());
  a.param_dtype = toKernelDType(p);
  a.rows = rows;
  a.cols = cols;
  a.x = x.data_ptr();
  a.weight = dataOrNull(w);
  a.bias = dataOrNull(b);
  return a;
}

} // namespace

std::tuple<Tensor, Tensor, Tensor, Tensor> rowNormForward(bool rms, const Tensor& input, const Tensor& residual,
                                                          at::IntArrayRef normalized_shape, const OptT& weight,
                                                          const OptT& bias, double eps, const char* op) {
  auto [rows, cols] = rowsCols(input, normalized_shape, op);
  Tensor x = input.contiguous(), w = contiguousIfDefined(weight), b = rms ? Tensor() : contiguousIfDefined(bias);
  const auto p = paramDtype(x, w, b, cols, op);
  const auto acc = opmathType(x.scalar_type());
  Tensor r, sum;
  if (residual.defined()) {
    TORCH_CHECK(residual.sizes() == input.sizes() && residual.scalar_type() == input.scalar_type() &&
                    residual.device() == input.device(),
                op, ": expected a residual like the input (", input.sizes(), " ", input.scalar_type(), "), but got ",
                residual.sizes(), " ", residual.scalar_type(), " on ", residual.device());
    r = residual.contiguous();
    sum = at::empty(x.sizes(), x.options());
  }
  Tensor y = at::empty(x.sizes(), x.options());
  Tensor mean = rms ? Tensor() : at::empty(statShape(x, normalized_shape.size()), x.options().dtype(acc));
  Tensor rstd = at::empty(statShape(x, normalized_shape.size()), x.options().dtype(acc));
  if (rows > 0 && cols > 0) {
    RowNormArgs a = argsFor(rms, x, w, b, rows, cols, p);
    a.eps = eps;
    a.residual = dataOrNull(r);
    a.sum = dataOrNull(sum);
    a.y = y.data_ptr();
    a.mean = dataOrNull(mean);
    a.rstd = rstd.data_ptr();
    c10::DeviceGuard guard(x.device());
    MT_RT_CHECK(kernels::layernorm_forward(a, streamFor(x)));
  } else if (rows > 0) {  // an empty normalized shape: NaN statistics, as ATen
    if (mean.defined()) mean.fill_(std::numeric_limits<double>::quiet_NaN());
    rstd.fill_(std::numeric_limits<double>::quiet_NaN());
  }
  return {y, mean, rstd, sum};
}

double rmsEps(const Tensor& x, std::optional<double> eps) {
  if (eps.has_value()) return *eps;
  return x.scalar_type() == at::kDouble ? std::numeric_limits<double>::epsilon()
                                        : std::numeric_limits<float>::epsilon();
}

namespace {

// Backward: dx (when wanted), dweight, dbias.
std::tuple<Tensor, Tensor, Tensor> backward(bool rms, const Tensor& grad_out, const Tensor& input,
                                            at::IntArrayRef normalized_shape, const Tensor& mean, const Tensor& rstd,
                                            const OptT& weight, const OptT& bias, std::array<bool, 3> mask,
                                            const char* op) {
  auto [rows, cols] = rowsCols(input, normalized_shape, op);
  Tensor x = input.contiguous(), dy = grad_out.contiguous(), w = contiguousIfDefined(weight),
         b = rms ? Tensor() : contiguousIfDefined(bias);
  TORCH_CHECK(dy.sizes() == x.sizes(), op, ": expected grad_out of shape ", x.sizes(), ", but got ", dy.sizes());
  TORCH_CHECK(dy.scalar_type() == x.scalar_type(), op, ": expected grad_out of dtype ", x.scalar_type(), ", but got ",
              dy.scalar_type());
  const auto p = paramDtype(x, w, b, cols, op);
  const auto acc = opmathType(x.scalar_type());
  Tensor mu = rms ? Tensor() : mean.to(acc).contiguous(), rs = rstd.to(acc).contiguous();
  TORCH_CHECK(rs.numel() == rows && (rms || mu.numel() == rows), op, ": expected statistics with ", rows,
              " elements, but got ", rs.numel());
  Tensor dx = mask[0] ? at::empty(x.sizes(), x.options()) : Tensor();
  Tensor dw = mask[1] && w.defined() ? at::empty(w.sizes(), w.options()) : Tensor();
  Tensor db = mask[2] && b.defined() ? at::empty(b.sizes(), b.options()) : Tensor();
  if (rows > 0 && cols > 0 && (dx.defined() || dw.defined() || db.defined())) {
    RowNormArgs a = argsFor(rms, x, w, b, rows, cols, p);
    a.mean = dataOrNull(mu);
    a.rstd = rs.data_ptr();
    a.dy = dy.data_ptr();
    a.dx = dataOrNull(dx);
    a.dweight = dataOrNull(dw);
    a.dbias = dataOrNull(db);
    c10::DeviceGuard guard(x.device());
    const size_t ws_bytes = kernels::layernorm_workspace_bytes(a);
    Tensor ws = at::empty({static_cast<int64_t>(ws_bytes)}, x.options().dtype(at::kByte));
    a.workspace = ws_bytes ? ws.data_ptr() : nullptr;
    MT_RT_CHECK(kernels::layernorm_backward(a, streamFor(x)));
  } else {
    if (dx.defined()) dx.zero_();
    if (dw.defined()) dw.zero_();
    if (db.defined()) db.zero_();
  }
  return {dx, dw, db};
}

std::tuple<Tensor, Tensor, Tensor> nativeLayerNorm(const Tensor& input, at::IntArrayRef normalized_shape,
                                                   const OptT& weight, const OptT& bias, double eps) {
  auto [y, mean, rstd, sum] =
      rowNormForward(false, input, Tensor(), normalized_shape, weight, bias, eps, "native_layer_norm");
  return {y, mean, rstd};
}

std::tuple<Tensor, Tensor, Tensor> nativeLayerNormBackward(const Tensor& grad_out, const Tensor& input,
                                                           at::IntArrayRef normalized_shape, const Tensor& mean,
                                                           const Tensor& rstd, const OptT& weight, const OptT& bias,
                                                           std::array<bool, 3> mask) {
  return backward(false, grad_out, input, normalized_shape, mean, rstd, weight, bias, mask,
                  "native_layer_norm_backward");
}

std::tuple<Tensor, Tensor> fusedRmsNorm(const Tensor& input, at::IntArrayRef normalized_shape, const OptT& weight,
                                        std::optional<double> eps) {
  auto [y, mean, rstd, sum] = rowNormForward(true, input, Tensor(), normalized_shape, weight, std::nullopt,
                                             rmsEps(input, eps), "_fused_rms_norm");
  return {y, rstd};
}

std::tuple<Tensor, Tensor> fusedRmsNormBackward(const Tensor& grad_out, const Tensor& input,
                                                at::IntArrayRef normalized_shape, const Tensor& rstd,
                                                const OptT& weight, std::array<bool, 2> mask) {
  auto [dx, dw, db] = backward(true, grad_out, input, normalized_shape, Tensor(), rstd, weight, std::nullopt,
                               {mask[0], mask[1], false}, "_fused_rms_norm_backward");
  return {dx, dw};
}

// rms_norm routed to the fused op (through the dispatcher, so _fused_rms_norm's own autograd applies). Where
// ATen's rms_norm composes it from pointwise ops instead (complex inputs, a weight of another dtype, channels
// last), so does this: ATen's own composite runs, on the device's kernels.
Tensor rmsNorm(const Tensor& input, c10::SymIntArrayRef normalized_shape, const OptT& weight,
               std::optional<double> eps) {
  const auto format = input.suggest_memory_format();
  if (input.is_complex() || (weight && weight->defined() && weight->scalar_type() != input.scalar_type()) ||
      format == c10::MemoryFormat::ChannelsLast || format == c10::MemoryFormat::ChannelsLast3d) {
    return at::compositeimplicitautograd::rms_norm_symint(input, normalized_shape, weight, eps);
  }
  return std::get<0>(at::_fused_rms_norm(input, C10_AS_INTARRAYREF_SLOW(normalized_shape), weight, eps));
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "native_layer_norm", nativeLayerNorm);
  MT_IMPL(m, "native_layer_norm_backward", nativeLayerNormBackward);
  MT_IMPL(m, "_fused_rms_norm", fusedRmsNorm);
  MT_IMPL(m, "_fused_rms_norm_backward", fusedRmsNormBackward);
  MT_IMPL(m, "rms_norm", rmsNorm);
}

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) { m.impl("rms_norm", TORCH_FN(rmsNorm)); }

} // namespace mytorch
