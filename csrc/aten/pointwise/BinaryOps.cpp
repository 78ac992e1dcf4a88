// Op table: the glue of the binary and ternary pointwise rows marked Hand in the pointwise table (alpha, rounding
// modes, Scalar overloads, clamp bounds, where's mask, lerp/addcmul/addcdiv), on the elementwise engine (out=
// overloads: ATen routes the functional and in-place forms through them). The Table rows register in
// PointwiseTable.cpp. Complex add/sub/mul are composed on real views (Complex.cpp); other inputs the kernels do
// not cover take the CPU fallback, counted as such.
#include <ATen/core/Tensor.h>
#include <ATen/ops/add_ops.h>
#include <ATen/ops/addcdiv_ops.h>
#include <ATen/ops/addcmul_ops.h>
#include <ATen/ops/clamp_ops.h>
#include <ATen/ops/clamp_max_ops.h>
#include <ATen/ops/clamp_min_ops.h>
#include <ATen/ops/div_ops.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq_ops.h>
#include <ATen/ops/floor_divide.h>
#include <ATen/ops/ge_ops.h>
#include <ATen/ops/heaviside_ops.h>
#include <ATen/ops/gt_ops.h>
#include <ATen/ops/le_ops.h>
#include <ATen/ops/lerp_ops.h>
#include <ATen/ops/lt_ops.h>
#include <ATen/ops/masked_fill_ops.h>
#include <ATen/ops/ne_ops.h>
#include <ATen/ops/pow_ops.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sub_ops.h>
#include <ATen/ops/where_ops.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/add.h>
#include <ATen/ops/mul.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/aten/glue/Glue.h"
#include "csrc/aten/glue/Pointwise.h"

namespace mytorch {
namespace {

using at::Tensor;
using c10::Scalar;

EwParams withAlpha(const Scalar& alpha) {
  EwParams p;
  if (alpha.isIntegral(true)) {
    p.ialpha = alpha.to<int64_t>();
    p.alpha = static_cast<double>(p.ialpha);
  } else {
    p.alpha = alpha.to<double>();
    p.ialpha = static_cast<int64_t>(p.alpha);
  }
  return p;
}

// The Scalar overloads of the comparisons and of pow (the Tensor ones are Table rows).
template <EwOp op, typename AtenOp>
Tensor& scalarOut(const Tensor& self, const Scalar& other, Tensor& out) {
  return ewOr(op, {self, other}, out, {}, [&]() -> Tensor& { return Fallback<AtenOp>::call(self, other, out); });
}
Tensor& eq_s_out(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Eq, at::_ops::eq_Scalar_out>(s, o, out);
}
Tensor& ne_s_out(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Ne, at::_ops::ne_Scalar_out>(s, o, out);
}
Tensor& lt_s_out(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Lt, at::_ops::lt_Scalar_out>(s, o, out);
}
Tensor& le_s_out(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Le, at::_ops::le_Scalar_out>(s, o, out);
}
Tensor& gt_s_out(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Gt, at::_ops::gt_Scalar_out>(s, o, out);
}
Tensor& ge_s_out(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Ge, at::_ops::ge_Scalar_out>(s, o, out);
}
Tensor& pow_ts_out(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Pow, at::_ops::pow_Tensor_Scalar_out>(s, o, out);
}

// A complex alpha (complex operands only, ATen's alpha_check) scales `other` first: the kernels' alpha is real.
bool complexAlpha(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (!alpha.isComplex()) return false;
  TORCH_CHECK(c10::isComplexType(at::result_type(self, other)),
              "For non-complex input tensors, argument alpha must not be a complex number.");
  return true;
}

Tensor& add_out(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  if (complexAlpha(self, other, alpha)) return at::add_out(out, self, at::mul(other, alpha));
  return ewOr(EwOp::Add, {self, other}, out, withAlpha(alpha),
              [&]() -> Tensor& { return Fallback<at::_ops::add_out>::call(self, other, alpha, out); });
}

Tensor& sub_out(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool || other.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
              "operator instead.");
  if (complexAlpha(self, other, alpha)) return at::sub_out(out, self, at::mul(other, alpha));
  return ewOr(EwOp::Sub, {self, other}, out, withAlpha(alpha),
              [&]() -> Tensor& { return Fallback<at::_ops::sub_out>::call(self, other, alpha, out); });
}

// heaviside refuses operands and an out= of different dtypes (the fallback raises ATen's message).
Tensor& heaviside_out(const Tensor& self, const Tensor& values, Tensor& out) {
  if (self.scalar_type() != values.scalar_type() || out.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::heaviside_out>::call(self, values, out);
  return ewOr(EwOp::Heaviside, {self, values}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::heaviside_out>::call(self, values, out); });
}

// rsub(self, other, alpha) = other - alpha * self: ATen's own definition, on the native sub.
Tensor rsub(const Tensor& self, const Tensor& other, const Scalar& alpha) { return at::sub(other, self, alpha); }

Tensor& div_mode_out(const Tensor& self, const Tensor& other, std::optional<c10::string_view> mode, Tensor& out) {
  EwOp op = EwOp::Div;
  if (mode.has_value()) {
    TORCH_CHECK(*mode == "trunc" || *mode == "floor",
                "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
    op = *mode == "trunc" ? EwOp::DivTrunc : EwOp::DivFloor;
  }
  return ewOr(op, {self, other}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::div_out_mode>::call(self, other, mode, out); });
}

// floor_divide's functional and in-place forms (ATen has no composite for them on PrivateUse1); floor_divide.out
// is the DivFloor row.
Tensor floor_divide(const Tensor& self, const Tensor& other) {
  Tensor out = at::empty({0}, self.options().dtype(ewComputeType(EwOp::DivFloor, {self, other})));
  return at::floor_divide_out(out, self, other);
}
Tensor& floor_divide_(Tensor& self, const Tensor& other) { return at::floor_divide_out(self, self, other); }

// The << and >> operators are aten ops of their own (functional only).
Tensor shift(EwOp op, const Tensor& self, const EwInput& other) {
  const auto compute = ewComputeType(op, {self, other});
  Tensor out = at::empty({0}, self.options().dtype(compute));
  TORCH_CHECK(ewTry(op, {self, other}, out), "mytorch: shifts support integer dtypes, but got ", compute);
  return out;
}
Tensor lshift_scalar(const Tensor& self, const Scalar& other) { return shift(EwOp::Lshift, self, other); }
Tensor lshift_tensor(const Tensor& self, const Tensor& other) { return shift(EwOp::Lshift, self, other); }
Tensor rshift_scalar(const Tensor& self, const Scalar& other) { return shift(EwOp::Rshift, self, other); }
Tensor rshift_tensor(const Tensor& self, const Tensor& other) { return shift(EwOp::Rshift, self, other); }

Tensor& pow_st_out(const Scalar& self, const Tensor& exponent, Tensor& out) {
  return ewOr(EwOp::Pow, {self, exponent}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::pow_Scalar_out>::call(self, exponent, out); });
}

Tensor& where_out(const Tensor& cond, const Tensor& self, const Tensor& other, Tensor& out) {
  TORCH_CHECK(cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
  const auto compute = ewComputeType(EwOp::Where, {self, other});  // the mask takes no part in the promotion
  if (!ewNative(EwOp::Where, compute, {self, other})) {
    if (whereComplex(cond, self, other, out)) return out;
    return Fallback<at::_ops::where_self_out>::call(cond, self, other, out);
  }
  ewRun(EwOp::Where, compute, {cond, self, other}, out);
  return out;
}

Tensor where_self(const Tensor& cond, const Tensor& self, const Tensor& other) {
  Tensor out = at::empty({0}, self.options().dtype(ewComputeType(EwOp::Where, {self, other})));
  return where_out(cond, self, other, out);
}

Tensor& masked_fill_scalar(Tensor& self, const Tensor& mask, const Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  const auto compute = self.scalar_type();
  if (!ewNative(EwOp::Where, compute, {self, value}))
    return Fallback<at::_ops::masked_fill__Scalar>::call(self, mask, value);
  ewRun(EwOp::Where, compute, {mask, value, self}, self);
  return self;
}

Tensor& masked_fill_tensor(Tensor& self, const Tensor& mask, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return masked_fill_scalar(self, mask, value.item());
}

EwParams clampBounds(const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  EwParams p;
  if (lo.has_value()) {
    p.has_lo = true;
    p.lo = lo->to<double>();
    p.ilo = lo->isFloatingPoint() ? static_cast<int64_t>(p.lo) : lo->to<int64_t>();
  }
  if (hi.has_value()) {
    p.has_hi = true;
    p.hi = hi->to<double>();
    p.ihi = hi->isFloatingPoint() ? static_cast<int64_t>(p.hi) : hi->to<int64_t>();
  }
  return p;
}

Tensor& clamp_out(const Tensor& self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi, Tensor& out) {
  TORCH_CHECK(lo.has_value() || hi.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  std::vector<EwInput> types{self};
  if (lo) types.emplace_back(*lo);
  if (hi) types.emplace_back(*hi);
  const auto compute = ewComputeType(EwOp::ClampScalar, types);
  if (!ewNative(EwOp::ClampScalar, compute, types)) return Fallback<at::_ops::clamp_out>::call(self, lo, hi, out);
  // Bounds are rounded into the compute dtype first, as ATen does.
  std::optional<Scalar> l = lo, h = hi;
  ewRun(EwOp::ClampScalar, compute, {self}, out, clampBounds(l, h));
  return out;
}

Tensor& clamp_min_out(const Tensor& self, const Scalar& lo, Tensor& out) {
  return clamp_out(self, lo, std::nullopt, out);
}
Tensor& clamp_max_out(const Tensor& self, const Scalar& hi, Tensor& out) {
  return clamp_out(self, std::nullopt, hi, out);
}

Tensor& clamp_tensor_out(const Tensor& self, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi,
                         Tensor& out) {
  TORCH_CHECK(lo.has_value() || hi.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  const Tensor l = lo.value_or(Tensor()), h = hi.value_or(Tensor());
  const auto compute = ewComputeType(EwOp::ClampTensor, {self, l, h});
  if (!ewNative(EwOp::ClampTensor, compute, {self, l, h}))
    return Fallback<at::_ops::clamp_Tensor_out>::call(self, lo, hi, out);
  EwParams p;
  p.has_lo = l.defined();
  p.has_hi = h.defined();
  ewRun(EwOp::ClampTensor, compute, {self, l, h}, out, p);
  return out;
}
Tensor& clamp_min_t_out(const Tensor& self, const Tensor& lo, Tensor& out) {
  return clamp_tensor_out(self, lo, std::nullopt, out);
}
Tensor& clamp_max_t_out(const Tensor& self, const Tensor& hi, Tensor& out) {
  return clamp_tensor_out(self, std::nullopt, hi, out);
}

Tensor& lerp_scalar_out(const Tensor& self, const Tensor& end, const Scalar& weight, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  return ewOr(EwOp::Lerp, {self, end, weight}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::lerp_Scalar_out>::call(self, end, weight, out); });
}
Tensor& lerp_tensor_out(const Tensor& self, const Tensor& end, const Tensor& weight, Tensor& out) {
  checkExactOut(out, self.scalar_type());   // ATen builds lerp.Tensor with every dtype equal (lerp.Scalar casts)
  TORCH_CHECK(self.scalar_type() == end.scalar_type() && self.scalar_type() == weight.scalar_type(), "expected dtype ",
              self.scalar_type(), " for `end` and `weight` but got dtypes ", end.scalar_type(), " and ",
              weight.scalar_type());
  return ewOr(EwOp::Lerp, {self, end, weight}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::lerp_Tensor_out>::call(self, end, weight, out); });
}
Tensor& addcmul_out(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, Tensor& out) {
  if (value.isComplex())  // complex arithmetic has no native kernels: the fallback computes it (no real alpha)
    return Fallback<at::_ops::addcmul_out>::call(self, t1, t2, value, out);
  return ewOr(EwOp::Addcmul, {self, t1, t2}, out, withAlpha(value),
              [&]() -> Tensor& { return Fallback<at::_ops::addcmul_out>::call(self, t1, t2, value, out); });
}
Tensor& addcdiv_out(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, Tensor& out) {
  TORCH_CHECK(!(c10::isIntegralType(t1.scalar_type(), true) && c10::isIntegralType(t2.scalar_type(), true)),
              "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform "
              "a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as "
              "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
              "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter "
              "implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  if (value.isComplex()) return Fallback<at::_ops::addcdiv_out>::call(self, t1, t2, value, out);
  return ewOr(EwOp::Addcdiv, {self, t1, t2}, out, withAlpha(value),
              [&]() -> Tensor& { return Fallback<at::_ops::addcdiv_out>::call(self, t1, t2, value, out); });
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  MT_IMPL(m, "add.out", add_out);
  MT_IMPL(m, "sub.out", sub_out);
  MT_IMPL(m, "rsub.Tensor", rsub);
  MT_IMPL(m, "heaviside.out", heaviside_out);
  MT_IMPL(m, "div.out_mode", div_mode_out);
  MT_IMPL(m, "floor_divide", floor_divide);
  MT_IMPL(m, "floor_divide_.Tensor", floor_divide_);
  MT_IMPL(m, "pow.Tensor_Scalar_out", pow_ts_out);
  MT_IMPL(m, "pow.Scalar_out", pow_st_out);
  MT_IMPL(m, "__lshift__.Scalar", lshift_scalar);
  MT_IMPL(m, "__lshift__.Tensor", lshift_tensor);
  MT_IMPL(m, "__rshift__.Scalar", rshift_scalar);
  MT_IMPL(m, "__rshift__.Tensor", rshift_tensor);
  MT_IMPL(m, "eq.Scalar_out", eq_s_out);
  MT_IMPL(m, "ne.Scalar_out", ne_s_out);
  MT_IMPL(m, "lt.Scalar_out", lt_s_out);
  MT_IMPL(m, "le.Scalar_out", le_s_out);
  MT_IMPL(m, "gt.Scalar_out", gt_s_out);
  MT_IMPL(m, "ge.Scalar_out", ge_s_out);
  MT_IMPL(m, "where.self_out", where_out);
  MT_IMPL(m, "where.self", where_self);
  MT_IMPL(m, "masked_fill_.Scalar", masked_fill_scalar);
  MT_IMPL(m, "masked_fill_.Tensor", masked_fill_tensor);
  MT_IMPL(m, "clamp.out", clamp_out);
  MT_IMPL(m, "clamp.Tensor_out", clamp_tensor_out);
  MT_IMPL(m, "clamp_min.out", clamp_min_out);
  MT_IMPL(m, "clamp_max.out", clamp_max_out);
  MT_IMPL(m, "clamp_min.Tensor_out", clamp_min_t_out);
  MT_IMPL(m, "clamp_max.Tensor_out", clamp_max_t_out);
  MT_IMPL(m, "lerp.Scalar_out", lerp_scalar_out);
  MT_IMPL(m, "lerp.Tensor_out", lerp_tensor_out);
  MT_IMPL(m, "addcmul.out", addcmul_out);
  MT_IMPL(m, "addcdiv.out", addcdiv_out);
}

} // namespace mytorch
