// The list of elementwise ops (Note [Elementwise engine] in elementwise.h): the enum the op math (ops_math.h,
// ops_nn.h) is keyed by, its classification and the per-op constants. Adding an op starts here; the launcher interface is in
// elementwise.h, so families that only use the op math do not depend on it.
#pragma once

#include <cstdint>

namespace mytorch {

enum class EwOp : int {
  // binary arithmetic (compute dtype -> compute dtype)
  Add, Sub, Mul, Div, DivTrunc, DivFloor, Remainder, Fmod, Pow, Maximum, Minimum, Atan2, Copysign, Hypot,
  BitAnd, BitOr, BitXor, Lshift, Rshift,
  // binary predicates (-> bool)
  Eq, Ne, Lt, Le, Gt, Ge, LogicalAnd, LogicalOr, LogicalXor,
  // ternary
  Where, Lerp, Addcmul, Addcdiv, ClampTensor,
  // unary (compute dtype -> compute dtype)
  Neg, Abs, Sign, Exp, Exp2, Expm1, Log, Log2, Log10, Log1p, Sqrt, Rsqrt, Reciprocal, Sin, Cos, Tan, Tanh,
  Sigmoid, Erf, Erfinv, Floor, Ceil, Round, Trunc, Frac, NanToNum, BitNot, ClampScalar,
  // unary predicates (-> bool)
  IsNan, IsInf, IsFinite, LogicalNot,
  // NN activations, their backwards and pointwise losses (floating only; math in ops_nn.h)
  Gelu, GeluTanh, Silu, Mish, Softplus, Elu, LeakyRelu, Hardswish, Hardsigmoid, LogSigmoid,      // unary
  GeluBackward, GeluTanhBackward, SiluBackward, MishBackward, SoftplusBackward, EluBackward,       // (grad, x)
  LeakyReluBackward, HardswishBackward, HardsigmoidBackward, HardtanhBackward, LogSigmoidBackward,
  SigmoidBackward, TanhBackward,                                                                   // (grad, output)
  MseLoss,
  SmoothL1Loss, HuberLoss, BceLoss,
  MseBackward, SmoothL1Backward, HuberBackward, BceBackward,                                                    // (grad, x, target)
};

// Every op, for the launchers' dispatch (same order as EwOp).
#define MT_EW_FORALL(_) \
  _(Add) _(Sub) _(Mul) _(Div) _(DivTrunc) _(DivFloor) _(Remainder) _(Fmod) _(Pow) _(Maximum) _(Minimum) \
  _(Atan2) _(Copysign) _(Hypot) _(BitAnd) _(BitOr) _(BitXor) _(Lshift) _(Rshift) _(Eq) _(Ne) _(Lt) _(Le) \
  _(Gt) _(Ge) _(LogicalAnd) _(LogicalOr) _(LogicalXor) _(Where) _(Lerp) _(Addcmul) _(Addcdiv) _(ClampTensor) \
  _(Neg) _(Abs) _(Sign) _(Exp) _(Exp2) _(Expm1) _(Log) _(Log2) _(Log10) _(Log1p) _(Sqrt) _(Rsqrt) \
  _(Reciprocal) _(Sin) _(Cos) _(Tan) _(Tanh) _(Sigmoid) _(Erf) _(Erfinv) _(Floor) _(Ceil) _(Round) _(Trunc) \
  _(Frac) _(NanToNum) _(BitNot) _(ClampScalar) _(IsNan) _(IsInf) _(IsFinite) _(LogicalNot) MT_EW_NN_FORALL(_)

#define MT_EW_NN_FORALL(_) \
  _(Gelu) _(GeluTanh) _(Silu) _(Mish) _(Softplus) _(Elu) _(LeakyRelu) _(Hardswish) _(Hardsigmoid) _(LogSigmoid) \
  _(GeluBackward) \
  _(GeluTanhBackward) _(SiluBackward) _(MishBackward) _(SoftplusBackward) _(EluBackward) _(LeakyReluBackward) \
  _(HardswishBackward) _(HardsigmoidBackward) _(HardtanhBackward) _(LogSigmoidBackward) \
  _(SigmoidBackward) _(TanhBackward) _(MseLoss) _(SmoothL1Loss) _(HuberLoss) \
  _(BceLoss) _(MseBackward) _(SmoothL1Backward) _(HuberBackward) _(BceBackward)

constexpr bool ew_is_nn(EwOp op) { return static_cast<int>(op) >= static_cast<int>(EwOp::Gelu); }

constexpr bool ew_is_predicate(EwOp op) {
  return op == EwOp::Eq || op == EwOp::Ne || op == EwOp::Lt || op == EwOp::Le || op == EwOp::Gt || op == EwOp::Ge ||
         op == EwOp::LogicalAnd || op == EwOp::LogicalOr || op == EwOp::LogicalXor || op == EwOp::IsNan ||
         op == EwOp::IsInf || op == EwOp::IsFinite || op == EwOp::LogicalNot;
}

constexpr int ew_arity(EwOp op) {
  switch (op) {
    case EwOp::Gelu: case EwOp::GeluTanh: case EwOp::Silu: case EwOp::Mish: case EwOp::Softplus: case EwOp::Elu:
    case EwOp::LeakyRelu: case EwOp::Hardswish: case EwOp::Hardsigmoid: case EwOp::LogSigmoid: return 1;
    case EwOp::MseBackward: case EwOp::SmoothL1Backward: case EwOp::HuberBackward: case EwOp::BceBackward: return 3;
    case EwOp::Where: case EwOp::Lerp: case EwOp::Addcmul: case EwOp::Addcdiv: case EwOp::ClampTensor: return 3;
    case EwOp::Neg: case EwOp::Abs: case EwOp::Sign: case EwOp::Exp: case EwOp::Exp2: case EwOp::Expm1:
    case EwOp::Log: case EwOp::Log2: case EwOp::Log10: case EwOp::Log1p: case EwOp::Sqrt: case EwOp::Rsqrt:
    case EwOp::Reciprocal: case EwOp::Sin: case EwOp::Cos: case EwOp::Tan: case EwOp::Tanh: case EwOp::Sigmoid:
    case EwOp::Erf: case EwOp::Erfinv: case EwOp::Floor: case EwOp::Ceil: case EwOp::Round: case EwOp::Trunc:
    case EwOp::Frac: case EwOp::NanToNum: case EwOp::BitNot: case EwOp::ClampScalar: case EwOp::IsNan:
    case EwOp::IsInf: case EwOp::IsFinite: case EwOp::LogicalNot: return 1;
    default: return 2;
  }
}

// Per-op constants. NN ops: LeakyRelu slope = alpha; Softplus beta = lo, threshold = hi; Elu alpha = alpha,
// scale = lo, input_scale = hi, is_result = has_lo (backward from the output); Hardtanh bounds lo/hi;
// MseBackward / SmoothL1Backward / HuberBackward norm = alpha; SmoothL1 beta / Huber delta = lo.
struct EwParams {
  double alpha = 1, lo = 0, hi = 0, nan = 0, posinf = 0, neginf = 0;
  int64_t ialpha = 1, ilo = 0, ihi = 0;
  bool has_lo = false, has_hi = false;
};

} // namespace mytorch
