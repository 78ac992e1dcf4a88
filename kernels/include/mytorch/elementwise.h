// Elementwise family: one launcher for every pointwise op, over a torch-free description of up to three
// inputs and one output that ATen's TensorIterator has already broadcast, type-promoted and coalesced.
//
// Note [Elementwise engine]
// All tensor operands share the compute dtype (the glue casts mixed inputs once, with the copy kernel);
// the output has the compute dtype or bool (comparisons, predicates); where's first input is a bool mask
// (masked_fill is where(mask, value, self) into self). A CPU scalar operand is passed by
// value in `scalar`. Per-op constants (alpha, clamp bounds, nan_to_num replacements) travel in `p`. The
// op math lives once in ops_math.h; cuda/ runs it with 16-byte vector loads when every operand is
// contiguous and aligned, else with per-element offsets; sim/ runs the same functors in loops.
#pragma once

#include <cstdint>

#include "mytorch/copy.h"
#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/runtime.h"

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
  LeakyReluBackward, HardswishBackward, HardsigmoidBackward, HardtanhBackward, LogSigmoidBackward, MseLoss,
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
  _(HardswishBackward) _(HardsigmoidBackward) _(HardtanhBackward) _(LogSigmoidBackward) _(MseLoss) _(SmoothL1Loss) _(HuberLoss) \
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

struct ElementwiseArgs {
  EwOp op = EwOp::Add;
  int ninputs = 0;
  DType compute = DType::Float;
  StridedShape shape;
  StridedOperand out;
  StridedOperand in[3];
  bool is_scalar[3] = {false, false, false};
  // A CPU scalar operand: in opmath precision (float for half types, else the compute dtype) for arithmetic,
  // as ATen keeps wrapped numbers; in the compute dtype for where's values (one conversion, as ATen).
  alignas(16) unsigned char scalar[3][16] = {};
  EwParams p;
};

// Whether the kernels implement `op` for compute dtype `t` (the same on both runtimes).
bool elementwise_supported(EwOp op, DType t);

namespace sim {
rt::Status elementwise(const ElementwiseArgs& a, rt::Stream stream);
}
#if MYTORCH_WITH_CUDA
namespace cuda {
rt::Status elementwise(const ElementwiseArgs& a, rt::Stream stream);
}
#endif

namespace kernels {
inline rt::Status elementwise(const ElementwiseArgs& a, rt::Stream stream) {
#if MYTORCH_WITH_CUDA
  if (rt::cuda_kernels()) return cuda::elementwise(a, stream);
#endif
  return sim::elementwise(a, stream);
}
} // namespace kernels

} // namespace mytorch
