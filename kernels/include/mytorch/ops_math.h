// The math of the elementwise ops: one functor per row of tables/pointwise.def (Note [Op tables] in
// ew_ops.h), shared by the sim loops, the CUDA kernels and the multi-tensor kernels; the NN group's functors are
// in ops_nn.h. Semantics follow ATen's CPU kernels: Python-style floor division and
// remainder, NaN-propagating maximum/minimum/clamp, shifts past the bit width, integer pow by squaring.
// Integer division by zero and INT_MIN / -1 give 0 and INT_MIN (wrapping) instead of trapping: ATen's CPU
// raises for the former and CUDA returns an unspecified value; the device must not crash.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "mytorch/dtype.h"
#include "mytorch/ew_ops.h"
#include "mytorch/macros.h"
#include "mytorch/sim_vmath_double.h"

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

// Note [Vectorised fmod]
// std::fmod is exact, and a scalar libm call per element: remainder, fmod and floor division ran at 0.06x the CPU,
// whose Sleef fmod is vectorised. For float operands with |a| < 2^24 |b| (b finite and nonzero) the same exact result
// comes from vectorisable arithmetic: q = trunc(a / b) in float can only overshoot the true quotient's integer part,
// by at most one (division rounds monotonically, integers below 2^24 are floats, and the rounding error of a quotient
// below 2^24 is under one); in double, q * b is exact (24 + 24 significant bits) and so is a - q * b (|a - q b| <=
// |b|, at most 53 significant bits); an overshoot leaves the opposite sign, mended by adding b once; the result,
// with a's sign, is a float. The sim's dense loops run the functors with kFast, then redo the elements outside that
// range with std::fmod (fmod_in_range; dense_fmod in sim/elementwise.cpp); every other caller (CUDA, double) calls
// std::fmod. test_sim_kernels checks the bits against fmod in double on the edges (near-integer quotients, zeros,
// infinities, NaN, subnormals).
MT_HOST_DEVICE inline bool fmod_in_range(float a, float b) {
  return std::fabs(a) < 0x1p24f * std::fabs(b) && std::fabs(b) <= 0x1.fffffep127f;
}
MT_HOST_DEVICE inline float fmod_via_double(float a, float b) {
  const double x = a, y = b;
  const double q = std::trunc(a / b);
  double r = x - q * y;
  const bool over = r != 0 && ((r < 0) != (x < 0));
  r += over ? (((x < 0) != (y < 0)) ? -y : y) : 0.0;
  return static_cast<float>(std::copysign(r, x));
}
template <bool kFast, typename T>
MT_HOST_DEVICE inline T mt_fmod(T a, T b) {
  if constexpr (kFast && std::is_same_v<T, float>) return fmod_via_double(a, b);
  else return std::fmod(a, b);
}

template <typename T, bool kFast = false>
MT_HOST_DEVICE inline T floor_div_float(T a, T b) {
  if (b == 0) return a / b;
  T mod = mt_fmod<kFast>(a, b);
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

// erfinv's rational first guess, in R (double for erfinv_d; float for erfinv_f, the same coefficients rounded to
// float): a polynomial in t = w - 2.5 where w = -log(1 - y^2) < 5, else in t = sqrt(w) - 3, times y. The tables are
// local so that device code can use them.
template <typename R>
MT_HOST_DEVICE inline R erfinv_central(R t) {
  const R c[9] = {R(2.81022636e-08), R(3.43273939e-07), R(-3.5233877e-06), R(-4.39150654e-06), R(0.00021858087),
                  R(-0.00125372503), R(-0.00417768164), R(0.246640727),    R(1.50140941)};
  R p = c[0];
  for (int i = 1; i < 9; ++i) p = c[i] + p * t;
  return p;
}
template <typename R>
MT_HOST_DEVICE inline R erfinv_tail(R t) {
  const R c[9] = {R(-0.000200214257), R(0.000100950558), R(0.00134934322), R(-0.00367342844), R(0.00573950773),
                  R(-0.0076224613),   R(0.00943887047),  R(1.00167406),    R(2.83297682)};
  R p = c[0];
  for (int i = 1; i < 9; ++i) p = c[i] + p * t;
  return p;
}

// erfinv by the rational first guess refined by Newton's method (double precision throughout).
MT_HOST_DEVICE inline double erfinv_d(double y) {
  if (!(y > -1.0 && y < 1.0)) {
    if (y == 1.0) return std::numeric_limits<double>::infinity();
    if (y == -1.0) return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double w = -std::log((1.0 - y) * (1.0 + y)), ay = std::fabs(y);
  double x = (w < 5.0 ? erfinv_central<double>(w - 2.5) : erfinv_tail<double>(std::sqrt(w) - 3.0)) * y;
  if (ay < 0.5) {
    for (int i = 0; i < 2; ++i) x -= (std::erf(x) - y) / (1.1283791670955126 * std::exp(-x * x));
    return x;
  }
  // Beyond |y| = 1/2, Newton on log(erfc(|x|)) = log(1 - |y|) (1 - |y| is exact): erf(x) rounds to within a few
  // steps of 1 there, and Newton on erfc itself crawled from the guess (fitted for w < 16) in the deep tail
  // (erfinv(1 - 2^-53) 7% off after two steps). Quadratic from the guess: 2 steps to w = 16, 4 at 1 - 2^-53.
  const double r = 1.0 - ay;
  double ax = std::fabs(x);
  for (int i = 0; i < 6; ++i) {
    const double e = std::erfc(ax), step = std::log(e / r) * e / (1.1283791670955126 * std::exp(-ax * ax));
    ax += step;
    if (std::fabs(step) < 1e-9 * ax) break;  // the next step would be under 1e-17 relative
  }
  return std::copysign(ax, y);
}

// erfinv in float (float, half and bfloat16 tensors): erfinv_d's rational first guess evaluated in float (Giles's
// single-precision approximation), both branches computed and one selected, so that a dense loop vectorises 16 wide
// (logf and sqrtf have vector forms: Note [Sim vector math]). Within 2.7e-7 relative of float64's erfinv over
// (-1, 1) (7M samples, tails and the neighbourhood of 0 included; float's rounding alone: 6e-8; the float floor of
// Note [Alignment tolerance]: 1.3e-6). Two Newton steps on erff/erfcf took it to 9e-8 at 8 vector calls an element
// more and ran at 0.08x the CPU's float kernel (MKL's vsErfInv; docs/speed.md at c1b68db).
MT_HOST_DEVICE inline float erfinv_f(float y) {
  const float w = -std::log((1.0f - y) * (1.0f + y));
  const float p = erfinv_central<float>(w - 2.5f), q = erfinv_tail<float>(std::sqrt(w) - 3.0f);
  const float x = (w < 5.0f ? p : q) * y;
  const float inf = std::numeric_limits<float>::infinity();
  const float edge = y == 1.0f ? inf : (y == -1.0f ? -inf : std::numeric_limits<float>::quiet_NaN());
  return (y > -1.0f && y < 1.0f) ? x : edge;
}

// Note [lgamma in float]
// float, half and bfloat16 tensors take this form of lgamma; float64 keeps libm's. glibc's lgammaf has no vector
// form, and one call an element ran at 0.14x the CPU (docs/speed.md at c1b68db). In double, every branch computed
// and one selected, so that a dense loop vectorises over libmvec's double log and sin (mt_vmath_*, sim_vmath_double.h):
//   - z = x, or 1 - x below 1/2 (the reflection lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x));
//   - below 8, z is shifted to z + 8 and the product p = z (z + 1) ... (z + 7) divided out: lgamma(z) =
//     lgamma(z + 8) - log(p);
//   - lgamma(z + 8) by Stirling's series to its 1/z^11 term (the next is under 1.2e-14 at 8);
//   - sin(pi x) through x's distance to its nearest integer, so that it is exactly 0 at the poles (lgamma = +inf);
//     the two logs are one: log(pi p / |sin|) on the reflected side, log(1 / p) on the other.
// glibc's double log and sin have libmvec forms (_ZGVdN4v_log...): mt_vmath_* (sim_vmath_double.h) call them in
// the AVX2 and AVX-512 variants, 4 and 8 doubles a call.
// Near the roots (x = 1, 2 and the negative ones) the terms cancel to within ~1e-15 absolute; 1 and 2 return 0
// exactly, as libm does. test_special.py (test_float_forms_on_dense_grids) checks it against float64.
MT_HOST_DEVICE inline float lgamma_f(float xf) {
  constexpr double kPi = 3.14159265358979323846, kHalfLog2Pi = 0.91893853320467274178;
  const double x = xf;
  const bool reflect = x < 0.5, shift = (reflect ? 1.0 - x : x) < 8.0;
  const double z = reflect ? 1.0 - x : x;
  double q = z;
  MT_UNROLL_ALL
  for (int k = 1; k < 8; ++k) q *= z + k;
  const double p = shift ? q : 1.0, zz = shift ? z + 8.0 : z;
  const double r = 1.0 / zz, r2 = r * r;
  const double series =
      r * (1.0 / 12 +
           r2 * (-1.0 / 360 + r2 * (1.0 / 1260 + r2 * (-1.0 / 1680 + r2 * (1.0 / 1188 + r2 * (-691.0 / 360360))))));
  const double stirling = (zz - 0.5) * mt_vmath_log(zz) - zz + kHalfLog2Pi + series;
  const double s = std::fabs(mt_vmath_sin(kPi * (x - std::rint(x))));
  // blends by rf (0 or 1), not selects: GCC sank a call whose result one side of a select used into a branch, and
  // the loop stayed scalar (the same for the roots' 0 below)
  const double rf = reflect ? 1.0 : 0.0;
  const double v = stirling * (1.0 - 2.0 * rf) + mt_vmath_log((rf * kPi * p + (1.0 - rf)) / (rf * s + (1.0 - rf) * p));
  const double keep = ((xf == 1.0f) | (xf == 2.0f)) ? 0.0 : 1.0;
  const float out = static_cast<float>(v * keep + 0.0);  // + 0: lgamma(1) is +0
  return std::fabs(xf) == std::numeric_limits<float>::infinity() ? std::numeric_limits<float>::infinity() : out;
}

// Fn<op>::f<T, O>(a[, b[, c]], p): the op on operands in O = opmath_t<T> (T is the stored dtype); returns O, or
// bool for the predicates. The primary template has no definition: a table row without its functor is a compile
// error. MT_EW_FN spells the signature once.
template <EwOp op>
struct Fn;
#define MT_EW_FN template <typename T, typename O> MT_HOST_DEVICE static O f
#define MT_EW_PRED template <typename T, typename O> MT_HOST_DEVICE static bool f

// ---- binary arithmetic ---------------------------------------------------------------------------------------
template <> struct Fn<EwOp::Add> {
  MT_EW_FN(O a, O b, const EwParams& p) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<O>(a || (p.ialpha && b));
    else if constexpr (is_int_v<T>) return static_cast<O>(a + static_cast<O>(p.ialpha) * b);
    else return static_cast<O>(a + static_cast<O>(p.alpha) * b);
  }
};
template <> struct Fn<EwOp::Sub> {
  MT_EW_FN(O a, O b, const EwParams& p) {
    if constexpr (is_int_v<T>) return static_cast<O>(a - static_cast<O>(p.ialpha) * b);
    else return static_cast<O>(a - static_cast<O>(p.alpha) * b);
  }
};
template <> struct Fn<EwOp::Mul> {
  MT_EW_FN(O a, O b, const EwParams&) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<O>(a && b);
    else return static_cast<O>(a * b);
  }
};
template <> struct Fn<EwOp::Div> {
  MT_EW_FN(O a, O b, const EwParams&) { return static_cast<O>(a / b); }
};
template <> struct Fn<EwOp::DivTrunc> {
  MT_EW_FN(O a, O b, const EwParams&) {
    if constexpr (is_int_v<T>) return int_div(a, b);
    else return static_cast<O>(std::trunc(a / b));
  }
};
// The three rows built on fmod: f is the exact functor; f_fast<kFast> is shared with the sim's vector form
// (Note [Vectorised fmod]), exact where fmod_in_range holds (kFastFmod marks them).
template <> struct Fn<EwOp::DivFloor> {
  static constexpr bool kFastFmod = true;
  MT_EW_FN(O a, O b, const EwParams& p) { return f_fast<T, O, false>(a, b, p); }
  template <typename T, typename O, bool kFast>
  MT_HOST_DEVICE static O f_fast(O a, O b, const EwParams&) {
    if constexpr (is_int_v<T>) {
      O q = int_div(a, b);
      if constexpr (std::is_signed_v<T>) {
        if (b != 0 && int_mod(a, b) != 0 && ((a < 0) != (b < 0))) q -= 1;
      }
      return q;
    } else {
      return floor_div_float<O, kFast>(a, b);
    }
  }
};
template <> struct Fn<EwOp::Remainder> {
  static constexpr bool kFastFmod = true;
  MT_EW_FN(O a, O b, const EwParams& p) { return f_fast<T, O, false>(a, b, p); }
  template <typename T, typename O, bool kFast>
  MT_HOST_DEVICE static O f_fast(O a, O b, const EwParams&) {
    if constexpr (is_int_v<T>) {
      O r = int_mod(a, b);
      if constexpr (std::is_signed_v<T>) {
        if (r != 0 && ((r < 0) != (b < 0))) r += b;
      }
      return r;
    } else {
      O m = mt_fmod<kFast>(a, b);
      if (m != 0 && ((b < 0) != (m < 0))) m += b;
      return m;
    }
  }
};
template <> struct Fn<EwOp::Fmod> {
  static constexpr bool kFastFmod = true;
  MT_EW_FN(O a, O b, const EwParams& p) { return f_fast<T, O, false>(a, b, p); }
  template <typename T, typename O, bool kFast>
  MT_HOST_DEVICE static O f_fast(O a, O b, const EwParams&) {
    if constexpr (is_int_v<T>) return int_mod(a, b);
    else return static_cast<O>(mt_fmod<kFast>(a, b));
  }
};
// Note [pow in float]
// float, half and bfloat16 pow (opmath float) is exp(b log|a|) in double on libmvec's double log and exp
// (mt_vmath_*, sim_vmath_double.h), then C's rules for the sign and the special values as selects: an odd integer b
// gives a negative base's sign (-0 included), a non-integer b makes a finite negative base NaN, pow(a, +-0) and
// pow(1, b) are 1 whatever the other (NaN too), pow(-1, +-inf) is 1. b log|a| in double is within 2^-52 relative,
// so the result is within double's rounding before the one rounding to float (float's rounding of pow but for rare
// double roundings). A dense loop vectorises; powf one element at a time ran at 0.3-0.5x the CPU's vectorised pow
// (docs/speed.md at c1b68db), and libmvec's powf (4 ulp) moved TorchTitan's RoPE-driven losses outside the
// alignment rule (sim_vmath.h).
MT_HOST_DEVICE inline float pow_f(float a, float b) {
  const double r = mt_vmath_exp(static_cast<double>(b) * mt_vmath_log(std::fabs(static_cast<double>(a))));
  const float half = 0.5f * b;
  const bool integer = std::rint(b) == b, odd = integer && std::rint(half) != half;  // |b| >= 2^24 is even
  const float v = static_cast<float>(std::signbit(a) & odd ? -r : r);
  const bool nan = (a < 0.0f) & (a != -std::numeric_limits<float>::infinity()) & !integer;
  const bool one =
      (b == 0.0f) | (a == 1.0f) | ((a == -1.0f) & (std::fabs(b) == std::numeric_limits<float>::infinity()));
  return one ? 1.0f : (nan ? std::numeric_limits<float>::quiet_NaN() : v);
}
template <> struct Fn<EwOp::Pow> {
  MT_EW_FN(O a, O b, const EwParams&) {
    if constexpr (is_int_v<T>) return int_pow(a, b);
    else if constexpr (std::is_same_v<O, float>) return pow_f(a, b);
    else return static_cast<O>(std::pow(a, b));
  }
};
// maximum / minimum: NaN wins (floating), or / and for bool.
template <bool kMax>
struct MaxMin {
  MT_EW_FN(O a, O b, const EwParams&) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<O>(kMax ? (a || b) : (a && b));
    else if constexpr (is_int_v<T>) return kMax ? (a > b ? a : b) : (a < b ? a : b);
    else {
      if (a != a) return a;
      if (b != b) return b;
      return kMax ? (a > b ? a : b) : (a < b ? a : b);
    }
  }
};
template <> struct Fn<EwOp::Maximum> : MaxMin<true> {};
template <> struct Fn<EwOp::Minimum> : MaxMin<false> {};
template <> struct Fn<EwOp::Atan2> {
  MT_EW_FN(O a, O b, const EwParams&) { return static_cast<O>(std::atan2(a, b)); }
};
template <> struct Fn<EwOp::Copysign> {
  MT_EW_FN(O a, O b, const EwParams&) { return static_cast<O>(std::copysign(a, b)); }
};
template <> struct Fn<EwOp::Hypot> {
  MT_EW_FN(O a, O b, const EwParams&) { return static_cast<O>(std::hypot(a, b)); }
};
// fmax / fmin: NaN loses (floating); integers as maximum / minimum.
template <bool kMax>
struct FMaxMin {
  MT_EW_FN(O a, O b, const EwParams&) {
    if constexpr (is_float_v<O>) return kMax ? std::fmax(a, b) : std::fmin(a, b);
    else return kMax ? (a > b ? a : b) : (a < b ? a : b);
  }
};
template <> struct Fn<EwOp::Fmax> : FMaxMin<true> {};
template <> struct Fn<EwOp::Fmin> : FMaxMin<false> {};
// log(exp(a) + exp(b)) and its base-2 twin, exact for equal infinities.
template <> struct Fn<EwOp::Logaddexp> {
  MT_EW_FN(O a, O b, const EwParams&) {
    if (a == b && (a - a != O(0))) return a;  // +-inf twice (NaN fails a == b)
    const O m = a > b ? a : b;
    return static_cast<O>(m + std::log1p(std::exp(-std::abs(a - b))));
  }
};
template <> struct Fn<EwOp::Logaddexp2> {
  MT_EW_FN(O a, O b, const EwParams&) {
    if (a == b && (a - a != O(0))) return a;
    const O m = a > b ? a : b;
    return static_cast<O>(m + std::log1p(std::exp2(-std::abs(a - b))) * O(1.44269504088896340736));
  }
};
// gcd by Euclid on magnitudes; lcm = |a / gcd * b|, 0 when both are 0.
template <typename O>
MT_HOST_DEVICE inline O gcd_of(O a, O b) {
  a = a < 0 ? static_cast<O>(-a) : a;
  b = b < 0 ? static_cast<O>(-b) : b;
  while (a != 0) {
    const O c = a;
    a = static_cast<O>(b % a);
    b = c;
  }
  return b;
}
// heaviside(x, values): values where x is 0, else x > 0.
template <> struct Fn<EwOp::Heaviside> {
  MT_EW_FN(O a, O b, const EwParams&) { return a == O(0) ? b : static_cast<O>(a > O(0)); }
};
// nextafter by one step of the stored type's representation (float16 and bfloat16 step in their own ulps).
template <typename T, typename U>
MT_HOST_DEVICE inline T next_toward(T a, T b) {
  using C = std::conditional_t<sizeof(T) >= 4, T, float>;  // half types compare as float (nvcc: no ambiguity)
  const C ca = static_cast<C>(a), cb = static_cast<C>(b);
  if (ca != ca || cb != cb) return static_cast<T>(ca + cb);
  if (ca == cb) return b;
  U bits;
  memcpy(&bits, &a, sizeof(U));
  if (ca == C(0)) bits = static_cast<U>((cb < C(0) ? (U(1) << (sizeof(U) * 8 - 1)) : U(0)) | U(1));
  else if ((ca < cb) == (ca > C(0))) ++bits;
  else --bits;
  T r;
  memcpy(&r, &bits, sizeof(U));
  return r;
}
template <> struct Fn<EwOp::Nextafter> {
  MT_EW_FN(O a, O b, const EwParams&) {
    using U = std::conditional_t<sizeof(T) == 8, uint64_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>>;
    return static_cast<O>(next_toward<T, U>(static_cast<T>(a), static_cast<T>(b)));
  }
};
template <> struct Fn<EwOp::Gcd> {
  MT_EW_FN(O a, O b, const EwParams&) { return gcd_of(a, b); }
};
template <> struct Fn<EwOp::Lcm> {
  MT_EW_FN(O a, O b, const EwParams&) {
    const O g = gcd_of(a, b);
    if (g == 0) return O(0);
    const O l = static_cast<O>(a / g * b);
    return l < 0 ? static_cast<O>(-l) : l;
  }
};

// ---- binary bitwise, comparisons and logic -------------------------------------------------------------------
template <> struct Fn<EwOp::BitAnd> {
  MT_EW_FN(O a, O b, const EwParams&) { return static_cast<O>(a & b); }
};
template <> struct Fn<EwOp::BitOr> {
  MT_EW_FN(O a, O b, const EwParams&) { return static_cast<O>(a | b); }
};
template <> struct Fn<EwOp::BitXor> {
  MT_EW_FN(O a, O b, const EwParams&) { return static_cast<O>(a ^ b); }
};
// Shifts by a negative amount or past the bit width give 0 (or -1 for a negative value shifted right), as ATen.
template <> struct Fn<EwOp::Lshift> {
  MT_EW_FN(O a, O b, const EwParams&) {
    constexpr O bits = static_cast<O>(sizeof(T) * 8);
    if constexpr (std::is_signed_v<O>) {
      if (b < 0) return O(0);
    }
    if (b >= bits) return O(0);
    return static_cast<O>(static_cast<std::make_unsigned_t<T>>(a) << b);
  }
};
template <> struct Fn<EwOp::Rshift> {
  MT_EW_FN(O a, O b, const EwParams&) {
    constexpr O bits = static_cast<O>(sizeof(T) * 8);
    bool out_of_range = b >= bits;
    if constexpr (std::is_signed_v<O>) out_of_range = out_of_range || b < 0;
    if (out_of_range) {
      if constexpr (std::is_signed_v<T>) return a < 0 ? O(-1) : O(0);
      else return O(0);
    }
    return static_cast<O>(a >> b);
  }
};
template <> struct Fn<EwOp::Eq> {
  MT_EW_PRED(O a, O b, const EwParams&) { return a == b; }
};
template <> struct Fn<EwOp::Ne> {
  MT_EW_PRED(O a, O b, const EwParams&) { return a != b; }
};
template <> struct Fn<EwOp::Lt> {
  MT_EW_PRED(O a, O b, const EwParams&) { return a < b; }
};
template <> struct Fn<EwOp::Le> {
  MT_EW_PRED(O a, O b, const EwParams&) { return a <= b; }
};
template <> struct Fn<EwOp::Gt> {
  MT_EW_PRED(O a, O b, const EwParams&) { return a > b; }
};
template <> struct Fn<EwOp::Ge> {
  MT_EW_PRED(O a, O b, const EwParams&) { return a >= b; }
};
template <> struct Fn<EwOp::LogicalAnd> {
  // & and |, not && and ||: both sides are cheap, and a short circuit is a branch on the data (random masks
  // mispredicted half the time: 2.2 ms for a 1M-element logical_and on the sim, against the CPU's 0.016)
  MT_EW_PRED(O a, O b, const EwParams&) { return (a != O(0)) & (b != O(0)); }
};
template <> struct Fn<EwOp::LogicalOr> {
  MT_EW_PRED(O a, O b, const EwParams&) { return (a != O(0)) | (b != O(0)); }
};
template <> struct Fn<EwOp::LogicalXor> {
  MT_EW_PRED(O a, O b, const EwParams&) { return (a != O(0)) != (b != O(0)); }
};

// ---- ternary ---------------------------------------------------------------------------------------------------
// where(mask, a, b): the loops read the mask operand as bool (ew_has_mask) and pass it as 0 or 1.
template <> struct Fn<EwOp::Where> {
  MT_EW_FN(O mask, O a, O b, const EwParams&) { return mask != O(0) ? a : b; }
};
// lerp(self, end, weight), in ATen's two-sided form (exact at both ends).
template <> struct Fn<EwOp::Lerp> {
  MT_EW_FN(O a, O b, O c, const EwParams&) {
    const O diff = b - a;
    return std::abs(c) < O(0.5) ? a + c * diff : b - diff * (O(1) - c);
  }
};
template <> struct Fn<EwOp::Addcmul> {
  MT_EW_FN(O a, O b, O c, const EwParams& p) {
    if constexpr (is_int_v<T>) return static_cast<O>(a + static_cast<O>(p.ialpha) * b * c);
    else if constexpr (std::is_same_v<T, bool>) return static_cast<O>(a || (b && c));
    else return static_cast<O>(a + static_cast<O>(p.alpha) * b * c);
  }
};
template <> struct Fn<EwOp::Addcdiv> {
  MT_EW_FN(O a, O b, O c, const EwParams& p) { return static_cast<O>(a + static_cast<O>(p.alpha) * (b / c)); }
};
// clamp(a, lo, hi) with NaN propagating from a and from the bounds (floating), bounds present per has_lo/has_hi.
// Selects without an early exit, so that a loop of it compiles to blends (with per-element bounds, the branches
// this had mispredicted on every other element: clamp with tensor bounds ran at 0.04x the CPU).
template <typename T, typename O>
MT_HOST_DEVICE inline O clamp_to(O a, O lo, O hi, const EwParams& p) {
  O r = a;
  if constexpr (is_float_v<O>) {
    const O r1 = (lo != lo) ? lo : (a < lo ? lo : a), q = p.has_lo ? r1 : a;
    const O r2 = (hi != hi) ? hi : (q > hi ? hi : q), s = p.has_hi ? r2 : q;
    return (a != a) ? a : s;
  } else {
    if (p.has_lo) r = r < lo ? lo : r;
    if (p.has_hi) r = r > hi ? hi : r;
  }
  return r;
}
template <> struct Fn<EwOp::ClampTensor> {
  MT_EW_FN(O a, O lo, O hi, const EwParams& p) { return clamp_to<T, O>(a, lo, hi, p); }
};
template <> struct Fn<EwOp::ClampScalar> {
  MT_EW_FN(O a, const EwParams& p) {
    if constexpr (is_int_v<T>) return clamp_to<T, O>(a, static_cast<O>(p.ilo), static_cast<O>(p.ihi), p);
    else return clamp_to<T, O>(a, static_cast<O>(p.lo), static_cast<O>(p.hi), p);
  }
};

// ---- unary floating functions ----------------------------------------------------------------------------------
template <> struct Fn<EwOp::Exp> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::exp(a)); }
};
template <> struct Fn<EwOp::Exp2> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::exp2(a)); }
};
template <> struct Fn<EwOp::Expm1> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::expm1(a)); }
};
template <> struct Fn<EwOp::Log> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::log(a)); }
};
template <> struct Fn<EwOp::Log2> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::log2(a)); }
};
template <> struct Fn<EwOp::Log10> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::log10(a)); }
};
template <> struct Fn<EwOp::Log1p> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::log1p(a)); }
};
template <> struct Fn<EwOp::Sqrt> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::sqrt(a)); }
};
template <> struct Fn<EwOp::Rsqrt> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(O(1) / std::sqrt(a)); }
};
template <> struct Fn<EwOp::Reciprocal> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(O(1) / a); }
};
template <> struct Fn<EwOp::Sin> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::sin(a)); }
};
template <> struct Fn<EwOp::Cos> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::cos(a)); }
};
template <> struct Fn<EwOp::Tan> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::tan(a)); }
};
template <> struct Fn<EwOp::Tanh> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::tanh(a)); }
};
template <> struct Fn<EwOp::Sigmoid> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(O(1) / (O(1) + std::exp(-a))); }
};
template <> struct Fn<EwOp::Erf> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::erf(a)); }
};
template <> struct Fn<EwOp::Erfinv> {
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (std::is_same_v<O, float>) return erfinv_f(a);
    else return static_cast<O>(erfinv_d(static_cast<double>(a)));
  }
};
template <> struct Fn<EwOp::Lgamma> {  // Note [lgamma in float]
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (std::is_same_v<O, float>) return lgamma_f(a);
    else return static_cast<O>(std::lgamma(a));
  }
};
template <> struct Fn<EwOp::Sinh> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::sinh(a)); }
};
#define MT_EW_STD_UNARY(Name, fn)                                         \
  template <> struct Fn<EwOp::Name> {                                     \
    MT_EW_FN(O a, const EwParams&) { return static_cast<O>(std::fn(a)); } \
  };
MT_EW_STD_UNARY(Cosh, cosh)
MT_EW_STD_UNARY(Asin, asin)
MT_EW_STD_UNARY(Acos, acos)
MT_EW_STD_UNARY(Atan, atan)
MT_EW_STD_UNARY(Asinh, asinh)
MT_EW_STD_UNARY(Acosh, acosh)
MT_EW_STD_UNARY(Atanh, atanh)
MT_EW_STD_UNARY(Erfc, erfc)
#undef MT_EW_STD_UNARY
// sin(pi x) / (pi x), 1 at 0.
template <> struct Fn<EwOp::Sinc> {
  MT_EW_FN(O a, const EwParams&) {
    if (a == O(0)) return O(1);
    const O x = static_cast<O>(3.14159265358979323846) * a;
    return static_cast<O>(std::sin(x) / x);
  }
};

// ---- other unary ops -------------------------------------------------------------------------------------------
template <> struct Fn<EwOp::Neg> {
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (std::is_signed_v<O> && is_int_v<O>) return static_cast<O>(-static_cast<std::make_unsigned_t<O>>(a));
    else return static_cast<O>(-a);
  }
};
template <> struct Fn<EwOp::Abs> {
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) return a;
    else if constexpr (is_int_v<T>) return a < 0 ? static_cast<O>(-static_cast<std::make_unsigned_t<O>>(a)) : a;
    else return static_cast<O>(std::abs(a));
  }
};
template <> struct Fn<EwOp::Sign> {
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (std::is_same_v<T, bool>) return a;
    else if constexpr (std::is_unsigned_v<T>) return static_cast<O>(a > 0);
    else return static_cast<O>((O(0) < a) - (a < O(0)));
  }
};
// The rounding family leaves integers as they are.
template <> struct Fn<EwOp::Floor> {
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (is_float_v<O>) return static_cast<O>(std::floor(a));
    else return a;
  }
};
template <> struct Fn<EwOp::Ceil> {
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (is_float_v<O>) return static_cast<O>(std::ceil(a));
    else return a;
  }
};
template <> struct Fn<EwOp::Round> {  // half to even
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (is_float_v<O>) return static_cast<O>(std::nearbyint(a));
    else return a;
  }
};
template <> struct Fn<EwOp::Trunc> {
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (is_float_v<O>) return static_cast<O>(std::trunc(a));
    else return a;
  }
};
template <> struct Fn<EwOp::Frac> {
  MT_EW_FN(O a, const EwParams&) { return static_cast<O>(a - std::trunc(a)); }
};
template <> struct Fn<EwOp::NanToNum> {
  MT_EW_FN(O a, const EwParams& p) {
    if constexpr (is_float_v<O>) {
      if (a != a) return static_cast<O>(p.nan);
      if (a == std::numeric_limits<O>::infinity()) return static_cast<O>(p.posinf);
      if (a == -std::numeric_limits<O>::infinity()) return static_cast<O>(p.neginf);
    }
    return a;
  }
};
template <> struct Fn<EwOp::BitNot> {
  MT_EW_FN(O a, const EwParams&) {
    if constexpr (std::is_same_v<T, bool>) return static_cast<O>(!a);
    else return static_cast<O>(~a);
  }
};
template <> struct Fn<EwOp::IsNan> {
  MT_EW_PRED(O a, const EwParams&) {
    if constexpr (is_float_v<O>) return a != a;
    else return false;
  }
};
template <> struct Fn<EwOp::IsInf> {
  MT_EW_PRED(O a, const EwParams&) {
    if constexpr (is_float_v<O>)
      return a == std::numeric_limits<O>::infinity() || a == -std::numeric_limits<O>::infinity();
    else return false;
  }
};
template <> struct Fn<EwOp::IsFinite> {
  MT_EW_PRED(O a, const EwParams&) {
    if constexpr (is_float_v<O>) return a == a && a - a == O(0);
    else return true;
  }
};
template <> struct Fn<EwOp::LogicalNot> {
  MT_EW_PRED(O a, const EwParams&) { return !(a != O(0)); }
};
template <> struct Fn<EwOp::Signbit> {
  MT_EW_PRED(O a, const EwParams&) {
    if constexpr (is_float_v<O>) return std::signbit(a);
    else if constexpr (std::is_signed_v<O>) return a < O(0);
    else return false;
  }
};
// frexp from the bits: a = m * 2^e with |m| in [0.5, 1); 0, the infinities and NaN are themselves with e = 0
// (std::frexp). The exponent field gives e and m is a with that field set to the bias - 1 (2^-1); a subnormal is
// first scaled by 2^(mantissa bits + 1), exactly, into the normal range. The half types arrive as float, where each
// of their values is normal and m exact in their own type. Two rows, the mantissa and the exponent (as a value of
// the compute type: exact, |e| <= 1074), so each is one pass without a libm call.
template <typename O>
MT_HOST_DEVICE inline O frexp_bits(O a, int& e) {
  using U = std::conditional_t<sizeof(O) == 8, uint64_t, uint32_t>;
  constexpr int kMant = sizeof(O) == 8 ? 52 : 23;
  constexpr U kField = sizeof(O) == 8 ? 0x7ff : 0xff;
  constexpr int kHalf = sizeof(O) == 8 ? 1022 : 126;  // the biased exponent of 0.5
  e = 0;
  if (!(a - a == O(0)) || a == O(0)) return a;  // NaN, the infinities, zeros
  U bits;
  memcpy(&bits, &a, sizeof(U));
  int lowered = 0;
  if (((bits >> kMant) & kField) == 0) {  // subnormal
    a *= static_cast<O>(U(1) << (kMant + 1));
    memcpy(&bits, &a, sizeof(U));
    lowered = kMant + 1;
  }
  e = static_cast<int>((bits >> kMant) & kField) - kHalf - lowered;
  bits = (bits & ~(kField << kMant)) | (static_cast<U>(kHalf) << kMant);
  memcpy(&a, &bits, sizeof(U));
  return a;
}
template <> struct Fn<EwOp::FrexpMantissa> {
  MT_EW_FN(O a, const EwParams&) {
    int e;
    return frexp_bits(a, e);
  }
};
template <> struct Fn<EwOp::FrexpExponent> {
  MT_EW_FN(O a, const EwParams&) {
    int e;
    frexp_bits(a, e);
    return static_cast<O>(e);
  }
};
// The argument of a real number: pi below 0, 0 otherwise, NaN kept.
template <> struct Fn<EwOp::Angle> {
  MT_EW_FN(O a, const EwParams&) {
    if (a != a) return a;
    return a < O(0) ? static_cast<O>(3.14159265358979323846) : O(0);
  }
};

} // namespace mytorch::ew

// The NN and Special groups' functors.
#include "mytorch/ops_nn.h"
#include "mytorch/ops_special.h"

namespace mytorch::ew {

// Whether op's functor has the vector form of Note [Vectorised fmod].
template <EwOp op, typename = void> struct HasFastFmod : std::false_type {};
template <EwOp op> struct HasFastFmod<op, std::void_t<decltype(Fn<op>::kFastFmod)>> : std::true_type {};
// Whether op's functor has a branch-free float form (Note [Special functions in float]).
template <EwOp op, typename = void> struct HasFloatForm : std::false_type {};
template <EwOp op> struct HasFloatForm<op, std::void_t<decltype(Fn<op>::kFloatForm)>> : std::true_type {};

// apply<op, T>(a, b, c, p): op's functor on its first ew_arity(op) operands (in opmath_t<T>).
template <EwOp op, typename T>
MT_HOST_DEVICE inline auto apply(opmath_t<T> a, opmath_t<T> b, opmath_t<T> c, const EwParams& p) {
  using O = opmath_t<T>;
  if constexpr (ew_arity(op) == 1) return Fn<op>::template f<T, O>(a, p);
  else if constexpr (ew_arity(op) == 2) return Fn<op>::template f<T, O>(a, b, p);
  else return Fn<op>::template f<T, O>(a, b, c, p);
}

// Whether the kernels take compute dtype T for `op`: the row's dtypes column (what the loops instantiate; the
// glue asks elementwise_supported, which reads the same).
template <EwOp op, typename T>
constexpr bool supported() {
  constexpr bool fl = std::is_floating_point_v<T> || std::is_same_v<T, c10::Half> || std::is_same_v<T, c10::BFloat16>;
  constexpr bool in = std::is_integral_v<T> && !std::is_same_v<T, bool>;
  constexpr bool bo = std::is_same_v<T, bool>;
  switch (ew_dtypes(op)) {
    case EwDtypes::All:
    case EwDtypes::Mask: return fl || in || bo;
    case EwDtypes::Num: return fl || in;
    case EwDtypes::Int: return in;
    case EwDtypes::IntBool: return in || bo;
    case EwDtypes::Float:
    case EwDtypes::ToFloat: return fl;
    case EwDtypes::ToWide: return std::is_floating_point_v<T>;
  }
  return false;
}

} // namespace mytorch::ew
