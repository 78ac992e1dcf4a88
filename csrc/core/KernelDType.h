// ATen's scalar types as the kernel library's DType (mytorch/dtype.h): the one mapping, for the op glue and the
// process group alike.
#pragma once

#include <c10/core/ScalarType.h>

#include "mytorch/dtype.h"

namespace mytorch {

inline DType toKernelDType(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Bool: return DType::Bool;
    case c10::ScalarType::Byte: return DType::UInt8;
    case c10::ScalarType::Char: return DType::Int8;
    case c10::ScalarType::Short: return DType::Int16;
    case c10::ScalarType::Int: return DType::Int32;
    case c10::ScalarType::Long: return DType::Int64;
    case c10::ScalarType::Half: return DType::Half;
    case c10::ScalarType::BFloat16: return DType::BFloat16;
    case c10::ScalarType::Float: return DType::Float;
    case c10::ScalarType::Double: return DType::Double;
    case c10::ScalarType::ComplexFloat: return DType::ComplexFloat;
    case c10::ScalarType::ComplexDouble: return DType::ComplexDouble;
    default: return DType::Other;
  }
}

// The floating dtypes the kernels compute in: half, bfloat16, float and double (not the float8 types).
inline bool kernelFloating(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Double || t == c10::ScalarType::Half ||
         t == c10::ScalarType::BFloat16;
}

} // namespace mytorch
