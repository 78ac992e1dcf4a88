"""Writes kernels/include/mytorch/special_cheb.h: the Chebyshev expansions of the modified Bessel functions
I0, I1, K0 and K1 that ops_special.h evaluates (Note [Bessel functions by Chebyshev expansions] there).

Each table is the Chebyshev series of a smooth function on an interval, computed here from mpmath at 40 digits
(the coefficients are the discrete cosine transform of the function at 100 Chebyshev nodes) and cut where a
coefficient falls below 1e-18 of the largest. The script checks every table against mpmath at random points
before it writes anything. Run from the repository root: python scripts/gen_special_tables.py
(needs mpmath, which torch's wheel brings through sympy)."""

from __future__ import annotations

import pathlib
import random

import mpmath as mp

mp.mp.dps = 40
OUT = pathlib.Path(__file__).resolve().parent.parent / "kernels/include/mytorch/special_cheb.h"


def chebyshev(f, a, b, nodes=100, cut=1e-18):
    th = [mp.pi * (j + mp.mpf(1) / 2) / nodes for j in range(nodes)]
    fv = [f((a + b) / 2 + (b - a) / 2 * mp.cos(t)) for t in th]
    c = [2 * mp.fsum(fv[j] * mp.cos(k * th[j]) for j in range(nodes)) / nodes for k in range(nodes)]
    c[0] /= 2
    top = max(abs(x) for x in c)
    n = nodes
    while abs(c[n - 1]) < cut * top:
        n -= 1
    return c[:n]


def clenshaw(c, t):  # as special_cheb.h's chebyshev_series, in double
    b1 = b2 = 0.0
    for k in range(len(c) - 1, 0, -1):
        b1, b2 = float(c[k]) + 2 * t * b1 - b2, b1
    return float(c[0]) + t * b1 - b2


def _i_small(nu):  # exp(-x) I0(x), exp(-x) I1(x) / x on [0, 8]
    return lambda x: mp.exp(-x) * (mp.besseli(0, x) if nu == 0 else (mp.besseli(1, x) / x if x else mp.mpf(1) / 2))


def _i_large(nu):  # sqrt(x) exp(-x) I(x) as a function of u = 8 / x on [0, 1]
    return lambda u: 1 / mp.sqrt(2 * mp.pi) if u == 0 else mp.sqrt(8 / u) * mp.exp(-8 / u) * mp.besseli(nu, 8 / u)


def _k_small(nu):  # K0 + log(x/2) I0, x (K1 - log(x/2) I1): power series in s = x^2, on [0, 4]
    def f(s):
        if s == 0:
            return -mp.euler if nu == 0 else mp.mpf(1)
        x = mp.sqrt(s)
        lg = mp.log(x / 2)
        return mp.besselk(0, x) + lg * mp.besseli(0, x) if nu == 0 else x * (mp.besselk(1, x) - lg * mp.besseli(1, x))

    return f


def _k_large(nu):  # sqrt(x) exp(x) K(x) as a function of u = 2 / x on [0, 1]
    return lambda u: mp.sqrt(mp.pi / 2) if u == 0 else mp.sqrt(2 / u) * mp.exp(2 / u) * mp.besselk(nu, 2 / u)


def _j_small(nu):  # J0(x), J1(x) / x as functions of s = x^2 on [0, 64]
    def f(s):
        if s == 0:
            return mp.mpf(1) if nu == 0 else mp.mpf(1) / 2
        x = mp.sqrt(s)
        return mp.besselj(0, x) if nu == 0 else mp.besselj(1, x) / x

    return f


def _y_small(nu):  # Y0 - (2/pi) log(x/2) J0; (Y1 - (2/pi) (log(x/2) J1 - 1/x)) / x: power series in s = x^2
    def f(s):
        if s == 0:
            return 2 * mp.euler / mp.pi if nu == 0 else (2 * mp.euler - 1) / (2 * mp.pi)
        x = mp.sqrt(s)
        lg = mp.log(x / 2)
        if nu == 0:
            return mp.bessely(0, x) - 2 / mp.pi * lg * mp.besselj(0, x)
        return (mp.bessely(1, x) - 2 / mp.pi * (lg * mp.besselj(1, x) - 1 / x)) / x

    return f


def _pq_large(nu, q):  # Hankel's P(x) and x Q(x) as functions of u = 64 / x^2 on [0, 1] (DLMF 10.17)
    def f(u):
        if u == 0:
            return mp.mpf(1) if not q else (mp.mpf(-1) / 8 if nu == 0 else mp.mpf(3) / 8)
        x = 8 / mp.sqrt(u)
        chi = x - (2 * nu + 1) * mp.pi / 4
        j, y, a = mp.besselj(nu, x), mp.bessely(nu, x), mp.sqrt(mp.pi * x / 2)
        return a * (j * mp.cos(chi) + y * mp.sin(chi)) if not q else x * a * (y * mp.cos(chi) - j * mp.sin(chi))

    return f


# name, function, interval, what it is[, the scale of errors and of float's cut: K0 or K1's smallest value on
# (0, 2], where the series, which crosses zero, is one term of the function; J and Y's size near x = 8 (they have
# zeros: their float forms are held to an absolute error, as the alignment rule's floor does); else the series'
# smallest value]
TABLES = [
    ("kI0Small", _i_small(0), (0, 8), "exp(-x) I0(x), x in [0, 8], t = x / 4 - 1"),
    ("kI1Small", _i_small(1), (0, 8), "exp(-x) I1(x) / x, x in [0, 8], t = x / 4 - 1"),
    ("kI0Large", _i_large(0), (0, 1), "sqrt(x) exp(-x) I0(x), x >= 8, t = 16 / x - 1"),
    ("kI1Large", _i_large(1), (0, 1), "sqrt(x) exp(-x) I1(x), x >= 8, t = 16 / x - 1"),
    ("kK0Small", _k_small(0), (0, 4), "K0(x) + log(x / 2) I0(x), x in [0, 2], t = x^2 / 2 - 1", mp.besselk(0, 2)),
    ("kK1Small", _k_small(1), (0, 4), "x (K1(x) - log(x / 2) I1(x)), x in [0, 2], t = x^2 / 2 - 1", mp.besselk(1, 2)),
    ("kK0Large", _k_large(0), (0, 1), "sqrt(x) exp(x) K0(x), x >= 2, t = 4 / x - 1"),
    ("kK1Large", _k_large(1), (0, 1), "sqrt(x) exp(x) K1(x), x >= 2, t = 4 / x - 1"),
    ("kJ0Small", _j_small(0), (0, 64), "J0(x), |x| <= 8, t = x^2 / 32 - 1", mp.mpf("0.1")),
    ("kJ1Small", _j_small(1), (0, 64), "J1(x) / x, |x| <= 8, t = x^2 / 32 - 1", mp.mpf("0.05")),
    ("kY0Small", _y_small(0), (0, 64), "Y0(x) - (2 / pi) log(x / 2) J0(x), x <= 8, t = x^2 / 32 - 1", mp.mpf("0.1")),
    (
        "kY1Small",
        _y_small(1),
        (0, 64),
        "(Y1(x) - (2 / pi) (log(x / 2) J1(x) - 1 / x)) / x, x <= 8, t = x^2 / 32 - 1",
        mp.mpf("0.05"),
    ),
    ("kP0Large", _pq_large(0, False), (0, 1), "Hankel's P0(x), x >= 8, t = 128 / x^2 - 1"),
    ("kQ0Large", _pq_large(0, True), (0, 1), "Hankel's x Q0(x), x >= 8, t = 128 / x^2 - 1"),
    ("kP1Large", _pq_large(1, False), (0, 1), "Hankel's P1(x), x >= 8, t = 128 / x^2 - 1"),
    ("kQ1Large", _pq_large(1, True), (0, 1), "Hankel's x Q1(x), x >= 8, t = 128 / x^2 - 1"),
]


def main():
    rng = random.Random(0)
    blocks = []
    for name, f, (a, b), what, *scale in TABLES:
        c = chebyshev(f, mp.mpf(a), mp.mpf(b))
        worst = 0.0
        for _ in range(200):
            x = mp.mpf(rng.uniform(a, b))
            want = f(x)
            got = clenshaw(c, float((2 * x - a - b) / (b - a)))
            worst = max(worst, float(abs(got - want) / max(abs(want), scale[0] if scale else 0)))
        # float's cut: the terms whose absolute sum stays below half a float rounding of the smallest value
        low = scale[0] if scale else min(abs(f(mp.mpf(a) + (b - a) * mp.mpf(j) / 64)) for j in range(65))
        m = len(c)
        while m > 1 and mp.fsum(abs(v) for v in c[m - 1 :]) < low * 2.0**-25:
            m -= 1
        print(f"{name}: {len(c)} terms, worst {worst:.2e}; float {m} terms")
        assert worst < 4e-15, (name, worst)
        nums = [mp.nstr(v, 17, min_fixed=0, max_fixed=0) for v in c]
        lines = [", ".join(nums[i : i + 3]) for i in range(0, len(nums), 3)]
        body = " \\\n".join(f"    {line}{',' if i + 1 < len(lines) else ''}" for i, line in enumerate(lines))
        blocks.append(
            f"// {what}: {len(c)} terms, within {worst:.1e} relative in double (200 random points)\n"
            f"#define MT_CHEB_{name[1:].upper()} \\\n  {{ \\\n{body} \\\n  }}\n"
            f"// float's leading terms: their tail sums to under 2^-25 of the smallest value\n"
            f"#define MT_CHEB_{name[1:].upper()}_FLOAT_TERMS {m}\n"
        )
    OUT.write_text(
        "// Generated by scripts/gen_special_tables.py (Chebyshev coefficients from mpmath; do not edit by hand):\n"
        "// the expansions of Note [Bessel functions by Chebyshev expansions] (ops_special.h). Each macro is the\n"
        "// initialiser of a local table, so that device code can use it as host code does. clang-format is off:\n"
        "// the tables keep the generator's layout, three coefficients a line.\n"
        "#pragma once\n\n// clang-format off\n" + "\n".join(blocks) + "// clang-format on\n"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
