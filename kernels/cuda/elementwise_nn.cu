// CUDA elementwise ops: ew_nn, the NN activations, their backwards and pointwise losses (kernels in
// elementwise.cuh, math in ops_nn.h).
#include "elementwise.cuh"

namespace mytorch::cuda {

rt::Status ew_nn(const ElementwiseArgs& a, rt::Stream s) {
  switch (a.op) {
#define MT_CASE(name) \
    case EwOp::name: return ew_dispatch<EwOp::name>(a, s);
    MT_EW_NN_FORALL(MT_CASE)
#undef MT_CASE
    default: return rt::report(rt::Status::InvalidValue, "elementwise: op routed to the wrong group");
  }
}

} // namespace mytorch::cuda
