// CUDA elementwise ops: ew_unary_float (kernels in elementwise.cuh).
#include "elementwise.cuh"

namespace mytorch::cuda {

rt::Status ew_unary_float(const ElementwiseArgs& a, rt::Stream s) {
  switch (a.op) {
    case EwOp::Exp: return ew_dispatch<EwOp::Exp>(a, s);
    case EwOp::Exp2: return ew_dispatch<EwOp::Exp2>(a, s);
    case EwOp::Expm1: return ew_dispatch<EwOp::Expm1>(a, s);
    case EwOp::Log: return ew_dispatch<EwOp::Log>(a, s);
    case EwOp::Log2: return ew_dispatch<EwOp::Log2>(a, s);
    case EwOp::Log10: return ew_dispatch<EwOp::Log10>(a, s);
    case EwOp::Log1p: return ew_dispatch<EwOp::Log1p>(a, s);
    case EwOp::Sqrt: return ew_dispatch<EwOp::Sqrt>(a, s);
    case EwOp::Rsqrt: return ew_dispatch<EwOp::Rsqrt>(a, s);
    case EwOp::Reciprocal: return ew_dispatch<EwOp::Reciprocal>(a, s);
    case EwOp::Sin: return ew_dispatch<EwOp::Sin>(a, s);
    case EwOp::Cos: return ew_dispatch<EwOp::Cos>(a, s);
    case EwOp::Tan: return ew_dispatch<EwOp::Tan>(a, s);
    case EwOp::Tanh: return ew_dispatch<EwOp::Tanh>(a, s);
    case EwOp::Sigmoid: return ew_dispatch<EwOp::Sigmoid>(a, s);
    case EwOp::Erf: return ew_dispatch<EwOp::Erf>(a, s);
    case EwOp::Erfinv: return ew_dispatch<EwOp::Erfinv>(a, s);
    default: return rt::report(rt::Status::InvalidValue, "elementwise: op routed to the wrong group");
  }
}

} // namespace mytorch::cuda
