// CUDA elementwise ops of the table's Arith group (kernels in elementwise.cuh, functors in ops_math.h / ops_nn.h).
#include "elementwise.cuh"

namespace mytorch::cuda {
MT_EW_GROUP_UNIT(Arith)
} // namespace mytorch::cuda
