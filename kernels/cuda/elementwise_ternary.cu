// CUDA elementwise ops: ew_ternary (kernels in elementwise.cuh).
#include "elementwise.cuh"

namespace mytorch::cuda {

rt::Status ew_ternary(const ElementwiseArgs& a, rt::Stream s) {
  switch (a.op) {
    case EwOp::Where: return ew_dispatch<EwOp::Where>(a, s);
    case EwOp::Lerp: return ew_dispatch<EwOp::Lerp>(a, s);
    case EwOp::Addcmul: return ew_dispatch<EwOp::Addcmul>(a, s);
    case EwOp::Addcdiv: return ew_dispatch<EwOp::Addcdiv>(a, s);
    case EwOp::ClampTensor: return ew_dispatch<EwOp::ClampTensor>(a, s);
    case EwOp::ClampScalar: return ew_dispatch<EwOp::ClampScalar>(a, s);
    default: return rt::report(rt::Status::InvalidValue, "elementwise: op routed to the wrong group");
  }
}

} // namespace mytorch::cuda
