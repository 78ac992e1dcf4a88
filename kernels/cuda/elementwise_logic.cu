// CUDA elementwise ops: ew_binary_logic (kernels in elementwise.cuh).
#include "elementwise.cuh"

namespace mytorch::cuda {

rt::Status ew_binary_logic(const ElementwiseArgs& a, rt::Stream s) {
  switch (a.op) {
    case EwOp::BitAnd: return ew_dispatch<EwOp::BitAnd>(a, s);
    case EwOp::BitOr: return ew_dispatch<EwOp::BitOr>(a, s);
    case EwOp::BitXor: return ew_dispatch<EwOp::BitXor>(a, s);
    case EwOp::Lshift: return ew_dispatch<EwOp::Lshift>(a, s);
    case EwOp::Rshift: return ew_dispatch<EwOp::Rshift>(a, s);
    case EwOp::Eq: return ew_dispatch<EwOp::Eq>(a, s);
    case EwOp::Ne: return ew_dispatch<EwOp::Ne>(a, s);
    case EwOp::Lt: return ew_dispatch<EwOp::Lt>(a, s);
    case EwOp::Le: return ew_dispatch<EwOp::Le>(a, s);
    case EwOp::Gt: return ew_dispatch<EwOp::Gt>(a, s);
    case EwOp::Ge: return ew_dispatch<EwOp::Ge>(a, s);
    case EwOp::LogicalAnd: return ew_dispatch<EwOp::LogicalAnd>(a, s);
    case EwOp::LogicalOr: return ew_dispatch<EwOp::LogicalOr>(a, s);
    case EwOp::LogicalXor: return ew_dispatch<EwOp::LogicalXor>(a, s);
    default: return rt::report(rt::Status::InvalidValue, "elementwise: op routed to the wrong group");
  }
}

} // namespace mytorch::cuda
