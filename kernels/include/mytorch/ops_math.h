// The math of every elementwise op, shared by the sim loops and the CUDA kernels (Note [Elementwise
// engine] in elementwise.h). Semantics follow ATen's CPU kernels: Python-style floor division and
// remainder, NaN-propagating maximum/minimum/clamp, shifts past the bit width, integer pow by squaring.
// Integer division by zero and INT_MIN / -1 give 0 and INT_MIN (wrapping) instead of trapping: ATen's CPU
// raises for the former and CUDA returns an unspecified value; the device must not crash.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/ew_ops.h"
#include "mytorch/macros.h"
#include "mytorch/ops_nn.h"

namespace mytorch::ew {

template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<c10::Half> { using type = float; };
template <> struct OpMath<c10::BFloat16> { using type = float; };
template <typename T> using opmath_t = typename OpMath<T>::type;

template <typename T> constexpr bool is_float_v = std::is_floating_point_v<T>;
template <typename T> constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
MT_HOST_DEVICE inline T int_div(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a));
  }
  return a / b;
}
template <typename T>
MT_HOST_DEVICE inline T int_mod(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>) {
    if (b == -1) return 0;
  }
  return a % b;
}

template <typename T>
MT_HOST_DEVICE inline T floor_div_float(T a, T b) {
  if (b == 0) return a / b;
  T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if ((mod != 0) && ((b < 0) != (mod < 0))) div -= T(1);
  if (div != 0) {
    T fl = std::floor(div);
    if (div - fl > T(0.5)) fl += T(1);
    return fl;
  }
  return std::copysign(T(0), a / b);
}

template <typename T>
MT_HOST_DEVICE inline T int_pow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp % 2 == 0) ? 1 : -1;
      return 0;
    }
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, b = static_cast<U>(base);
  auto e = exp;
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e /= 2;
  }
  return static_cast<T>(result);
}

// erfinv by a rational first guess refined with two Newton steps on erf (double precision throughout).
MT_HOST_DEVICE inline double erfinv_d(double y) {
  if (!(y > -1.0 && y < 1.0)) {
    if (y == 1.0) return std::numeric_limits<double>::infinity();
    if (y == -1.0) return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double w = -std::log((1.0 - y) * (1.0 + y));
  double x;
  if (w < 5.0) {
    const double t = w - 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * t; p = -3.5233877e-06 + p * t; p = -4.39150654e-06 + p * t;
    p = 0.00021858087 + p * t; p = -0.00125372503 + p * t; p = -0.00417768164 + p * t;
    p = 0.246640727 + p * t; p = 1.50140941 + p * t;
    x = p * y;
  } else {
    const double t = std::sqrt(w) - 3.0;
    double p = -0.000200214257;
    p = 0.000100950558 + p * t; p = 0.00134934322 + p * t; p = -0.00367342844 + p * t;
    p = 0.00573950773 + p * t; p = -0.0076224613 + p * t; p = 0.00943887047 + p * t;
    p = 1.00167406 + p * t; p = 2.83297682 + p * t;
    x = p * y;
  }
  for (int i = 0; i < 2; ++i) {
    const double err = std::erf(x) - y;
    x -= err / (1.1283791670955126 * std::exp(-x * x));
  }
  return x;
}

// apply<op, T>(a, b, c, p): a, b, c in opmath_t<T>; returns opmath_t<T>, or bool for predicates.
template <EwOp op, typename T>
MT_HOST_DEVICE inline auto apply(opmath_t<T> a, opmath_t<T> b, opmath_t<T> c, const EwParams& p) {
  using O = opmath_t<T>;
  if constexpr (op == EwOp::Add) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<O>(a || (p.ialpha && b));
    else if constexpr (is_int_v<T>) return static_cast<O>(a + static_cast<O>(p.ialpha) * b);
    else return static_cast<O>(a + static_cast<O>(p.alpha) * b);
  } else if constexpr (op == EwOp::Sub) {
    if constexpr (is_int_v<T>) return static_cast<O>(a - static_cast<O>(p.ialpha) * b);
    else return static_cast<O>(a - static_cast<O>(p.alpha) * b);
  } else if constexpr (op == EwOp::Mul) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<O>(a && b);
    else return static_cast<O>(a * b);
  } else if constexpr (op == EwOp::Div) {
    return static_cast<O>(a / b);
  } else if constexpr (op == EwOp::DivTrunc) {
    if constexpr (is_int_v<T>) return int_div(a, b);
    else return static_cast<O>(std::trunc(a / b));
  } else if constexpr (op == EwOp::DivFloor) {
    if constexpr (is_int_v<T>) {
      O q = int_div(a, b);
      if constexpr (std::is_signed_v<T>) {
        if (b != 0 && int_mod(a, b) != 0 && ((a < 0) != (b < 0))) q -= 1;
      }
      return q;
    } else {
      return floor_div_float(a, b);
    }
  } else if constexpr (op == EwOp::Remainder) {
    if constexpr (is_int_v<T>) {
      O r = int_mod(a, b);
      if constexpr (std::is_signed_v<T>) {
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
      }
      return r;
    } else {
      O m = std::fmod(a, b);
      if (m != 0 && ((b < 0) != (m < 0))) m += b;
      return m;
    }
  } else if constexpr (op == EwOp::Fmod) {
    if constexpr (is_int_v<T>) return int_mod(a, b);
    else return static_cast<O>(std::fmod(a, b));
  } else if constexpr (op == EwOp::Pow) {
    if constexpr (is_int_v<T>) return int_pow(a, b);
    else return static_cast<O>(std::pow(a, b));
  } else if constexpr (op == EwOp::Maximum || op == EwOp::Minimum) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<O>(op == EwOp::Maximum ? (a || b) : (a && b));
    else if constexpr (is_int_v<T>) return op == EwOp::Maximum ? (a > b ? a : b) : (a < b ? a : b);
    else {
      if (a != a) return a;
      if (b != b) return b;
      return op == EwOp::Maximum ? (a > b ? a : b) : (a < b ? a : b);
    }
  } else if constexpr (op == EwOp::Atan2) {
    return static_cast<O>(std::atan2(a, b));
  } else if constexpr (op == EwOp::Copysign) {
    return static_cast<O>(std::copysign(a, b));
  } else if constexpr (op == EwOp::Hypot) {
    return static_cast<O>(std::hypot(a, b));
  } else if constexpr (op == EwOp::BitAnd) {
    return static_cast<O>(a & b);
  } else if constexpr (op == EwOp::BitOr) {
    return static_cast<O>(a | b);
  } else if constexpr (op == EwOp::BitXor) {
    return static_cast<O>(a ^ b);
  } else if constexpr (op == EwOp::Lshift) {
    constexpr O bits = static_cast<O>(sizeof(T) * 8);
    if constexpr (std::is_signed_v<O>) {
      if (b < 0) return O(0);
    }
    if (b >= bits) return O(0);
    return static_cast<O>(static_cast<std::make_unsigned_t<T>>(a) << b);
  } else if constexpr (op == EwOp::Rshift) {
    constexpr O bits = static_cast<O>(sizeof(T) * 8);
    bool out_of_range = b >= bits;
    if constexpr (std::is_signed_v<O>) out_of_range = out_of_range || b < 0;
    if (out_of_range) {
      if constexpr (std::is_signed_v<T>) return a < 0 ? O(-1) : O(0);
      else return O(0);
    }
    return static_cast<O>(a >> b);
  } else if constexpr (op == EwOp::Eq) {
    return a == b;
  } else if constexpr (op == EwOp::Ne) {
    return a != b;
  } else if constexpr (op == EwOp::Lt) {
    return a < b;
  } else if constexpr (op == EwOp::Le) {
    return a <= b;
  } else if constexpr (op == EwOp::Gt) {
    return a > b;
  } else if constexpr (op == EwOp::Ge) {
    return a >= b;
  } else if constexpr (op == EwOp::LogicalAnd) {
    return (a != O(0)) && (b != O(0));
  } else if constexpr (op == EwOp::LogicalOr) {
    return (a != O(0)) || (b != O(0));
  } else if constexpr (op == EwOp::LogicalXor) {
    return (a != O(0)) != (b != O(0));
  } else if constexpr (op == EwOp::Lerp) {  // a: self, b: end, c: weight
    if constexpr (is_float_v<O>) {
      const O diff = b - a;
      return std::abs(c) < O(0.5) ? a + c * diff : b - diff * (O(1) - c);
    } else {
      return a;
    }
  } else if constexpr (op == EwOp::Addcmul) {
    if constexpr (is_int_v<T>) return static_cast<O>(a + static_cast<O>(p.ialpha) * b * c);
    else if constexpr (std::is_same_v<T, bool>) return static_cast<O>(a || (b && c));
    else return static_cast<O>(a + static_cast<O>(p.alpha) * b * c);
  } else if constexpr (op == EwOp::Addcdiv) {
    if constexpr (is_float_v<O>) return static_cast<O>(a + static_cast<O>(p.alpha) * (b / c));
    else return a;
  } else if constexpr (op == EwOp::ClampTensor || op == EwOp::ClampScalar) {
    O lo = op == EwOp::ClampTensor ? b : (is_int_v<T> ? static_cast<O>(p.ilo) : static_cast<O>(p.lo));
    O hi = op == EwOp::ClampTensor ? c : (is_int_v<T> ? static_cast<O>(p.ihi) : static_cast<O>(p.hi));
    O r = a;
    if constexpr (is_float_v<O>) {
      if (a != a) return a;
      if (p.has_lo) r = (lo != lo) ? lo : (r < lo ? lo : r);
      if (p.has_hi) r = (hi != hi) ? hi : (r > hi ? hi : r);
    } else {
      if (p.has_lo) r = r < lo ? lo : r;
      if (p.has_hi) r = r > hi ? hi : r;
    }
    return r;
  } else if constexpr (op == EwOp::Neg) {
    if constexpr (std::is_signed_v<O> && is_int_v<O>) return static_cast<O>(-static_cast<std::make_unsigned_t<O>>(a));
    else return static_cast<O>(-a);
  } else if constexpr (op == EwOp::Abs) {
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) return a;
    else if constexpr (is_int_v<T>) return a < 0 ? static_cast<O>(-static_cast<std::make_unsigned_t<O>>(a)) : a;
    else return static_cast<O>(std::abs(a));
  } else if constexpr (op == EwOp::Sign) {
    if constexpr (std::is_same_v<T, bool>) return a;
    else if constexpr (std::is_unsigned_v<T>) return static_cast<O>(a > 0);
    else return static_cast<O>((O(0) < a) - (a < O(0)));
  } else if constexpr (op == EwOp::Exp) { return static_cast<O>(std::exp(a));
  } else if constexpr (op == EwOp::Exp2) { return static_cast<O>(std::exp2(a));
  } else if constexpr (op == EwOp::Expm1) { return static_cast<O>(std::expm1(a));
  } else if constexpr (op == EwOp::Log) { return static_cast<O>(std::log(a));
  } else if constexpr (op == EwOp::Log2) { return static_cast<O>(std::log2(a));
  } else if constexpr (op == EwOp::Log10) { return static_cast<O>(std::log10(a));
  } else if constexpr (op == EwOp::Log1p) { return static_cast<O>(std::log1p(a));
  } else if constexpr (op == EwOp::Sqrt) { return static_cast<O>(std::sqrt(a));
  } else if constexpr (op == EwOp::Rsqrt) { return static_cast<O>(O(1) / std::sqrt(a));
  } else if constexpr (op == EwOp::Reciprocal) { return static_cast<O>(O(1) / a);
  } else if constexpr (op == EwOp::Sin) { return static_cast<O>(std::sin(a));
  } else if constexpr (op == EwOp::Cos) { return static_cast<O>(std::cos(a));
  } else if constexpr (op == EwOp::Tan) { return static_cast<O>(std::tan(a));
  } else if constexpr (op == EwOp::Tanh) { return static_cast<O>(std::tanh(a));
  } else if constexpr (op == EwOp::Sigmoid) { return static_cast<O>(O(1) / (O(1) + std::exp(-a)));
  } else if constexpr (op == EwOp::Erf) { return static_cast<O>(std::erf(a));
  } else if constexpr (op == EwOp::Erfinv) { return static_cast<O>(erfinv_d(static_cast<double>(a)));
  } else if constexpr (op == EwOp::Floor || op == EwOp::Ceil || op == EwOp::Round || op == EwOp::Trunc) {
    if constexpr (!is_float_v<O>) return a;
    else if constexpr (op == EwOp::Floor) return static_cast<O>(std::floor(a));
    else if constexpr (op == EwOp::Ceil) return static_cast<O>(std::ceil(a));
    else if constexpr (op == EwOp::Round) return static_cast<O>(std::nearbyint(a));
    else return static_cast<O>(std::trunc(a));
  } else if constexpr (op == EwOp::Frac) {
    return static_cast<O>(a - std::trunc(a));
  } else if constexpr (op == EwOp::NanToNum) {
    if constexpr (is_float_v<O>) {
      if (a != a) return static_cast<O>(p.nan);
      if (a == std::numeric_limits<O>::infinity()) return static_cast<O>(p.posinf);
      if (a == -std::numeric_limits<O>::infinity()) return static_cast<O>(p.neginf);
    }
    return a;
  } else if constexpr (op == EwOp::BitNot) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<O>(!a);
    else return static_cast<O>(~a);
  } else if constexpr (op == EwOp::IsNan) {
    if constexpr (is_float_v<O>) return a != a; else return false;
  } else if constexpr (op == EwOp::IsInf) {
    if constexpr (is_float_v<O>) return a == std::numeric_limits<O>::infinity() || a == -std::numeric_limits<O>::infinity();
    else return false;
  } else if constexpr (op == EwOp::IsFinite) {
    if constexpr (is_float_v<O>) return a == a && a - a == O(0); else return true;
  } else if constexpr (op == EwOp::LogicalNot) {
    return !(a != O(0));
  } else if constexpr (ew_is_nn(op)) {
    if constexpr (is_float_v<O>) return nn_apply<op, O>(a, b, c, p);
    else return a;
  } else {
    return a;  // Where and FillMasked are handled by the loops (their first operand is a bool mask)
  }
}

// Which ops a compute dtype supports (what the loops instantiate; the glue checks the same table).
template <EwOp op, typename T>
constexpr bool supported() {
  constexpr bool fl = std::is_floating_point_v<T> || std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;
  constexpr bool in = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  constexpr bool bo = std::is_same_v<T, bool>;
  if (ew_is_nn(op)) return fl;
  switch (op) {
    case EwOp::Div: case EwOp::Atan2: case EwOp::Copysign: case EwOp::Hypot: case EwOp::Addcdiv: case EwOp::Lerp:
    case EwOp::Exp: case EwOp::Exp2: case EwOp::Expm1: case EwOp::Log: case EwOp::Log2: case EwOp::Log10:
    case EwOp::Log1p: case EwOp::Sqrt: case EwOp::Rsqrt: case EwOp::Reciprocal: case EwOp::Sin: case EwOp::Cos:
    case EwOp::Tan: case EwOp::Tanh: case EwOp::Sigmoid: case EwOp::Erf: case EwOp::Erfinv: case EwOp::Frac:
      return fl;
    case EwOp::BitAnd: case EwOp::BitOr: case EwOp::BitXor: case EwOp::BitNot:
      return in || bo;
    case EwOp::Lshift: case EwOp::Rshift:
      return in;
    case EwOp::Sub: case EwOp::Neg: case EwOp::DivTrunc: case EwOp::DivFloor: case EwOp::Remainder: case EwOp::Fmod:
    case EwOp::Pow:
      return fl || in;
    default:
      return true;
  }
}

} // namespace mytorch::ew
