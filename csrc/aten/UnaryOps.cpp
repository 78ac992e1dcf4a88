// Op table: unary pointwise ops on the elementwise engine (out= overloads, plus the predicates ATen has
// no out= form for). Inputs the kernels do not cover take the CPU fallback, counted as such.
#include <ATen/core/Tensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/ops/abs_ops.h>
#include <ATen/ops/bitwise_not_ops.h>
#include <ATen/ops/ceil_ops.h>
#include <ATen/ops/cos_ops.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/le.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <ATen/ops/div.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sgn_ops.h>
#include <ATen/ops/erf_ops.h>
#include <ATen/ops/erfinv_ops.h>
#include <ATen/ops/exp2_ops.h>
#include <ATen/ops/exp_ops.h>
#include <ATen/ops/expm1_ops.h>
#include <ATen/ops/floor_ops.h>
#include <ATen/ops/frac_ops.h>
#include <ATen/ops/isfinite_ops.h>
#include <ATen/ops/isinf_ops.h>
#include <ATen/ops/isnan_ops.h>
#include <ATen/ops/log10_ops.h>
#include <ATen/ops/log1p_ops.h>
#include <ATen/ops/log2_ops.h>
#include <ATen/ops/log_ops.h>
#include <ATen/ops/logical_not_ops.h>
#include <ATen/ops/nan_to_num_ops.h>
#include <ATen/ops/neg_ops.h>
#include <ATen/ops/reciprocal_ops.h>
#include <ATen/ops/round_ops.h>
#include <ATen/ops/rsqrt_ops.h>
#include <ATen/ops/sigmoid_ops.h>
#include <ATen/ops/sign_ops.h>
#include <ATen/ops/sin_ops.h>
#include <ATen/ops/sqrt_ops.h>
#include <ATen/ops/tan_ops.h>
#include <ATen/ops/tanh_ops.h>
#include <ATen/ops/trunc_ops.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "csrc/aten/Checked.h"
#include "csrc/aten/Glue.h"
#include "csrc/aten/Pointwise.h"
#include "csrc/core/Fallback.h"

namespace mytorch {
namespace {

using at::Tensor;
template <typename Op>
using Fallback = at::native::call_fallback_fn<&cpuFallback, Op>;

template <typename F>
Tensor& runUnary(EwOp op, bool to_float, EwResult result, const Tensor& self, Tensor& out, const EwParams& p, F fallback) {
  const auto compute = ewComputeType({self}, to_float);
  if (!ewNative(op, compute, {self})) return ewComplexUnary(op, self, out) ? out : fallback();
  ewRun(op, compute, result, {self}, out, p);
  return out;
}

#define MT_UNARY(fn, OP, EWOP, TO_FLOAT)                                                         \
  Tensor& fn(const Tensor& self, Tensor& out) {                                                \
    return runUnary(EwOp::EWOP, TO_FLOAT, EwResult::Compute, self, out, {},                    \
                    [&]() -> Tensor& { return Fallback<at::_ops::OP>::call(self, out); });     \
  }

MT_UNARY(exp_out, exp_out, Exp, true)
MT_UNARY(exp2_out, exp2_out, Exp2, true)
MT_UNARY(expm1_out, expm1_out, Expm1, true)
MT_UNARY(log_out, log_out, Log, true)
MT_UNARY(log2_out, log2_out, Log2, true)
MT_UNARY(log10_out, log10_out, Log10, true)
MT_UNARY(log1p_out, log1p_out, Log1p, true)
MT_UNARY(sqrt_out, sqrt_out, Sqrt, true)
MT_UNARY(rsqrt_out, rsqrt_out, Rsqrt, true)
MT_UNARY(reciprocal_out, reciprocal_out, Reciprocal, true)
MT_UNARY(sin_out, sin_out, Sin, true)
MT_UNARY(cos_out, cos_out, Cos, true)
MT_UNARY(tan_out, tan_out, Tan, true)
MT_UNARY(tanh_out, tanh_out, Tanh, true)
MT_UNARY(sigmoid_out, sigmoid_out, Sigmoid, true)
MT_UNARY(erf_out, erf_out, Erf, true)
MT_UNARY(erfinv_out, erfinv_out, Erfinv, true)
MT_UNARY(abs_out, abs_out, Abs, false)
MT_UNARY(sign_out, sign_out, Sign, false)
MT_UNARY(floor_out, floor_out, Floor, false)
MT_UNARY(ceil_out, ceil_out, Ceil, false)
MT_UNARY(round_out, round_out, Round, false)
MT_UNARY(trunc_out, trunc_out, Trunc, false)
MT_UNARY(frac_out, frac_out, Frac, false)
MT_UNARY(bitwise_not_out, bitwise_not_out, BitNot, false)

// sgn is sign for real dtypes; for complex, z / |z| (Complex.cpp).
Tensor& sgn_out(const Tensor& self, Tensor& out) {
  return runUnary(EwOp::Sign, false, EwResult::Compute, self, out, {},
                  [&]() -> Tensor& { return Fallback<at::_ops::sgn_out>::call(self, out); });
}

// round(decimals) as ATen: scale by 10^|d|, round half to even, scale back (native kernels, scalars in opmath).
Tensor& round_decimals_out(const Tensor& self, int64_t decimals, Tensor& out) {
  if (decimals == 0) return round_out(self, out);
  checkExactOut(out, self.scalar_type());
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "round_decimals: expected a floating point tensor, got ", self.scalar_type());
  const double ten = std::pow(10.0, static_cast<double>(std::abs(decimals)));
  Tensor r = decimals > 0 ? at::div(at::round(at::mul(self, ten)), ten) : at::mul(at::round(at::div(self, ten)), ten);
  at::native::resize_output(out, r.sizes());
  return out.copy_(r);
}

// relu is clamp_min(x, 0) (NaN stays NaN); fused activations with their backward come with the NN kernels.
Tensor relu(const Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min(self, 0);
}
Tensor& relu_(Tensor& self) {
  TORCH_CHECK(self.scalar_type() != at::kBool, "Boolean inputs not supported for relu");
  return at::clamp_min_(self, 0);
}

// relu's backward (grad where self > threshold, else 0), from native kernels.
Tensor& threshold_backward_out(const Tensor& grad, const Tensor& self, const c10::Scalar& threshold, Tensor& grad_input) {
  Tensor r = at::where(at::le(self, threshold), at::zeros_like(grad), grad);
  at::native::resize_output(grad_input, r.sizes());
  return grad_input.copy_(r);
}

Tensor& neg_out(const Tensor& self, Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool,
              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
              "use the `~` or `logical_not()` operator instead.");
  return runUnary(EwOp::Neg, false, EwResult::Compute, self, out, {},
                  [&]() -> Tensor& { return Fallback<at::_ops::neg_out>::call(self, out); });
}

Tensor& logical_not_out(const Tensor& self, Tensor& out) {
  return runUnary(EwOp::LogicalNot, false, EwResult::Bool, self, out, {},
                  [&]() -> Tensor& { return Fallback<at::_ops::logical_not_out>::call(self, out); });
}

Tensor& nan_to_num_out(const Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                       std::optional<double> neginf, Tensor& out) {
  EwParams p;
  p.nan = nan.value_or(0.0);
  double hi = std::numeric_limits<double>::max(), lo = std::numeric_limits<double>::lowest();
  switch (self.scalar_type()) {
    case at::kFloat: hi = std::numeric_limits<float>::max(); lo = std::numeric_limits<float>::lowest(); break;
    case at::kHalf: hi = 65504.0; lo = -65504.0; break;
    case at::kBFloat16: hi = 3.3895313892515355e38; lo = -3.3895313892515355e38; break;
    default: break;
  }
  p.posinf = posinf.value_or(hi);
  p.neginf = neginf.value_or(lo);
  return runUnary(EwOp::NanToNum, false, EwResult::Compute, self, out, p,
                  [&]() -> Tensor& { return Fallback<at::_ops::nan_to_num_out>::call(self, nan, posinf, neginf, out); });
}

#define MT_PREDICATE(fn, OP, EWOP)                                                               \
  Tensor fn(const Tensor& self) {                                                              \
    Tensor out = at::empty(self.sizes(), self.options().dtype(at::kBool));                     \
    const auto compute = self.scalar_type();                                                   \
    if (!ewNative(EwOp::EWOP, compute, {self})) return Fallback<at::_ops::OP>::call(self);     \
    ewRun(EwOp::EWOP, compute, EwResult::Bool, {self}, out);                                   \
    return out;                                                                                \
  }

MT_PREDICATE(isnan, isnan, IsNan)
MT_PREDICATE(isinf, isinf, IsInf)
MT_PREDICATE(isfinite, isfinite, IsFinite)

// isneginf / isposinf (used by the math SDPA path's safe softmax): comparisons with -inf / +inf on the
// native kernels; integers and bools are never infinite.
Tensor& isInfSigned(const Tensor& self, bool negative, Tensor& out) {
  TORCH_CHECK(!self.is_complex(), negative ? "isneginf" : "isposinf", " does not support complex inputs.");
  TORCH_CHECK(out.scalar_type() == at::kBool, negative ? "isneginf" : "isposinf", " does not support non-boolean outputs.");
  at::native::resize_output(out, self.sizes());
  if (!at::isFloatingType(self.scalar_type())) return out.fill_(false);
  return at::eq_out(out, self, negative ? -std::numeric_limits<double>::infinity() : std::numeric_limits<double>::infinity());
}
Tensor& isneginfOut(const Tensor& self, Tensor& out) { return isInfSigned(self, true, out); }
Tensor& isposinfOut(const Tensor& self, Tensor& out) { return isInfSigned(self, false, out); }

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "exp.out", exp_out);
  MT_IMPL(m, "exp2.out", exp2_out);
  MT_IMPL(m, "expm1.out", expm1_out);
  MT_IMPL(m, "log.out", log_out);
  MT_IMPL(m, "log2.out", log2_out);
  MT_IMPL(m, "log10.out", log10_out);
  MT_IMPL(m, "log1p.out", log1p_out);
  MT_IMPL(m, "sqrt.out", sqrt_out);
  MT_IMPL(m, "rsqrt.out", rsqrt_out);
  MT_IMPL(m, "reciprocal.out", reciprocal_out);
  MT_IMPL(m, "sin.out", sin_out);
  MT_IMPL(m, "cos.out", cos_out);
  MT_IMPL(m, "tan.out", tan_out);
  MT_IMPL(m, "tanh.out", tanh_out);
  MT_IMPL(m, "sigmoid.out", sigmoid_out);
  MT_IMPL(m, "erf.out", erf_out);
  MT_IMPL(m, "erfinv.out", erfinv_out);
  MT_IMPL(m, "abs.out", abs_out);
  MT_IMPL(m, "sign.out", sign_out);
  MT_IMPL(m, "floor.out", floor_out);
  MT_IMPL(m, "ceil.out", ceil_out);
  MT_IMPL(m, "round.out", round_out);
  MT_IMPL(m, "trunc.out", trunc_out);
  MT_IMPL(m, "frac.out", frac_out);
  MT_IMPL(m, "bitwise_not.out", bitwise_not_out);
  MT_IMPL(m, "neg.out", neg_out);
  MT_IMPL(m, "sgn.out", sgn_out);
  MT_IMPL(m, "round.decimals_out", round_decimals_out);
  MT_IMPL(m, "relu", relu);
  MT_IMPL(m, "relu_", relu_);
  MT_IMPL(m, "threshold_backward.grad_input", threshold_backward_out);
  MT_IMPL(m, "logical_not.out", logical_not_out);
  MT_IMPL(m, "nan_to_num.out", nan_to_num_out);
  MT_IMPL(m, "isnan", isnan);
  MT_IMPL(m, "isinf", isinf);
  MT_IMPL(m, "isfinite", isfinite);
  MT_IMPL(m, "isneginf.out", isneginfOut);
  MT_IMPL(m, "isposinf.out", isposinfOut);
}

} // namespace mytorch
