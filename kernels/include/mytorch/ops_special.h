// The pointwise table's Special group: its special functions (digamma, polygamma, Hurwitz zeta, the modified
// Bessel functions I0 and I1, erfcx, the normal distribution's ndtri and log_ndtr, the incomplete gamma functions)
// and its functors. The special
// functions run in double precision on both runtimes: the functors convert their operands to double and round
// the result once, so float32,
// float16 and bfloat16 results are the double value correctly rounded, and float64 matches ATen's float64 kernels
// within the alignment rule. Edge cases (poles, negative integers, infinities, NaN) follow ATen's CPU kernels.
//
// Note [Special functions]
// Each function is written from its defining series or expansion, with the branch points chosen so that a
// branch converges to double precision where it is used:
//   - digamma: the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the asymptotic (Stirling) series with
//     Bernoulli numbers B2..B14; x < 0 by reflection, psi(1 - x) - pi / tan(pi * frac(x));
//   - trigamma (polygamma n = 1, as ATen): the recurrence up to x >= 10 and its asymptotic series; x < 1/2 by
//     reflection, pi^2 / sin^2(pi x) - psi1(1 - x);
//   - polygamma n >= 2: (-1)^(n+1) n! zeta(n + 1, x);
//   - Hurwitz zeta(s, q): the direct sum until q + k >= 10, then Euler-Maclaurin with B2..B24;
//   - I0, I1, K0, K1 (and the exponentially scaled forms): Chebyshev expansions (Note [Bessel functions by
//     Chebyshev expansions] below);
//   - erfcx: exp(x^2) erfc(x) up to x = 20, the asymptotic continued series beyond (erfc underflows near 26.5);
//   - ndtri: Acklam's rational first guess refined by one Halley step on 0.5 erfc(-x / sqrt 2);
//   - log_ndtr: log(erfcx(-x / sqrt 2) / 2) - x^2 / 2 for x < -1, log1p(-erfc(x / sqrt 2) / 2) otherwise;
//   - igamma / igammac, the regularized incomplete gamma functions P(a, x) and Q(a, x) = 1 - P: below x = a + 1 P
//     by its power series (positive terms), above Q by its continued fraction (modified Lentz), each times
//     x^a e^-x / Gamma(a) taken as one exp; the other function as 1 minus it (P <= ~0.6 below, Q above: no
//     cancellation). Both need O(sqrt(a)) terms near x = a, within kIgammaTerms up to a ~ 1e6 (ATen switches to
//     Temme's uniform expansion there; beyond it these lose digits rather than fail).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "mytorch/macros.h"
#include "mytorch/special_cheb.h"

namespace mytorch::ew::special {

constexpr double kPi = 3.14159265358979323846;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kEps = 1e-17;  // a series stops when a term falls below kEps times the sum

MT_HOST_DEVICE inline double digamma(double x) {
  if (x == 0) return std::copysign(kInf, -x);
  if (x != x) return x;
  double shift = 0;
  if (x < 0) {  // reflection, without recursion (a device function that recurses needs a stack: ptxas spills)
    if (x == std::trunc(x)) return kNaN;
    const double frac = x - std::trunc(x);
    shift = -kPi / std::tan(kPi * frac);
    x = 1 - x;
  }
  while (x < 10) {
    shift -= 1 / x;
    x += 1;
  }
  if (x == kInf) return kInf;
  // ln x - 1/(2x) - sum_k B_2k / (2k x^2k), k = 1..7
  const double r = 1 / (x * x);
  const double tail =
      1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132 - r * (691.0 / 32760 - r / 12)))));
  return shift + std::log(x) - 0.5 / x - r * tail;
}

MT_HOST_DEVICE inline double trigamma(double x) {
  if (x != x) return x;
  double sign = 1, result = 0;
  if (x < 0.5) {
    const double s = std::sin(kPi * x);
    result = -(kPi * kPi) / (s * s);
    sign = -1;
    x = 1 - x;
  }
  while (x < 10) {
    result += 1 / (x * x);
    x += 1;
  }
  // 1/x + 1/(2x^2) + sum_k B_2k / x^(2k+1), k = 1..7
  const double r = 1 / (x * x);
  const double series =
      1.0 / 6 - r * (1.0 / 30 - r * (1.0 / 42 - r * (1.0 / 30 - r * (5.0 / 66 - r * (691.0 / 2730 - r * (7.0 / 6))))));
  result += 1 / x + 0.5 * r + series * r / x;
  return sign * result;
}

constexpr int kIgammaTerms = 20000;

// P(a, x) for x < a + 1: x^a e^-x / Gamma(a) * sum_n x^n / (a (a+1) ... (a+n)).
MT_HOST_DEVICE inline double igamma_series(double a, double x) {
  double term = 1 / a, sum = term;
  for (int n = 1; n < kIgammaTerms; ++n) {
    term *= x / (a + n);
    sum += term;
    if (term < sum * kEps) break;
  }
  return sum * std::exp(a * std::log(x) - x - std::lgamma(a));
}

// Q(a, x) for x >= a + 1: x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / (x + 5 - a ...))),
// the fraction evaluated forwards by the modified Lentz method.
MT_HOST_DEVICE inline double igammac_fraction(double a, double x) {
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < kIgammaTerms; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    d = std::fabs(d) < kTiny ? kTiny : d;
    c = b + an / c;
    c = std::fabs(c) < kTiny ? kTiny : c;
    d = 1 / d;
    const double step = d * c;
    h *= step;
    if (std::fabs(step - 1) < 1e-16) break;
  }
  return h * std::exp(a * std::log(x) - x - std::lgamma(a));
}

// P(a, x) (upper = false) or Q(a, x) (upper = true), with ATen's special values in its order of checks (so a NaN
// operand does not always give NaN): NaN for a < 0 or x < 0, a = 0 is P = 1 (x > 0) or NaN (x = 0), x = 0 is
// P = 0, an infinite a is P = 0 (NaN with x infinite too), an infinite x is P = 1; else NaN with a NaN operand.
MT_HOST_DEVICE inline double igamma(double a, double x, bool upper) {
  if (a < 0 || x < 0) return kNaN;
  double p;
  if (a == 0) {
    if (!(x > 0)) return kNaN;
    p = 1;
  } else if (x == 0) {
    p = 0;
  } else if (std::isinf(a)) {
    if (std::isinf(x)) return kNaN;
    p = 0;
  } else if (std::isinf(x)) {
    p = 1;
  } else if (a != a || x != x) {
    return kNaN;
  } else if (x < a + 1) {
    const double below = igamma_series(a, x);
    return upper ? 1 - below : below;
  } else {
    const double above = igammac_fraction(a, x);
    return upper ? above : 1 - above;
  }
  return upper ? 1 - p : p;
}

// Hurwitz zeta(s, q) = sum_{k >= 0} (q + k)^-s in ATen's domain and order of checks: s = 1 is a pole, s < 1 is
// NaN; q a non-positive integer is a pole (even for a NaN s), q < 0 with a non-integer s is NaN.
MT_HOST_DEVICE inline double zeta(double s, double q) {
  if (s == 1) return kInf;
  if (s < 1) return kNaN;
  if (q <= 0) {
    if (q == std::floor(q)) return kInf;
    if (s != std::floor(s)) return kNaN;
  }
  double sum = 0, w = q;
  for (int k = 0; k < 10 || w < 10; ++k) {
    const double t = std::pow(w, -s);
    sum += t;
    w += 1;
    if (k > 0 && std::fabs(t / sum) < kEps) return sum;  // (0 / 0 is NaN: no early answer for s = inf, q > 1)
  }
  // Euler-Maclaurin at w: w^(1-s) / (s-1) + w^-s / 2 + sum_j B_2j / (2j)! * s (s+1) ... (s+2j-2) * w^(-s-2j+1)
  const double ws = std::pow(w, -s);
  sum += w * ws / (s - 1) + 0.5 * ws;
  // B_2j / (2j)!, j = 1..12
  const double kB[12] = {8.333333333333333e-02,  -1.388888888888889e-03,  3.306878306878307e-05,
                         -8.267195767195768e-07, 2.08767569878681e-08,    -5.284190138687493e-10,
                         1.3382536530684679e-11, -3.3896802963225827e-13, 8.586062056277845e-15,
                         -2.174868698558062e-16, 5.5090028283602295e-18,  -1.3954464685812522e-19};
  double rising = s, wpow = ws / w;
  for (int j = 0; j < 12; ++j) {
    const double t = kB[j] * rising * wpow;
    sum += t;
    if (std::fabs(t) <= kEps * std::fabs(sum)) break;
    rising *= (s + 2 * j + 1) * (s + 2 * j + 2);
    wpow /= w * w;
  }
  return sum;
}

MT_HOST_DEVICE inline double polygamma(int64_t n, double x) {
  if (n == 0) return digamma(x);
  if (n == 1) return trigamma(x);
  const double nd = static_cast<double>(n);
  return ((n % 2) ? 1.0 : -1.0) * std::exp(std::lgamma(nd + 1)) * zeta(nd + 1, x);
}

// Note [Bessel functions by Chebyshev expansions]
// I0, I1, K0 and K1 (and their scaled forms, and so i0, i0e, i1, i1e, modified_bessel_*) are sums of fixed
// Chebyshev series of smooth functions, the scheme of Cephes and of ATen's kernels with tables of our own
// (scripts/gen_special_tables.py computes them from mpmath and checks them; special_cheb.h holds them):
//   - exp(-x) I0(x) and exp(-x) I1(x) / x on [0, 8], sqrt(x) exp(-x) I(x) as a function of 16 / x - 1 beyond;
//   - K0 + log(x/2) I0 and x (K1 - log(x/2) I1), power series in x^2, on (0, 2]; sqrt(x) exp(x) K(x) as a
//     function of 4 / x - 1 beyond.
// Each is within ~3e-15 relative in double. No loop stops on a tolerance: a fixed count of multiply-adds per
// element, ~30 of them, where the power series and Hankel sums they replace took up to ~70 terms with a division
// each and ran at 0.04-0.2x the CPU's kernels.
// Clenshaw's sum of c[0] + sum_k c[k] T_k(t), t in [-1, 1] (the tables of special_cheb.h), over the first M terms
// (all of them when M is 0), accumulated in R: the double forms sum whole tables in double, the float forms of
// special_float.h their float cuts in float or double.
template <int M = 0, typename R, int N>
MT_HOST_DEVICE MT_FORCE_INLINE R chebyshev_series(const double (&c)[N], R t) {
  constexpr int kTerms = M == 0 ? N : M;
  static_assert(kTerms >= 2 && kTerms <= N, "a cut of the table");
  R b1 = 0, b2 = 0;
  const R t2 = t + t;
  MT_UNROLL_ALL
  for (int k = kTerms - 1; k > 0; --k) {
    const R b0 = static_cast<R>(c[k]) + t2 * b1 - b2;
    b2 = b1;
    b1 = b0;
  }
  return static_cast<R>(c[0]) + t * b1 - b2;
}

// exp(-x) I_nu(x) for x >= 0 (Note [Bessel functions by Chebyshev expansions]).
MT_HOST_DEVICE inline double bessel_i_scaled(int nu, double ax) {
  if (ax <= 8) {
    const double t = 0.25 * ax - 1;
    if (nu == 0) {
      const double c[] = MT_CHEB_I0SMALL;
      return chebyshev_series(c, t);
    }
    const double c[] = MT_CHEB_I1SMALL;
    return ax * chebyshev_series(c, t);
  }
  const double t = 16 / ax - 1;
  if (nu == 0) {
    const double c[] = MT_CHEB_I0LARGE;
    return chebyshev_series(c, t) / std::sqrt(ax);
  }
  const double c[] = MT_CHEB_I1LARGE;
  return chebyshev_series(c, t) / std::sqrt(ax);
}
MT_HOST_DEVICE inline double bessel_i(int nu, double x, bool scaled) {
  if (x != x) return x;
  const double ax = std::fabs(x);
  const double e = bessel_i_scaled(nu, ax);
  // exp(ax) overflows a little before I0 and I1 do (ax ~ 709.8 against ~713): inf there, and NaN at +-inf (inf * 0),
  // as ATen's kernels
  const double v = scaled ? e : std::exp(ax) * e;
  return (nu == 1 && x < 0) ? -v : v;
}
MT_HOST_DEVICE inline double i0(double x) { return bessel_i(0, x, false); }
MT_HOST_DEVICE inline double i0e(double x) { return bessel_i(0, x, true); }
MT_HOST_DEVICE inline double i1(double x) { return bessel_i(1, x, false); }
MT_HOST_DEVICE inline double i1e(double x) { return bessel_i(1, x, true); }

// exp(x^2) erfc(x).
MT_HOST_DEVICE inline double erfcx(double x) {
  if (x != x) return x;
  if (x <= 20) return std::exp(x * x) * std::erfc(x);
  if (x == kInf) return 0;
  // 1 / (x sqrt(pi)) * sum_k (-1)^k (2k-1)!! / (2x^2)^k
  const double r = 1 / (2 * x * x);
  double term = 1, sum = 1;
  for (int k = 1; k < 30; ++k) {
    term *= -(2.0 * k - 1) * r;
    sum += term;
    if (std::fabs(term) <= kEps) break;
  }
  return sum / (x * 1.7724538509055160273);
}

// The standard normal distribution's quantile: ndtri(p) = x with Phi(x) = p. Acklam's rational first guesses, in
// R (double for ndtri; float for ndtri_f, special_float.h): the tail's in q = sqrt(-2 log p) for p < 0.02425, the
// central one's in q = p - 0.5 (exact), both within 1.2e-9 relative.
template <typename R>
MT_HOST_DEVICE inline R ndtri_tail(R q) {
  return (((((R(-7.784894002430293e-03) * q - R(3.223964580411365e-01)) * q - R(2.400758277161838e+00)) * q -
            R(2.549732539343734e+00)) *
               q +
           R(4.374664141464968e+00)) *
              q +
          R(2.938163982698783e+00)) /
         ((((R(7.784695709041462e-03) * q + R(3.224671290700398e-01)) * q + R(2.445134137142996e+00)) * q +
           R(3.754408661907416e+00)) *
              q +
          R(1));
}
template <typename R>
MT_HOST_DEVICE inline R ndtri_central(R q) {
  const R r = q * q;
  return (((((R(-3.969683028665376e+01) * r + R(2.209460984245205e+02)) * r - R(2.759285104469687e+02)) * r +
            R(1.383577518672690e+02)) *
               r -
           R(3.066479806614716e+01)) *
              r +
          R(2.506628277459239e+00)) *
         q /
         (((((R(-5.447609879822406e+01) * r + R(1.615858368580409e+02)) * r - R(1.556989798598866e+02)) * r +
            R(6.680131188771972e+01)) *
               r -
           R(1.328068155288572e+01)) *
              r +
          R(1));
}
MT_HOST_DEVICE inline double ndtri_lower(double p) {  // 0 < p <= 0.5
  const double x = p < 0.02425 ? ndtri_tail(std::sqrt(-2 * std::log(p))) : ndtri_central(p - 0.5);
  // One Halley step on Phi(x) - p, Phi(x) = erfc(-x / sqrt 2) / 2: the guess is within 1.2e-9 relative and the
  // step cubes the error (Acklam's refinement); a second step moved nothing and cost as much as the first.
  const double e = 0.5 * std::erfc(-x * 0.70710678118654752440) - p;
  const double u = e * 2.5066282746310005024 * std::exp(0.5 * x * x);
  return u - u == 0 ? x - u / (1 + 0.5 * x * u) : x;  // where the density underflowed the first guess stands
}
MT_HOST_DEVICE inline double ndtri(double p) {
  if (p != p || p < 0 || p > 1) return kNaN;
  if (p == 0) return -kInf;
  if (p == 1) return kInf;
  return p <= 0.5 ? ndtri_lower(p) : -ndtri_lower(1 - p);  // 1 - p is exact for p in (0.5, 1)
}

MT_HOST_DEVICE inline double log_ndtr(double x) {
  const double t = x * 0.70710678118654752440;
  if (x < -1) return std::log(0.5 * erfcx(-t)) - t * t;
  return std::log1p(-0.5 * std::erfc(t));
}

// ---- Bessel functions of the first and second kind, J and Y of orders 0 and 1 --------------------------------
// |x| <= 2: the power series (Y by DLMF 10.8.1); 2 < |x| <= 25: Miller's backward recurrence normalised by
// J0 + 2 sum J2k = 1, with Y from the Neumann series Y0 = (2/pi)(ln(x/2) + gamma) J0 - (4/pi) sum (-1)^k J2k / k
// and Y1 = -Y0'; beyond: Hankel's expansion. Y of a negative argument is NaN, Y(0) = -inf. These are within
// ~1e-16 of the functions (mpmath); ATen's float64 kernels are within ~1e-9 (its rational approximations).
constexpr double kEuler = 0.57721566490153286061;

struct BesselJY { double j0, j1, y0, y1; };

MT_HOST_DEVICE inline BesselJY bessel_jy_series(double x) {  // 0 < x <= 2
  const double y = -0.25 * x * x, lg = std::log(0.5 * x) + kEuler;
  // J0 = sum y^k / k!^2; J1 = (x/2) sum y^k / (k! (k+1)!); the Y series weight them by harmonic numbers
  double t0 = 1, t1 = 0.5 * x, j0 = t0, j1 = t1, h = 0, s0 = 0;
  double s1 = t1;  // sum (psi(k+1) + psi(k+2) + 2 gamma) t1_k; the bracket is 1 at k = 0
  for (int k = 1; k < 40; ++k) {
    t0 *= y / (static_cast<double>(k) * k);
    t1 *= y / (static_cast<double>(k) * (k + 1));
    h += 1.0 / k;
    j0 += t0;
    j1 += t1;
    s0 += h * t0;
    s1 += (2 * h + 1.0 / (k + 1)) * t1;  // psi(k+1) + psi(k+2) + 2 gamma = 2 H_k + 1/(k+1)
    if (std::fabs(t0) <= kEps * std::fabs(j0) && std::fabs(t1) <= kEps * std::fabs(j1)) break;
  }
  BesselJY r;
  r.j0 = j0;
  r.j1 = j1;
  r.y0 = (2 / kPi) * (lg * j0 - s0);
  // Y1 = -2/(pi x) + (2/pi) ln(x/2) J1 - (1/pi) (x/2) sum (psi(k+1) + psi(k+2)) y^k / (k! (k+1)!)
  r.y1 = -2 / (kPi * x) + (2 / kPi) * lg * j1 - s1 / kPi;
  return r;
}

MT_HOST_DEVICE inline BesselJY bessel_jy_miller(double x) {  // 2 < x <= 25
  const int top = 2 * (static_cast<int>(x) / 2) + 40;
  double jp1 = 0, j = 1e-30, even = 0, ny0 = 0, ny1 = 0, j0 = 0, j1 = 0;
  for (int n = top; n >= 1; --n) {
    const double jm1 = (2.0 * n / x) * j - jp1;  // J_{n-1}
    jp1 = j;
    j = jm1;
    const int m = n - 1;
    if (m == 1) j1 = j;
    if (m == 0) j0 = j;
    if (m > 0 && m % 2 == 0) {
      const int k = m / 2;
      even += 2 * j;
      ny0 += ((k % 2) ? -j : j) / k;  // (-1)^k J2k / k
    }
    if (m % 2 == 1) {  // J_m in sum_k (-1)^k (J_{2k-1} - J_{2k+1}) / k: k = (m+1)/2, and k = (m-1)/2 with a minus
      const int ka = (m + 1) / 2, kb = (m - 1) / 2;
      ny1 += ((ka % 2) ? -j : j) / ka;
      if (kb > 0) ny1 -= ((kb % 2) ? -j : j) / kb;
    }
    if (std::fabs(j) > 1e250) {  // rescale everything carried
      j *= 1e-250, jp1 *= 1e-250, even *= 1e-250, ny0 *= 1e-250, ny1 *= 1e-250, j1 *= 1e-250;
    }
  }
  const double norm = 1 / (j0 + even), lg = std::log(0.5 * x) + kEuler;
  BesselJY r;
  r.j0 = j0 * norm;
  r.j1 = j1 * norm;
  r.y0 = (2 / kPi) * lg * r.j0 - (4 / kPi) * ny0 * norm;
  r.y1 = -(2 / kPi) * r.j0 / x + (2 / kPi) * lg * r.j1 + (2 / kPi) * ny1 * norm;
  return r;
}

// Hankel's expansion for x > 25: J = sqrt(2/(pi x)) (P cos chi - Q sin chi), Y = sqrt(2/(pi x)) (P sin chi +
// Q cos chi), chi = x - (nu/2 + 1/4) pi, taken from sin x and cos x (no rounding of x - pi/4 for large x).
MT_HOST_DEVICE inline void bessel_hankel(int nu, double x, double& j, double& yv) {
  const double mu = 4.0 * nu * nu;
  double a = 1, p = 1, q = 0;
  for (int k = 1; k < 60; ++k) {
    const double odd = 2.0 * k - 1;
    const double next = a * (mu - odd * odd) / (8.0 * k * x);
    if (std::fabs(next) > std::fabs(a) && k > 2) break;  // the asymptotic series turned
    a = next;
    const int sign = ((k / 2) % 2) ? -1 : 1;
    if (k % 2 == 0) p += sign * a;
    else q += sign * a;
    if (std::fabs(a) <= kEps) break;
  }
  const double s = std::sin(x), c = std::cos(x), r = 0.70710678118654752440;
  // chi = x - pi/4 (nu = 0) or x - 3 pi/4 (nu = 1)
  const double cc = nu == 0 ? r * (c + s) : r * (s - c), sc = nu == 0 ? r * (s - c) : -r * (s + c);
  const double amp = std::sqrt(2 / (kPi * x));
  j = amp * (p * cc - q * sc);
  yv = amp * (p * sc + q * cc);
}

MT_HOST_DEVICE inline double bessel_j(int nu, double x) {
  if (x != x) return x;
  const double ax = std::fabs(x);
  double v;
  if (ax == kInf) return kNaN;  // as ATen's kernels (the limit is 0)
  if (ax == 0) return nu == 0 ? 1.0 : x;
  if (ax <= 2) {
    const BesselJY r = bessel_jy_series(ax);
    v = nu == 0 ? r.j0 : r.j1;
  } else if (ax <= 25) {
    const BesselJY r = bessel_jy_miller(ax);
    v = nu == 0 ? r.j0 : r.j1;
  } else {
    double y;
    bessel_hankel(nu, ax, v, y);
  }
  return (nu == 1 && x < 0) ? -v : v;
}

MT_HOST_DEVICE inline double bessel_y(int nu, double x) {
  if (x != x) return x;
  if (x < 0) return kNaN;
  if (x == 0) return -kInf;
  if (x == kInf) return kNaN;  // as ATen's kernels
  if (x <= 2) {
    const BesselJY r = bessel_jy_series(x);
    return nu == 0 ? r.y0 : r.y1;
  }
  if (x <= 25) {
    const BesselJY r = bessel_jy_miller(x);
    return nu == 0 ? r.y0 : r.y1;
  }
  double j, y;
  bessel_hankel(nu, x, j, y);
  return y;
}

// ---- modified Bessel functions of the second kind, K0 and K1 (and exp(x) K) -----------------------------------
// K0 and K1 by the Chebyshev expansions of Note [Bessel functions by Chebyshev expansions]. The trapezoidal rule on
// exp(x) K_nu(x) = int_0^inf exp(-x (cosh t - 1)) cosh(nu t) dt, whose error falls like exp(-2 pi d / h) for an
// integrand analytic in a strip of half-width d (exact to double precision with the step below), takes the
// fractional order of Airy's K_1/3.
MT_HOST_DEVICE inline double bessel_k_scaled_integral(double nu, double x) {
  const double h = 0.55 / std::sqrt(x) < 0.25 ? 0.55 / std::sqrt(x) : 0.25;
  double sum = 0.5;  // f(0) / 2
  for (int i = 1; i < 2000; ++i) {
    const double t = i * h;
    const double f = std::exp(-x * (std::cosh(t) - 1)) * std::cosh(nu * t);
    sum += f;
    if (f <= 1e-18 * sum) break;
  }
  return h * sum;
}

MT_HOST_DEVICE inline double bessel_k(int nu, double x, bool scaled) {
  if (x != x) return x;
  if (x < 0) return kNaN;
  if (x == 0) return kInf;
  if (x == kInf) return 0;
  if (x <= 2) {  // K0 = A(x^2) - log(x/2) I0, K1 = log(x/2) I1 + B(x^2) / x
    const double t = 0.5 * x * x - 1, lg = std::log(0.5 * x);
    double k;
    if (nu == 0) {
      const double c[] = MT_CHEB_K0SMALL;
      k = chebyshev_series(c, t) - lg * bessel_i(0, x, false);
    } else {
      const double c[] = MT_CHEB_K1SMALL;
      k = lg * bessel_i(1, x, false) + chebyshev_series(c, t) / x;
    }
    return scaled ? std::exp(x) * k : k;
  }
  const double t = 4 / x - 1;  // sqrt(x) exp(x) K(x)
  double v;
  if (nu == 0) {
    const double c[] = MT_CHEB_K0LARGE;
    v = chebyshev_series(c, t) / std::sqrt(x);
  } else {
    const double c[] = MT_CHEB_K1LARGE;
    v = chebyshev_series(c, t) / std::sqrt(x);
  }
  return scaled ? v : v * std::exp(-x);
}

// ---- Airy Ai ----------------------------------------------------------------------------------------------------
// -7 <= x <= 2: Maclaurin, Ai = Ai(0) f - (-Ai'(0)) g; x > 2: (1/pi) sqrt(x/3) K_1/3(2/3 x^3/2); x < -7: the
// oscillatory asymptotic expansion (DLMF 9.7.9). Each branch is within ~1e-10 of the function where it is used.
MT_HOST_DEVICE inline double airy_ai(double x) {
  if (x != x) return x;
  if (x == kInf || x == -kInf) return kNaN;  // as ATen's kernels (the limit is 0)
  if (x > 2) {
    const double zeta = (2.0 / 3) * x * std::sqrt(x);
    if (zeta > 745) return 0;
    return std::sqrt(x / 3) / kPi * bessel_k_scaled_integral(1.0 / 3, zeta) * std::exp(-zeta);
  }
  if (x >= -7) {
    const double x3 = x * x * x;
    double f = 1, g = x, tf = 1, tg = x;
    for (int k = 1; k < 200; ++k) {
      tf *= x3 / ((3.0 * k - 1) * (3.0 * k));
      tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
      f += tf;
      g += tg;
      if (std::fabs(tf) <= kEps * std::fabs(f) && std::fabs(tg) <= kEps * std::fabs(g)) break;
    }
    return 0.35502805388781723926 * f - 0.25881940379280679840 * g;
  }
  const double ax = -x, zeta = (2.0 / 3) * ax * std::sqrt(ax);
  double u = 1, even = 1, odd = 0, zk = 1;
  for (int k = 1; k < 40; ++k) {
    const double next = u * (6.0 * k - 5) * (6.0 * k - 3) * (6.0 * k - 1) / ((2.0 * k - 1) * 216.0 * k);
    zk /= zeta;
    if (next * zk > u * zk * zeta && k > 2) break;
    u = next;
    const double t = u * zk;
    const int sign = (((k - (k % 2)) / 2) % 2) ? -1 : 1;  // (-1)^floor(k/2)
    if (k % 2 == 0) even += sign * t;
    else odd += sign * t;
    if (std::fabs(t) <= kEps) break;
  }
  const double s = std::sin(zeta + 0.25 * kPi), c = std::cos(zeta + 0.25 * kPi);
  return (s * even - c * odd) / (std::sqrt(kPi) * std::sqrt(std::sqrt(ax)));
}

MT_HOST_DEVICE inline double spherical_j0(double x) {
  if (x != x) return x;
  if (x == kInf || x == -kInf) return 0;
  if (std::fabs(x) < 0.5) {  // 1 - x^2/3! + x^4/5! - ...
    const double y = x * x;
    double t = 1, sum = 1;
    for (int k = 1; k < 12; ++k) {
      t *= -y / ((2.0 * k) * (2.0 * k + 1));
      sum += t;
    }
    return sum;
  }
  return std::sin(x) / x;
}

// ---- orthogonal polynomials of degree n (n truncated toward zero; a negative or NaN degree gives 0) -----------
// Three-term recurrences; the Chebyshev kinds on |x| < 1 from their trigonometric forms (T_n(cos t) = cos(n t)...)
// for n > 6, as ATen does; x = +-1 exactly from their closed forms.
enum class Poly : int { ChebyshevT, ChebyshevU, ChebyshevV, ChebyshevW, HermiteH, HermiteHe, LaguerreL, LegendreP };

MT_HOST_DEVICE inline double polynomial(Poly kind, double x, double nd) {
  // n truncated toward zero first (n in (-1, 0) is degree 0), as ATen's static_cast<int64_t>
  if (nd != nd || nd <= -1) return 0;
  const int64_t n = static_cast<int64_t>(nd > 9.2e18 ? 9.2e18 : nd);
  const double dn = static_cast<double>(n);
  const bool cheb =
      kind == Poly::ChebyshevT || kind == Poly::ChebyshevU || kind == Poly::ChebyshevV || kind == Poly::ChebyshevW;
  if (cheb && std::fabs(x) == 1) {
    const bool odd = n % 2 == 1;
    switch (kind) {
      case Poly::ChebyshevT: return (x > 0 || !odd) ? 1 : -1;
      case Poly::ChebyshevU: return (x > 0 || !odd) ? dn + 1 : -(dn + 1);
      case Poly::ChebyshevV: return x > 0 ? 1 : (odd ? -(2 * dn + 1) : 2 * dn + 1);
      default: return x > 0 ? 2 * dn + 1 : (odd ? -1 : 1);
    }
  }
  if (kind == Poly::LegendreP && std::fabs(x) == 1) return (x > 0 || n % 2 == 0) ? 1 : -1;
  if (cheb && n > 6 && std::fabs(x) < 1) {
    const double t = std::acos(x);
    switch (kind) {
      case Poly::ChebyshevT: return std::cos(dn * t);
      case Poly::ChebyshevU: return std::sin((dn + 1) * t) / std::sin(t);
      case Poly::ChebyshevV: return std::cos((dn + 0.5) * t) / std::cos(0.5 * t);
      default: return std::sin((dn + 0.5) * t) / std::sin(0.5 * t);
    }
  }
  if (n == 0) return 1;
  double p = 1, q;
  switch (kind) {
    case Poly::ChebyshevT: q = x; break;
    case Poly::ChebyshevU: q = 2 * x; break;
    case Poly::ChebyshevV: q = 2 * x - 1; break;
    case Poly::ChebyshevW: q = 2 * x + 1; break;
    case Poly::HermiteH: q = 2 * x; break;
    case Poly::HermiteHe: q = x; break;
    case Poly::LaguerreL: q = 1 - x; break;
    default: q = x; break;
  }
  for (int64_t k = 1; k < n; ++k) {  // q = P_k, p = P_{k-1}
    const double dk = static_cast<double>(k);
    double r;
    switch (kind) {
      case Poly::HermiteH: r = 2 * x * q - 2 * dk * p; break;
      case Poly::HermiteHe: r = x * q - dk * p; break;
      case Poly::LaguerreL: r = ((2 * dk + 1 - x) * q - dk * p) / (dk + 1); break;
      case Poly::LegendreP: r = ((2 * dk + 1) * x * q - dk * p) / (dk + 1); break;
      default: r = 2 * x * q - p; break;
    }
    p = q;
    q = r;
  }
  return q;
}

} // namespace mytorch::ew::special

#include "mytorch/special_float.h"

// ---- the Special group's functors (tables/pointwise.def, group Special). ops_math.h declares Fn and MT_EW_FN and
// includes this file after them. Operands arrive in opmath; the special functions run in double, rounded once.
namespace mytorch::ew {

#define MT_EW_SPECIAL_UNARY(Name, fn)                                                              \
  template <> struct Fn<EwOp::Name> {                                                              \
    MT_EW_FN(O a, const EwParams&) { return static_cast<O>(special::fn(static_cast<double>(a))); } \
  };
MT_EW_SPECIAL_UNARY(Digamma, digamma)
MT_EW_SPECIAL_UNARY(Erfcx, erfcx)
MT_EW_SPECIAL_UNARY(LogNdtr, log_ndtr)
MT_EW_SPECIAL_UNARY(AiryAi, airy_ai)
#undef MT_EW_SPECIAL_UNARY

// The functions with a float form (Note [Special functions in float]): float, half and bfloat16 take it.
#define MT_EW_SPECIAL_FLOAT(Name, float_form, double_form)                   \
  template <> struct Fn<EwOp::Name> {                                        \
    static constexpr bool kFloatForm = true;                                 \
    MT_EW_FN(O a, const EwParams&) {                                         \
      if constexpr (std::is_same_v<O, float>) return special::float_form(a); \
      else return static_cast<O>(special::double_form);                      \
    }                                                                        \
  };
MT_EW_SPECIAL_FLOAT(I0, i0_f, i0(static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(I0e, i0e_f, i0e(static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(I1, i1_f, i1(static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(I1e, i1e_f, i1e(static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(ModifiedBesselI0, i0_f, i0(static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(ModifiedBesselI1, i1_f, i1(static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(ModifiedBesselK0, k0_f, bessel_k(0, static_cast<double>(a), false))
MT_EW_SPECIAL_FLOAT(ModifiedBesselK1, k1_f, bessel_k(1, static_cast<double>(a), false))
MT_EW_SPECIAL_FLOAT(ScaledModifiedBesselK0, k0e_f, bessel_k(0, static_cast<double>(a), true))
MT_EW_SPECIAL_FLOAT(ScaledModifiedBesselK1, k1e_f, bessel_k(1, static_cast<double>(a), true))
MT_EW_SPECIAL_FLOAT(Ndtri, ndtri_f, ndtri(static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(BesselJ0, j0_f, bessel_j(0, static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(BesselJ1, j1_f, bessel_j(1, static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(BesselY0, y0_f, bessel_y(0, static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(BesselY1, y1_f, bessel_y(1, static_cast<double>(a)))
MT_EW_SPECIAL_FLOAT(SphericalJ0, spherical_j0_f, spherical_j0(static_cast<double>(a)))
#undef MT_EW_SPECIAL_FLOAT

// The orthogonal polynomials: (x, n), the shifted Chebyshev kinds at 2x - 1.
#define MT_EW_POLY(Name, kind, shifted)                                                                  \
  template <> struct Fn<EwOp::Name> {                                                                    \
    MT_EW_FN(O x, O n, const EwParams&) {                                                                \
      const double xd = static_cast<double>(x);                                                          \
      return static_cast<O>(                                                                             \
          special::polynomial(special::Poly::kind, shifted ? xd + xd - 1 : xd, static_cast<double>(n))); \
    }                                                                                                    \
  };
MT_EW_POLY(ChebyshevT, ChebyshevT, false)
MT_EW_POLY(ChebyshevU, ChebyshevU, false)
MT_EW_POLY(ChebyshevV, ChebyshevV, false)
MT_EW_POLY(ChebyshevW, ChebyshevW, false)
MT_EW_POLY(ShiftedChebyshevT, ChebyshevT, true)
MT_EW_POLY(ShiftedChebyshevU, ChebyshevU, true)
MT_EW_POLY(ShiftedChebyshevV, ChebyshevV, true)
MT_EW_POLY(ShiftedChebyshevW, ChebyshevW, true)
MT_EW_POLY(HermiteH, HermiteH, false)
MT_EW_POLY(HermiteHe, HermiteHe, false)
MT_EW_POLY(LaguerreL, LaguerreL, false)
MT_EW_POLY(LegendreP, LegendreP, false)
#undef MT_EW_POLY

// polygamma(n, x): n in ialpha.
template <> struct Fn<EwOp::Polygamma> {
  MT_EW_FN(O a, const EwParams& p) { return static_cast<O>(special::polygamma(p.ialpha, static_cast<double>(a))); }
};
// Hurwitz zeta(x, q).
template <> struct Fn<EwOp::Zeta> {
  MT_EW_FN(O a, O b, const EwParams&) {
    return static_cast<O>(special::zeta(static_cast<double>(a), static_cast<double>(b)));
  }
};
// The regularized lower and upper incomplete gamma functions P(a, x) and Q(a, x).
template <> struct Fn<EwOp::Igamma> {
  MT_EW_FN(O a, O x, const EwParams&) {
    return static_cast<O>(special::igamma(static_cast<double>(a), static_cast<double>(x), false));
  }
};
template <> struct Fn<EwOp::Igammac> {
  MT_EW_FN(O a, O x, const EwParams&) {
    return static_cast<O>(special::igamma(static_cast<double>(a), static_cast<double>(x), true));
  }
};
// entr(x) = -x ln x, 0 at 0, -inf below.
template <> struct Fn<EwOp::Entr> {
  MT_EW_FN(O a, const EwParams&) {
    if (a != a) return a;
    if (a > O(0)) return static_cast<O>(-a * std::log(a));
    if (a == O(0)) return O(0);
    return -std::numeric_limits<O>::infinity();
  }
};
// x log(y) and x log1p(y): 0 where x is 0 (unless y is NaN).
template <> struct Fn<EwOp::Xlogy> {
  MT_EW_FN(O a, O b, const EwParams&) {
    if (b != b) return b;
    if (a == O(0)) return O(0);
    return static_cast<O>(a * std::log(b));
  }
};
template <> struct Fn<EwOp::Xlog1py> {
  MT_EW_FN(O a, O b, const EwParams&) {
    if (b != b) return b;
    if (a == O(0)) return O(0);
    return static_cast<O>(a * std::log1p(b));
  }
};
// logit(x) = log(x / (1 - x)); with eps (has_lo, lo) x is clamped to [eps, 1 - eps] first.
template <> struct Fn<EwOp::Logit> {
  MT_EW_FN(O a, const EwParams& p) {
    if (p.has_lo) {
      const O lo = static_cast<O>(p.lo), hi = O(1) - lo;
      a = a < lo ? lo : (a > hi ? hi : a);
    }
    return static_cast<O>(std::log(a / (O(1) - a)));
  }
};
// (grad, x): grad / (x (1 - x)); outside [0, 1] NaN, or, with eps, 0 outside [eps, 1 - eps].
template <> struct Fn<EwOp::LogitBackward> {
  MT_EW_FN(O g, O x, const EwParams& p) {
    if (p.has_lo) {
      const O lo = static_cast<O>(p.lo), hi = O(1) - lo;
      return (x < lo || x > hi) ? O(0) : static_cast<O>(g / (x * (O(1) - x)));
    }
    if (x < O(0) || x > O(1)) return std::numeric_limits<O>::quiet_NaN();
    return static_cast<O>(g / (x * (O(1) - x)));
  }
};

} // namespace mytorch::ew
