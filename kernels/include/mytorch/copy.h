// Data movement family: strided copy with dtype conversion, and fill. The torch-free description of a
// strided operand comes from ATen's TensorIterator in csrc (dimension 0 is the fastest-moving one, strides
// are in bytes, dimensions already coalesced).
#pragma once

#include <cstdint>

#include "mytorch/dtype.h"
#include "mytorch/macros.h"
#include "mytorch/runtime.h"

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

struct CopyParams {
  StridedShape shape;
  StridedOperand dst;
  StridedOperand src;
};

struct FillParams {
  StridedShape shape;
  StridedOperand dst;
  alignas(16) unsigned char value[16]; // the fill value already converted to dst's type
};

// Byte offsets of linear element `idx` in two operands (dimension 0 fastest).
MT_HOST_DEVICE inline void strided_offsets(const StridedShape& s, const int64_t* st0, const int64_t* st1,
                                           int64_t idx, int64_t* o0, int64_t* o1) {
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

namespace sim {
rt::Status copy(const CopyParams& p, rt::Stream stream);
rt::Status fill(const FillParams& p, rt::Stream stream);
} // namespace sim

#if MYTORCH_WITH_CUDA
namespace cuda {
rt::Status copy(const CopyParams& p, rt::Stream stream);
rt::Status fill(const FillParams& p, rt::Stream stream);
} // namespace cuda
#endif

namespace kernels {
// dst[i] = cast(src[i]) for every element of the shape. Equal dtypes copy bytes (any element type);
// different dtypes need both to be one of the DType values other than Other.
inline rt::Status copy(const CopyParams& p, rt::Stream stream) {
#if MYTORCH_WITH_CUDA
  if (rt::kind() == rt::Kind::Cuda) return cuda::copy(p, stream);
#endif
  return sim::copy(p, stream);
}
inline rt::Status fill(const FillParams& p, rt::Stream stream) {
#if MYTORCH_WITH_CUDA
  if (rt::kind() == rt::Kind::Cuda) return cuda::fill(p, stream);
#endif
  return sim::fill(p, stream);
}
} // namespace kernels

} // namespace mytorch
