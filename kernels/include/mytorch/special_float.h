// Float forms of the Special group's Bessel functions and ndtri (Note [Special functions in float]).
// Included by ops_special.h after the double forms, whose tables and guesses these share.
#pragma once

#include <cmath>
#include <limits>

#include "mytorch/macros.h"
#include "mytorch/special_cheb.h"

namespace mytorch::ew::special {

// Note [Special functions in float]
// float, half and bfloat16 tensors (whose opmath is float) take these forms of i0, i0e, i1, i1e, bessel_j0/j1/y0/y1,
// modified_bessel_i0/i1/k0/k1, scaled_modified_bessel_k0/k1, spherical_bessel_j0 and ndtri; float64 keeps the double
// forms above.
//   - I and K sum the Chebyshev expansions of Note [Bessel functions by Chebyshev expansions] cut to float's
//     precision (special_cheb.h's *_FLOAT_TERMS: 6 to 18 terms); J and Y sum expansions of the same kind (Cephes's
//     scheme, tables of our own from scripts/gen_special_tables.py): their power series parts on |x| <= 8, Hankel's
//     P and Q beyond, held to an absolute error as the alignment rule's floor (1e-5) holds them near their zeros;
//   - ndtri is Acklam's rational guess (within 1.2e-9 relative before rounding: no refinement step);
//   - spherical_bessel_j0 is sin(x) / x in float, as ATen's float kernel computes it;
//   - every branch is computed and one selected, so that a dense loop vectorises: expf, logf and sqrtf have vector
//     forms (Note [Sim vector math]), as ATen's CPU kernels evaluate Cephes's float tables in vector registers.
// The double forms, one element at a time, ran at 0.04-0.4x the CPU's float kernels (docs/speed.md at c1b68db; J and
// Y by Miller's recurrence at 0.17-0.22x).
// test_special.py (test_float_forms_on_dense_grids) checks them against float64 on dense grids of their ranges.

// The small-argument series accumulate in double: their terms alternate in sign and cancel to 1/10 of their sum
// near the ends of the range (I1 at x = 8, K0 near 1.3), where float's accumulation lost 24 float steps. The large
// ones are sums of fast-falling terms around a value near 1: float is within 4 steps there.
// out = the table's float cut summed at t (statements, not a lambda: GCC did not inline one, and the loop over
// elements stayed scalar).
#define MT_CHEB_F(out, table, R, t)                                                      \
  {                                                                                      \
    const double c_[] = MT_CHEB_##table;                                                 \
    out = static_cast<float>(chebyshev_series<MT_CHEB_##table##_FLOAT_TERMS, R>(c_, t)); \
  }

// exp(-x) I_nu(x) by the small-argument expansion (meant for 0 <= x <= 8).
template <int nu>
MT_HOST_DEVICE MT_FORCE_INLINE float bessel_i_small_f(float ax) {
  const float t = 0.25f * ax - 1.0f;
  float v;
  if constexpr (nu == 0) MT_CHEB_F(v, I0SMALL, double, t)
  else MT_CHEB_F(v, I1SMALL, double, t)
  return nu == 0 ? v : ax * v;
}

// I_nu(x) or exp(-|x|) I_nu(x).
template <int nu, bool scaled>
MT_HOST_DEVICE MT_FORCE_INLINE float bessel_i_f(float x) {
  const float ax = std::fabs(x), tl = 16.0f / ax - 1.0f;
  float large;
  if constexpr (nu == 0) MT_CHEB_F(large, I0LARGE, float, tl)
  else MT_CHEB_F(large, I1LARGE, float, tl)
  float v = ax <= 8.0f ? bessel_i_small_f<nu>(ax) : large / std::sqrt(ax);
  // I = exp(|x|) exp(-|x|) I: inf where expf overflows (|x| > 88.7) and NaN at +-inf (inf * 0), as ATen's kernel
  if constexpr (!scaled) v = std::exp(ax) * v;
  if constexpr (nu == 1) v = std::copysign(v, x);
  return v;
}

// K_nu(x) or exp(x) K_nu(x): K0 = A(x^2) - log(x/2) I0, K1 = log(x/2) I1 + B(x^2) / x on (0, 2]; beyond,
// sqrt(x) exp(x) K as a function of 4 / x - 1.
template <int nu, bool scaled>
MT_HOST_DEVICE MT_FORCE_INLINE float bessel_k_f(float x) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const float ts = 0.5f * x * x - 1.0f, tl = 4.0f / x - 1.0f, lg = std::log(0.5f * x), ex = std::exp(x);
  float a, small, large;
  if constexpr (nu == 0) {
    MT_CHEB_F(a, K0SMALL, double, ts)
    MT_CHEB_F(large, K0LARGE, float, tl)
    small = a - lg * (ex * bessel_i_small_f<0>(x));
  } else {
    MT_CHEB_F(a, K1SMALL, double, ts)
    MT_CHEB_F(large, K1LARGE, float, tl)
    small = lg * (ex * bessel_i_small_f<1>(x)) + a / x;
  }
  large /= std::sqrt(x);
  float v;
  if constexpr (scaled) v = x <= 2.0f ? ex * small : large;
  else v = x <= 2.0f ? small : large * std::exp(-x);
  v = x == 0.0f ? inf : v;
  v = x == inf ? 0.0f : v;
  return x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : v;  // NaN stays NaN through the large form
}

// J_nu and Y_nu of |x| > 8 by Hankel's form: J = A (P cos chi - Q sin chi), Y = A (P sin chi + Q cos chi), A =
// sqrt(2 / (pi x)), chi = x - (2 nu + 1) pi / 4, with P and x Q functions of 128 / x^2 - 1 (special_cheb.h); cos chi
// and sin chi come from cos x and sin x (x is exact where x - pi / 4 would round: 3e-5 at x = 1000).
template <int nu>
MT_HOST_DEVICE MT_FORCE_INLINE void bessel_jy_large_f(float ax, float& j, float& y) {
  const float t = 128.0f / (ax * ax) - 1.0f;
  float p, q;
  if constexpr (nu == 0) {
    MT_CHEB_F(p, P0LARGE, float, t)
    MT_CHEB_F(q, Q0LARGE, float, t)
  } else {
    MT_CHEB_F(p, P1LARGE, float, t)
    MT_CHEB_F(q, Q1LARGE, float, t)
  }
  q /= ax;
  const float s = std::sin(ax), c = std::cos(ax);
  // sqrt 2 cos chi and sqrt 2 sin chi: chi = x - pi / 4 for nu = 0, x - 3 pi / 4 for nu = 1
  const float cc = nu == 0 ? c + s : s - c, sc = nu == 0 ? s - c : -(s + c);
  const float a = std::sqrt(0.318309886183790672f / ax);  // A / sqrt 2
  j = a * (p * cc - q * sc);
  y = a * (p * sc + q * cc);
}

// J0, J1, Y0, Y1. On |x| <= 8: J0 and J1 / x as functions of x^2 / 32 - 1; Y0 = (2 / pi) log(x / 2) J0 + R0 and Y1 =
// (2 / pi) (log(x / 2) J1 - 1 / x) + x R1, R0 and R1 functions of x^2 too. Y of a negative argument is NaN, Y(0) = -inf,
// and of +-inf NaN (sin and cos of inf), as ATen's kernels and the double forms.
template <int nu, bool second_kind>
MT_HOST_DEVICE MT_FORCE_INLINE float bessel_jy_f(float x) {
  constexpr float inf = std::numeric_limits<float>::infinity(), two_over_pi = 0.636619772367581343f;
  const float ax = std::fabs(x), t = ax * ax * 0.03125f - 1.0f;
  float j_large, y_large, j_small, small;
  bessel_jy_large_f<nu>(ax, j_large, y_large);
  if constexpr (nu == 0) MT_CHEB_F(j_small, J0SMALL, float, t)
  else {
    MT_CHEB_F(j_small, J1SMALL, float, t)
    j_small *= ax;
  }
  if constexpr (!second_kind) {
    small = j_small;
  } else {
    const float lg = std::log(0.5f * ax);
    float r;
    if constexpr (nu == 0) {
      MT_CHEB_F(r, Y0SMALL, float, t)
      small = two_over_pi * lg * j_small + r;
    } else {
      MT_CHEB_F(r, Y1SMALL, float, t)
      small = two_over_pi * (lg * j_small - 1.0f / ax) + ax * r;
    }
  }
  float v = ax <= 8.0f ? small : (second_kind ? y_large : j_large);
  if constexpr (second_kind) {
    v = x == 0.0f ? -inf : v;
    return x < 0.0f ? std::numeric_limits<float>::quiet_NaN() : v;
  } else {
    return nu == 1 ? v * std::copysign(1.0f, x) : v;  // J1 is odd
  }
}
#undef MT_CHEB_F
MT_HOST_DEVICE MT_FORCE_INLINE float j0_f(float x) { return bessel_jy_f<0, false>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float j1_f(float x) { return bessel_jy_f<1, false>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float y0_f(float x) { return bessel_jy_f<0, true>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float y1_f(float x) { return bessel_jy_f<1, true>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float i0_f(float x) { return bessel_i_f<0, false>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float i0e_f(float x) { return bessel_i_f<0, true>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float i1_f(float x) { return bessel_i_f<1, false>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float i1e_f(float x) { return bessel_i_f<1, true>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float k0_f(float x) { return bessel_k_f<0, false>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float k0e_f(float x) { return bessel_k_f<0, true>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float k1_f(float x) { return bessel_k_f<1, false>(x); }
MT_HOST_DEVICE MT_FORCE_INLINE float k1e_f(float x) { return bessel_k_f<1, true>(x); }

// sin(x) / x, and its Taylor series to x^8 below |x| = 1/2 (the next term is under 2.5e-10 there): the scheme of the
// double form and of ATen's float kernel, in float, both sides computed and one selected.
MT_HOST_DEVICE MT_FORCE_INLINE float spherical_j0_f(float x) {
  const float y = x * x;
  const float small = 1.0f + y * (-1.0f / 6 + y * (1.0f / 120 + y * (-1.0f / 5040 + y * (1.0f / 362880))));
  const float v = std::fabs(x) < 0.5f ? small : std::sin(x) / x;  // NaN passes through sin(x) / x
  return std::fabs(x) == std::numeric_limits<float>::infinity() ? 0.0f : v;
}

MT_HOST_DEVICE MT_FORCE_INLINE float ndtri_f(float p) {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const float lo = p <= 0.5f ? p : 1.0f - p;  // 1 - p is exact for p in (0.5, 1)
  // the rationals in double: in float the central one's polynomials cancel near its range's ends (1.9e-4 relative
  // at p = 0.0247); q in float, within a float step of its value
  const double tail = ndtri_tail<double>(std::sqrt(-2.0f * std::log(lo))), central = ndtri_central<double>(lo - 0.5f);
  const float x = static_cast<float>(lo < 0.02425f ? tail : central);
  const float edge = p == 0.0f ? -inf : (p == 1.0f ? inf : std::numeric_limits<float>::quiet_NaN());
  return (p > 0.0f && p < 1.0f) ? (p <= 0.5f ? x : -x) : edge;
}

} // namespace mytorch::ew::special
