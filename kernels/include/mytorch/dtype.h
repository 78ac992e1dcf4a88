// Element types the kernels know, and the one cast functor both runtimes use, so a conversion gives the
// same bits on sim and on cuda (and the same as ATen's CPU casts).
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <c10/util/complex.h>

#include <cstdint>
#include <type_traits>

#include "mytorch/macros.h"

namespace mytorch {

enum class DType : int8_t {
  Bool,
  UInt8,
  Int8,
  Int16,
  Int32,
  Int64,
  Half,
  BFloat16,
  Float,
  Double,
  ComplexFloat,
  ComplexDouble,
  // Storage types only the collectives move (comm.h); the kernels compute in none of them, and the op glue
  // hands them to the kernels as Other.
  UInt32,
  UInt64,
  Float8e4m3,
  Float8e5m2,
  Other, // anything else: only byte copies of equal types
};

MT_HOST_DEVICE inline int dtype_size(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
    case DType::Float8e4m3:
    case DType::Float8e5m2: return 1;
    case DType::Int16:
    case DType::Half:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::UInt32:
    case DType::Float: return 4;
    case DType::Int64:
    case DType::UInt64:
    case DType::Double:
    case DType::ComplexFloat: return 8;
    case DType::ComplexDouble: return 16;
    default: return 0;
  }
}

template <typename T> struct is_complex_t : std::false_type {};
template <typename T> struct is_complex_t<c10::complex<T>> : std::true_type {};

// An element read as ATen's loops read it (c10::load): a bool is any non-zero byte. A uint8 tensor viewed as bool
// may hold 2..255, and such a byte read as a C++ bool flows into the arithmetic as it is (246 + 1, a comparison
// with 1 that fails, a conversion to 246). Every kernel reads its bool operands through this, from memory or from
// an element of a vector just loaded (the byte is read through unsigned char, which may alias anything).
template <typename T>
MT_HOST_DEVICE inline T mt_load(const T* p) {
  if constexpr (std::is_same_v<T, bool>) return *reinterpret_cast<const unsigned char*>(p) != 0;
  else return *p;
}

// dst = cast(src) with ATen's CPU semantics: bool is "non-zero", complex to real keeps the real part,
// floating to uint8 goes through int64 (as c10::convert does, to avoid undefined behaviour).
template <typename To, typename From>
MT_HOST_DEVICE inline To mt_cast(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (std::is_same_v<To, bool>) {
    if constexpr (is_complex_t<From>::value) return v.real() != 0 || v.imag() != 0;
    else if constexpr (std::is_same_v<From, c10::Half> || std::is_same_v<From, c10::BFloat16>)
      return static_cast<float>(v) != 0.0f;
    else return static_cast<bool>(v);
  } else if constexpr (is_complex_t<From>::value && is_complex_t<To>::value) {
    using V = typename To::value_type;
    return To(static_cast<V>(v.real()), static_cast<V>(v.imag()));
  } else if constexpr (is_complex_t<From>::value) {
    return mt_cast<To>(v.real());
  } else if constexpr (is_complex_t<To>::value) {
    using V = typename To::value_type;
    return To(mt_cast<V>(v), V(0));
  } else if constexpr (std::is_same_v<To, uint8_t> &&
                       (std::is_floating_point_v<From> || std::is_same_v<From, c10::Half> ||
                        std::is_same_v<From, c10::BFloat16>)) {
    return static_cast<uint8_t>(static_cast<int64_t>(v));
  } else if constexpr (std::is_same_v<From, c10::Half> || std::is_same_v<From, c10::BFloat16>) {
    return static_cast<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, c10::Half> || std::is_same_v<To, c10::BFloat16>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

// Calls f(T{}) with T the C++ type of `t` (Other is not dispatched).
template <typename F>
inline bool dispatch_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: f(bool{}); return true;
    case DType::UInt8: f(uint8_t{}); return true;
    case DType::Int8: f(int8_t{}); return true;
    case DType::Int16: f(int16_t{}); return true;
    case DType::Int32: f(int32_t{}); return true;
    case DType::Int64: f(int64_t{}); return true;
    case DType::Half: f(c10::Half{}); return true;
    case DType::BFloat16: f(c10::BFloat16{}); return true;
    case DType::Float: f(float{}); return true;
    case DType::Double: f(double{}); return true;
    case DType::ComplexFloat: f(c10::complex<float>{}); return true;
    case DType::ComplexDouble: f(c10::complex<double>{}); return true;
    default: return false;
  }
}

// Calls f(T{}) for the floating types (half, bfloat16, float, double); false for any other dtype.
template <typename F>
inline bool dispatch_floating(DType t, F&& f) {
  switch (t) {
    case DType::Half: f(c10::Half{}); return true;
    case DType::BFloat16: f(c10::BFloat16{}); return true;
    case DType::Float: f(float{}); return true;
    case DType::Double: f(double{}); return true;
    default: return false;
  }
}

// Calls f(T{}) for the integer types (uint8, int8, int16, int32, int64; not bool); false for any other dtype.
template <typename F>
inline bool dispatch_integer(DType t, F&& f) {
  switch (t) {
    case DType::UInt8: f(uint8_t{}); return true;
    case DType::Int8: f(int8_t{}); return true;
    case DType::Int16: f(int16_t{}); return true;
    case DType::Int32: f(int32_t{}); return true;
    case DType::Int64: f(int64_t{}); return true;
    default: return false;
  }
}

// Calls f(T{}) for float32 and float64 only (families whose math has no half-precision form); false otherwise.
template <typename F>
inline bool dispatch_float_double(DType t, F&& f) {
  switch (t) {
    case DType::Float: f(float{}); return true;
    case DType::Double: f(double{}); return true;
    default: return false;
  }
}

// Calls f(T{}, P{}) for a floating activation dtype T and a parameter dtype P that is T or float32 (the
// mixed-precision norms: half activations with float32 weights); false for any other pair.
template <typename F>
inline bool dispatch_floating_with_param(DType t, DType p, F&& f) {
  bool ok = false;
  dispatch_floating(t, [&](auto tag) {
    using T = decltype(tag);
    if (p == t) {
      f(T{}, T{});
      ok = true;
    } else if (p == DType::Float) {
      f(T{}, float{});
      ok = true;
    }
  });
  return ok;
}

} // namespace mytorch
