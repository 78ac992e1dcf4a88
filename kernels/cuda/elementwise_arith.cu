// CUDA elementwise ops: ew_binary_arith (kernels in elementwise.cuh).
#include "elementwise.cuh"

namespace mytorch::cuda {

rt::Status ew_binary_arith(const ElementwiseArgs& a, rt::Stream s) {
  switch (a.op) {
    case EwOp::Add: return ew_dispatch<EwOp::Add>(a, s);
    case EwOp::Sub: return ew_dispatch<EwOp::Sub>(a, s);
    case EwOp::Mul: return ew_dispatch<EwOp::Mul>(a, s);
    case EwOp::Div: return ew_dispatch<EwOp::Div>(a, s);
    case EwOp::DivTrunc: return ew_dispatch<EwOp::DivTrunc>(a, s);
    case EwOp::DivFloor: return ew_dispatch<EwOp::DivFloor>(a, s);
    case EwOp::Remainder: return ew_dispatch<EwOp::Remainder>(a, s);
    case EwOp::Fmod: return ew_dispatch<EwOp::Fmod>(a, s);
    case EwOp::Pow: return ew_dispatch<EwOp::Pow>(a, s);
    case EwOp::Maximum: return ew_dispatch<EwOp::Maximum>(a, s);
    case EwOp::Minimum: return ew_dispatch<EwOp::Minimum>(a, s);
    case EwOp::Atan2: return ew_dispatch<EwOp::Atan2>(a, s);
    case EwOp::Copysign: return ew_dispatch<EwOp::Copysign>(a, s);
    case EwOp::Hypot: return ew_dispatch<EwOp::Hypot>(a, s);
    default: return rt::report(rt::Status::InvalidValue, "elementwise: op routed to the wrong group");
  }
}

} // namespace mytorch::cuda
