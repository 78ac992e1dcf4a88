// CUDA elementwise ops of the table's Special group (kernels in elementwise.cuh, functors in ops_special.h).
#include "elementwise.cuh"

namespace mytorch::cuda {
MT_EW_GROUP_UNIT(Special)
} // namespace mytorch::cuda
