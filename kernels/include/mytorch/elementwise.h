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

#include "mytorch/dtype.h"
#include "mytorch/ew_ops.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"
#include "mytorch/strided.h"

namespace mytorch {

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

MT_LAUNCHER(elementwise, (const ElementwiseArgs& a, rt::Stream stream), (a, stream))

} // namespace mytorch
