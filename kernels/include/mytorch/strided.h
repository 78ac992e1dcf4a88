// The torch-free description of a strided operand, shared by the families that walk arbitrary layouts (copy,
// elementwise). It comes from ATen's TensorIterator in csrc: dimension 0 is the fastest-moving one, strides
// are in bytes, dimensions already coalesced.
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"

namespace mytorch {

struct StridedShape {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kMaxDims] = {};
};

struct StridedOperand {
  void* data = nullptr;
  DType dtype = DType::Other;
  int elem_size = 0;
  int64_t strides[kMaxDims] = {}; // bytes
};

// Byte offsets of linear element `idx` in two operands (dimension 0 fastest).
MT_HOST_DEVICE inline void strided_offsets(const StridedShape& s, const int64_t* st0, const int64_t* st1, int64_t idx,
                                           int64_t* o0, int64_t* o1) {
  int64_t a = 0, b = 0;
  for (int d = 0; d < s.ndim; ++d) {
    int64_t i = idx % s.sizes[d];
    idx /= s.sizes[d];
    a += i * st0[d];
    if (st1) b += i * st1[d];
  }
  *o0 = a;
  *o1 = b;
}

} // namespace mytorch
