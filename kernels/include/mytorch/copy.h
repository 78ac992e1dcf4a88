// Data movement family: strided copy with dtype conversion, fill and iota, over strided.h's operands.
#pragma once

#include <cstdint>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/launch.h"
#include "mytorch/macros.h"
#include "mytorch/strided.h"

namespace mytorch {

struct CopyArgs {
  StridedShape shape;
  StridedOperand dst;
  StridedOperand src;
};

struct FillArgs {
  StridedShape shape;
  StridedOperand dst;
  alignas(16) unsigned char value[16]; // the fill value already converted to dst's type
};

// out[i] = start + i * step over a contiguous buffer, with ATen's arithmetic:
//  - arange: int64 outputs in integer arithmetic (istart, istep), every other dtype in double;
//  - linspace (symmetric): the endpoints converted to the output dtype first, the step and the values in
//    the output dtype's own arithmetic for floating types (so fp16 rounds at each operation) and in double
//    for integers; the upper half counts back from the end so both endpoints are exact.
struct IotaArgs {
  void* data = nullptr;
  DType dtype = DType::Float;
  int64_t numel = 0;
  double start = 0, step = 1, end = 0;
  int64_t istart = 0, istep = 1;
  bool integer = false;    // arange into int64
  bool symmetric = false;  // linspace
};

template <typename T>
MT_HOST_DEVICE inline T iota_value(const IotaArgs& p, int64_t i) {
  if (p.symmetric) {
    const int64_t back = p.numel - 1 - i;
    const bool lower = i < p.numel / 2;
    if constexpr (std::is_integral_v<T>) {
      const double s = static_cast<double>(static_cast<T>(p.start)), e = static_cast<double>(static_cast<T>(p.end));
      const double step = (e - s) / static_cast<double>(p.numel - 1);
      return static_cast<T>(lower ? s + step * static_cast<double>(i) : e - step * static_cast<double>(back));
    } else {
      const T s = static_cast<T>(p.start), e = static_cast<T>(p.end);
      const T step = (e - s) / static_cast<T>(static_cast<float>(p.numel - 1));
      return lower ? static_cast<T>(s + step * static_cast<T>(static_cast<float>(i)))
                   : static_cast<T>(e - step * static_cast<T>(static_cast<float>(back)));
    }
  }
  if (p.integer) return static_cast<T>(p.istart + i * p.istep);
  return static_cast<T>(p.start + static_cast<double>(i) * p.step);
}

// dst[i] = cast(src[i]) for every element of the shape. Equal dtypes copy bytes (any element type);
// different dtypes need both to be one of the DType values other than Other.
MT_LAUNCHER(copy, (const CopyArgs& p, rt::Stream stream), (p, stream))
MT_LAUNCHER(fill, (const FillArgs& p, rt::Stream stream), (p, stream))
MT_LAUNCHER(iota, (const IotaArgs& p, rt::Stream stream), (p, stream))

} // namespace mytorch
