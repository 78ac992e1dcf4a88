// CUDA elementwise ops: ew_unary_other (kernels in elementwise.cuh).
#include "elementwise.cuh"

namespace mytorch::cuda {

rt::Status ew_unary_other(const ElementwiseArgs& a, rt::Stream s) {
  switch (a.op) {
    case EwOp::Neg: return ew_dispatch<EwOp::Neg>(a, s);
    case EwOp::Abs: return ew_dispatch<EwOp::Abs>(a, s);
    case EwOp::Sign: return ew_dispatch<EwOp::Sign>(a, s);
    case EwOp::Floor: return ew_dispatch<EwOp::Floor>(a, s);
    case EwOp::Ceil: return ew_dispatch<EwOp::Ceil>(a, s);
    case EwOp::Round: return ew_dispatch<EwOp::Round>(a, s);
    case EwOp::Trunc: return ew_dispatch<EwOp::Trunc>(a, s);
    case EwOp::Frac: return ew_dispatch<EwOp::Frac>(a, s);
    case EwOp::NanToNum: return ew_dispatch<EwOp::NanToNum>(a, s);
    case EwOp::BitNot: return ew_dispatch<EwOp::BitNot>(a, s);
    case EwOp::IsNan: return ew_dispatch<EwOp::IsNan>(a, s);
    case EwOp::IsInf: return ew_dispatch<EwOp::IsInf>(a, s);
    case EwOp::IsFinite: return ew_dispatch<EwOp::IsFinite>(a, s);
    case EwOp::LogicalNot: return ew_dispatch<EwOp::LogicalNot>(a, s);
    default: return rt::report(rt::Status::InvalidValue, "elementwise: op routed to the wrong group");
  }
}

} // namespace mytorch::cuda
