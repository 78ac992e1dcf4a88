// Op table: the glue of the binary and ternary pointwise rows marked Hand in the pointwise table (alpha, rounding
// modes, Scalar overloads, clamp bounds, where's mask, lerp/addcmul/addcdiv), on the elementwise engine (out=
// overloads: ATen routes the functional and in-place forms through them). The Table rows register in
// PointwiseTable.cpp. Complex add/sub/mul are composed on real views (Complex.cpp); other inputs the kernels do
// not cover take the CPU fallback, counted as such.
#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/ops/exp2.h>
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
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/add.h>
#include <ATen/ops/add_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/sub_compositeexplicitautogradnonfunctional_dispatch.h>
#include <ATen/ops/mul.h>
#include <torch/library.h>

#include "csrc/core/Checked.h"
#include "csrc/core/Runtime.h"
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
Tensor& eqSOut(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Eq, at::_ops::eq_Scalar_out>(s, o, out);
}
Tensor& neSOut(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Ne, at::_ops::ne_Scalar_out>(s, o, out);
}
Tensor& ltSOut(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Lt, at::_ops::lt_Scalar_out>(s, o, out);
}
Tensor& leSOut(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Le, at::_ops::le_Scalar_out>(s, o, out);
}
Tensor& gtSOut(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Gt, at::_ops::gt_Scalar_out>(s, o, out);
}
Tensor& geSOut(const Tensor& s, const Scalar& o, Tensor& out) {
  return scalarOut<EwOp::Ge, at::_ops::ge_Scalar_out>(s, o, out);
}
// pow(x, e) for a floating x and the exponents ATen's CPU kernel computes without pow (pow_tensor_scalar_optimized):
// 2 -> x * x, 0.5 -> sqrt, -0.5 -> rsqrt, -1 -> reciprocal, each in opmath and rounded once, as ATen's (x * x is
// pow's correctly rounded result; sqrt differs from pow only at -0 and -inf, where the CPU's is sqrt's; the sim's
// sqrt is correctly rounded, the CPU's vectorised one is not always). The result
// dtype is x's for these exponents. 3 -> (x * x) * x for float and double (ATen's arithmetic, two roundings in the
// dtype; the reduced types, which ATen computes in float and round once, stay on pow, as -2 does). Every other
// call: the Pow row.
bool powSpecial(const Tensor& s, const Scalar& e, Tensor& out) {
  if (!c10::isFloatingType(s.scalar_type()) || e.isComplex() || e.isBoolean()) return false;
  const double v = e.to<double>();
  if (v == 2) return ewTry(EwOp::Mul, {s, s}, out);
  const bool full = s.scalar_type() == at::kFloat || s.scalar_type() == at::kDouble;
  if (v == 3 && full && out.scalar_type() == s.scalar_type() && !out.is_same(s)) {
    return ewTry(EwOp::Mul, {s, s}, out) && ewTry(EwOp::Mul, {out, s}, out);
  }
  if (v == 0.5) return ewTry(EwOp::Sqrt, {s}, out);
  if (v == -0.5) return ewTry(EwOp::Rsqrt, {s}, out);
  if (v == -1) return ewTry(EwOp::Reciprocal, {s}, out);
  return false;
}
// pow(x, 0) and pow(x, 1): ATen's pow_Tensor_Scalar_out fills ones and copies x before any kernel (a
// PowBackward of x ** 2 asks for x ** 1), so no element is computed; a real x, out= of the result dtype.
bool powTrivial(const Tensor& s, const Scalar& e, Tensor& out) {
  if (e.isComplex() || s.is_complex()) return false;
  const double v = e.to<double>();
  if ((v != 0 && v != 1) || out.scalar_type() != at::result_type(s, e)) return false;
  at::native::resize_output(out, s.sizes());
  if (v == 0) out.fill_(1);
  else out.copy_(s);
  return true;
}
Tensor& powTsOut(const Tensor& s, const Scalar& o, Tensor& out) {
  if (powTrivial(s, o, out) || powSpecial(s, o, out)) return out;
  return scalarOut<EwOp::Pow, at::_ops::pow_Tensor_Scalar_out>(s, o, out);
}

// A complex alpha (complex operands only, ATen's alpha_check) scales `other` first: the kernels' alpha is real.
bool complexAlpha(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (!alpha.isComplex()) return false;
  TORCH_CHECK(c10::isComplexType(at::result_type(self, other)),
              "For non-complex input tensors, argument alpha must not be a complex number.");
  return true;
}

Tensor& addOut(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  if (complexAlpha(self, other, alpha)) return at::add_out(out, self, at::mul(other, alpha));
  return ewOr(EwOp::Add, {self, other}, out, withAlpha(alpha),
              [&]() -> Tensor& { return Fallback<at::_ops::add_out>::call(self, other, alpha, out); });
}

Tensor& subOut(const Tensor& self, const Tensor& other, const Scalar& alpha, Tensor& out) {
  TORCH_CHECK(self.scalar_type() != at::kBool || other.scalar_type() != at::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` "
              "operator instead.");
  if (complexAlpha(self, other, alpha)) return at::sub_out(out, self, at::mul(other, alpha));
  return ewOr(EwOp::Sub, {self, other}, out, withAlpha(alpha),
              [&]() -> Tensor& { return Fallback<at::_ops::sub_out>::call(self, other, alpha, out); });
}

// The functional and in-place add/sub (Note [Elementwise fast path]); the table's rows register the others
// (PointwiseFast.cpp), but these take an alpha. A boolean or complex alpha takes the structured kernel, whose
// meta function checks it.
template <EwOp op, Tensor (*Structured)(const Tensor&, const Tensor&, const Scalar&)>
Tensor alphaFn(const Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (!alpha.isBoolean() && !alpha.isComplex()) {
    Tensor r = ewFast(op, {self, other}, withAlpha(alpha));
    if (r.defined()) return r;
  }
  return Structured(self, other, alpha);
}
template <EwOp op, Tensor& (*Structured)(Tensor&, const Tensor&, const Scalar&)>
Tensor& alphaIp(Tensor& self, const Tensor& other, const Scalar& alpha) {
  if (!alpha.isBoolean() && !alpha.isComplex() && ewFastInplace(op, self, {self, other}, withAlpha(alpha))) return self;
  return Structured(self, other, alpha);
}

// heaviside refuses operands and an out= of different dtypes (the fallback raises ATen's message).
Tensor& heavisideOut(const Tensor& self, const Tensor& values, Tensor& out) {
  if (self.scalar_type() != values.scalar_type() || out.scalar_type() != self.scalar_type())
    return Fallback<at::_ops::heaviside_out>::call(self, values, out);
  return ewOr(EwOp::Heaviside, {self, values}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::heaviside_out>::call(self, values, out); });
}

// rsub(self, other, alpha) = other - alpha * self: ATen's own definition, on the native sub.
Tensor rsub(const Tensor& self, const Tensor& other, const Scalar& alpha) { return at::sub(other, self, alpha); }

Tensor& divModeOut(const Tensor& self, const Tensor& other, std::optional<c10::string_view> mode, Tensor& out) {
  EwOp op = EwOp::Div;
  if (mode.has_value()) {
    TORCH_CHECK(*mode == "trunc" || *mode == "floor",
                "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
    op = *mode == "trunc" ? EwOp::DivTrunc : EwOp::DivFloor;
  }
  return ewOr(op, {self, other}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::div_out_mode>::call(self, other, mode, out); });
}

// floorDivide's functional and in-place forms (ATen has no composite for them on PrivateUse1); floorDivide.out
// is the DivFloor row.
Tensor floorDivide(const Tensor& self, const Tensor& other) {
  Tensor out = at::empty({0}, self.options().dtype(ewComputeType(EwOp::DivFloor, {self, other})));
  return at::floor_divide_out(out, self, other);
}
Tensor& floorDivideInplace(Tensor& self, const Tensor& other) { return at::floor_divide_out(self, self, other); }

// The << and >> operators are aten ops of their own (functional only).
Tensor shift(EwOp op, const Tensor& self, const EwInput& other) {
  const auto compute = ewComputeType(op, {self, other});
  Tensor out = at::empty({0}, self.options().dtype(compute));
  TORCH_CHECK(ewTry(op, {self, other}, out), "mytorch: shifts support integer dtypes, but got ", compute);
  return out;
}
Tensor lshiftScalar(const Tensor& self, const Scalar& other) { return shift(EwOp::Lshift, self, other); }
Tensor lshiftTensor(const Tensor& self, const Tensor& other) { return shift(EwOp::Lshift, self, other); }
Tensor rshiftScalar(const Tensor& self, const Scalar& other) { return shift(EwOp::Rshift, self, other); }
Tensor rshiftTensor(const Tensor& self, const Tensor& other) { return shift(EwOp::Rshift, self, other); }

// pow(2, e) (`2 ** t`) with a floating result (`result`: ATen's promotion of the base and e) is exp2(e): the exp2
// row is within an ulp of 2^e and exact at integer e, where the Pow row (Note [pow in float]) takes a log and an exp
// in double for every element.
bool powOfTwo(const Scalar& self, at::ScalarType result, const Tensor& exponent, Tensor& out) {
  if (self.isComplex() || self.isBoolean() || self.to<double>() != 2.0 || exponent.is_complex()) return false;
  if (!c10::isFloatingType(result) || out.scalar_type() != result) return false;
  return ewTry(EwOp::Exp2, {exponent}, out);
}

// torch.ldexp of a floating x and an integral n: the CPU and torch.cuda run their ldexp_stub (std::ldexp: x * 2^n
// rounded once, so float16 x = -0.18 with n = 16 is -11896), and ATen composes every other device's from
// pow(2, n) in x's dtype (2^16 overflowed float16: -inf). Here as the stub, in double: n clamped to where the result
// no longer changes (+-400 for float32 and the half types, whose finite non-zero values lie within 2^+-149..128;
// +-2100 for float64), so that 2^n stays finite and non-zero (inf * 2^-2000 is inf, not NaN); for float32 and the
// half types x * 2^n is exact in double (a 24-bit mantissa times a power of two) and rounds once to x's dtype; a
// float64 x is scaled by three powers of two of at most 2^700 each (a subnormal result may round twice).
void ldexpStub(at::TensorIteratorBase& iter) {
  const Tensor& out = iter.tensor(0);
  const auto nt = iter.tensor(2).scalar_type();  // the CPU's exponent dtypes (AT_DISPATCH_INTEGRAL_TYPES)
  TORCH_CHECK_NOT_IMPLEMENTED(
      nt == at::kByte || nt == at::kChar || nt == at::kShort || nt == at::kInt || nt == at::kLong,
      "\"ldexp\" not implemented for '", c10::toString(nt), "'");
  const bool wide = iter.tensor(1).scalar_type() == at::kDouble;
  const double lim = wide ? 2100 : 400;
  const Tensor x = iter.tensor(1).to(at::kDouble), n = iter.tensor(2).to(at::kDouble).clamp(-lim, lim);
  if (!wide) {
    out.copy_(at::mul(x, at::exp2(n)));
    return;
  }
  const Tensor n1 = n.div(3, "floor"), n2 = n.sub(n1).div(2, "floor"), n3 = n.sub(n1).sub(n2);
  out.copy_(at::mul(at::mul(at::mul(x, at::exp2(n1)), at::exp2(n2)), at::exp2(n3)));
}

// pow(b, e) with b a 0-dim tensor (on the CPU, or on the sim's device, whose memory is host memory: reading it
// costs no synchronisation) and e of the result's dtype: powOfTwo too. ATen composes every other device's ldexp of a
// floating exponent as x * pow(2, e) with 2 a 0-dim device tensor (bfloat16 ldexp ran at 0.17x the CPU through the
// Pow row's per-element pow).
Tensor& powTtOut(const Tensor& self, const Tensor& exponent, Tensor& out) {
  if (self.dim() == 0 && (self.device().is_cpu() || onSim()) && exponent.scalar_type() == out.scalar_type() &&
      powOfTwo(self.item(), at::result_type(self, exponent), exponent, out)) {
    return out;
  }
  return ewOr(EwOp::Pow, {self, exponent}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::pow_Tensor_Tensor_out>::call(self, exponent, out); });
}

Tensor& powStOut(const Scalar& self, const Tensor& exponent, Tensor& out) {
  if (powOfTwo(self, at::result_type(self, exponent), exponent, out)) return out;
  return ewOr(EwOp::Pow, {self, exponent}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::pow_Scalar_out>::call(self, exponent, out); });
}

Tensor& whereOut(const Tensor& cond, const Tensor& self, const Tensor& other, Tensor& out) {
  const auto compute = ewComputeType(EwOp::Where, {self, other});  // the mask takes no part in the promotion
  // ATen's checks in ATen's order: the out= dtype, then the condition's
  TORCH_CHECK(out.scalar_type() == compute, "Expected out type to be ", compute, " but got ", out.scalar_type());
  TORCH_CHECK(cond.scalar_type() == at::kBool || cond.scalar_type() == at::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
  if (!ewNative(EwOp::Where, compute, {self, other})) {
    if (whereComplex(cond, self, other, out)) return out;
    return Fallback<at::_ops::where_self_out>::call(cond, self, other, out);
  }
  ewRun(EwOp::Where, compute, {cond, self, other}, out);
  return out;
}

Tensor whereSelf(const Tensor& cond, const Tensor& self, const Tensor& other) {
  Tensor out = at::empty({0}, self.options().dtype(ewComputeType(EwOp::Where, {self, other})));
  return whereOut(cond, self, other, out);
}

Tensor& maskedFillScalar(Tensor& self, const Tensor& mask, const Scalar& value) {
  TORCH_CHECK(mask.scalar_type() == at::kBool, "masked_fill_ only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
  const auto compute = self.scalar_type();
  if (!ewNative(EwOp::Where, compute, {self, value}))
    return Fallback<at::_ops::masked_fill__Scalar>::call(self, mask, value);
  // an expanded self is written as given, after the deprecation warning (Checked.h, kExpandedSelfWarnings)
  ewRun(EwOp::Where, compute, {mask, value, self}, self, {}, /*out_may_overlap=*/true);
  return self;
}

Tensor& maskedFillTensor(Tensor& self, const Tensor& mask, const Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
              value.dim(), " dimension(s).");
  return maskedFillScalar(self, mask, value.item());
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

Tensor& clampOut(const Tensor& self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi, Tensor& out) {
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

Tensor& clampMinOut(const Tensor& self, const Scalar& lo, Tensor& out) { return clampOut(self, lo, std::nullopt, out); }
Tensor& clampMaxOut(const Tensor& self, const Scalar& hi, Tensor& out) { return clampOut(self, std::nullopt, hi, out); }

Tensor& clampTensorOut(const Tensor& self, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi,
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
Tensor& clampMinTOut(const Tensor& self, const Tensor& lo, Tensor& out) {
  return clampTensorOut(self, lo, std::nullopt, out);
}
Tensor& clampMaxTOut(const Tensor& self, const Tensor& hi, Tensor& out) {
  return clampTensorOut(self, std::nullopt, hi, out);
}

Tensor& lerpScalarOut(const Tensor& self, const Tensor& end, const Scalar& weight, Tensor& out) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  return ewOr(EwOp::Lerp, {self, end, weight}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::lerp_Scalar_out>::call(self, end, weight, out); });
}
Tensor& lerpTensorOut(const Tensor& self, const Tensor& end, const Tensor& weight, Tensor& out) {
  checkExactOut(out, self.scalar_type());   // ATen builds lerp.Tensor with every dtype equal (lerp.Scalar casts)
  TORCH_CHECK(self.scalar_type() == end.scalar_type() && self.scalar_type() == weight.scalar_type(), "expected dtype ",
              self.scalar_type(), " for `end` and `weight` but got dtypes ", end.scalar_type(), " and ",
              weight.scalar_type());
  return ewOr(EwOp::Lerp, {self, end, weight}, out, {},
              [&]() -> Tensor& { return Fallback<at::_ops::lerp_Tensor_out>::call(self, end, weight, out); });
}
Tensor& addcmulOut(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, Tensor& out) {
  if (value.isComplex())  // complex arithmetic has no native kernels: the fallback computes it (no real alpha)
    return Fallback<at::_ops::addcmul_out>::call(self, t1, t2, value, out);
  return ewOr(EwOp::Addcmul, {self, t1, t2}, out, withAlpha(value),
              [&]() -> Tensor& { return Fallback<at::_ops::addcmul_out>::call(self, t1, t2, value, out); });
}
Tensor& addcdivOut(const Tensor& self, const Tensor& t1, const Tensor& t2, const Scalar& value, Tensor& out) {
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
  MT_IMPL_ENGINE_OUT(m, "add.out", addOut);
  MT_IMPL(m, "add.Tensor", (alphaFn<EwOp::Add, at::compositeexplicitautogradnonfunctional::add>));
  MT_IMPL(m, "add_.Tensor", (alphaIp<EwOp::Add, at::compositeexplicitautogradnonfunctional::add_>));
  MT_IMPL(m, "sub.Tensor", (alphaFn<EwOp::Sub, at::compositeexplicitautogradnonfunctional::sub>));
  MT_IMPL(m, "sub_.Tensor", (alphaIp<EwOp::Sub, at::compositeexplicitautogradnonfunctional::sub_>));
  MT_IMPL_ENGINE_OUT(m, "sub.out", subOut);
  MT_IMPL(m, "rsub.Tensor", rsub);
  MT_IMPL_ENGINE_OUT(m, "heaviside.out", heavisideOut);
  MT_IMPL_ENGINE_OUT(m, "div.out_mode", divModeOut);
  MT_IMPL(m, "floor_divide", floorDivide);
  MT_IMPL(m, "floor_divide_.Tensor", floorDivideInplace);
  MT_IMPL_ENGINE_OUT(m, "pow.Tensor_Scalar_out", powTsOut);
  MT_IMPL_ENGINE_OUT(m, "pow.Scalar_out", powStOut);
  MT_IMPL_ENGINE_OUT(m, "pow.Tensor_Tensor_out", powTtOut);
  MT_IMPL(m, "__lshift__.Scalar", lshiftScalar);
  MT_IMPL(m, "__lshift__.Tensor", lshiftTensor);
  MT_IMPL(m, "__rshift__.Scalar", rshiftScalar);
  MT_IMPL(m, "__rshift__.Tensor", rshiftTensor);
  MT_IMPL_ENGINE_OUT(m, "eq.Scalar_out", eqSOut);
  MT_IMPL_ENGINE_OUT(m, "ne.Scalar_out", neSOut);
  MT_IMPL_ENGINE_OUT(m, "lt.Scalar_out", ltSOut);
  MT_IMPL_ENGINE_OUT(m, "le.Scalar_out", leSOut);
  MT_IMPL_ENGINE_OUT(m, "gt.Scalar_out", gtSOut);
  MT_IMPL_ENGINE_OUT(m, "ge.Scalar_out", geSOut);
  MT_IMPL_ENGINE_OUT(m, "where.self_out", whereOut);
  MT_IMPL(m, "where.self", whereSelf);
  MT_IMPL(m, "masked_fill_.Scalar", maskedFillScalar);
  MT_IMPL(m, "masked_fill_.Tensor", maskedFillTensor);
  MT_IMPL_ENGINE_OUT(m, "clamp.out", clampOut);
  MT_IMPL_ENGINE_OUT(m, "clamp.Tensor_out", clampTensorOut);
  MT_IMPL_ENGINE_OUT(m, "clamp_min.out", clampMinOut);
  MT_IMPL_ENGINE_OUT(m, "clamp_max.out", clampMaxOut);
  MT_IMPL_ENGINE_OUT(m, "clamp_min.Tensor_out", clampMinTOut);
  MT_IMPL_ENGINE_OUT(m, "clamp_max.Tensor_out", clampMaxTOut);
  MT_IMPL_ENGINE_OUT(m, "lerp.Scalar_out", lerpScalarOut);
  MT_IMPL_ENGINE_OUT(m, "lerp.Tensor_out", lerpTensorOut);
  MT_IMPL_ENGINE_OUT(m, "addcmul.out", addcmulOut);
  MT_IMPL_ENGINE_OUT(m, "addcdiv.out", addcdivOut);
}

} // namespace mytorch

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(ldexp_stub, &mytorch::ldexpStub);
}
