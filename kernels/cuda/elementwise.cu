// CUDA elementwise launcher: routes each op to the translation unit of its group.
#include "elementwise.cuh"

namespace mytorch::cuda {

rt::Status elementwise(const ElementwiseArgs& a, rt::Stream s) {
  if (ew_is_nn(a.op)) return ew_nn(a, s);
  switch (a.op) {
    case EwOp::Add: case EwOp::Sub: case EwOp::Mul: case EwOp::Div: case EwOp::DivTrunc: case EwOp::DivFloor:
    case EwOp::Remainder: case EwOp::Fmod: case EwOp::Pow: case EwOp::Maximum: case EwOp::Minimum:
    case EwOp::Atan2: case EwOp::Copysign: case EwOp::Hypot:
      return ew_binary_arith(a, s);
    case EwOp::BitAnd: case EwOp::BitOr: case EwOp::BitXor: case EwOp::Lshift: case EwOp::Rshift: case EwOp::Eq:
    case EwOp::Ne: case EwOp::Lt: case EwOp::Le: case EwOp::Gt: case EwOp::Ge: case EwOp::LogicalAnd:
    case EwOp::LogicalOr: case EwOp::LogicalXor:
      return ew_binary_logic(a, s);
    case EwOp::Where: case EwOp::Lerp: case EwOp::Addcmul: case EwOp::Addcdiv: case EwOp::ClampTensor:
    case EwOp::ClampScalar:
      return ew_ternary(a, s);
    case EwOp::Exp: case EwOp::Exp2: case EwOp::Expm1: case EwOp::Log: case EwOp::Log2: case EwOp::Log10:
    case EwOp::Log1p: case EwOp::Sqrt: case EwOp::Rsqrt: case EwOp::Reciprocal: case EwOp::Sin: case EwOp::Cos:
    case EwOp::Tan: case EwOp::Tanh: case EwOp::Sigmoid: case EwOp::Erf: case EwOp::Erfinv:
      return ew_unary_float(a, s);
    default:
      return ew_unary_other(a, s);
  }
}

} // namespace mytorch::cuda
