#!/usr/bin/python3
"""Near-minimax polynomial fits used by the C prelude (lib/backends/cpu/c_prelude.cpp):
least squares on Chebyshev nodes with relative-error weights, then Lawson reweighting
toward the minimax solution; coefficients printed as the f32 literals the prelude uses,
lowest order first, with the fit's maximum relative error before f32 rounding.
tests/cpu/prelude_math_test.cpp checks the bounds the rounded coefficients reach.
    /usr/bin/python3 bench/cpu/prelude_fit.py"""
import numpy as np


def cheb_nodes(a, b, n=20000):
    k = np.arange(n)
    return (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (k + 0.5) / n)


def lawson_fit(target, powers, x, weight, iterations=60):
    """Coefficients c minimizing max |sum c_p x^p - target| * weight (approximately)."""
    a = np.stack([x**p for p in powers], 1) * weight[:, None]
    b = target * weight
    w = np.ones_like(x)
    for _ in range(iterations):
        c, *_ = np.linalg.lstsq(a * np.sqrt(w)[:, None], b * np.sqrt(w), rcond=None)
        err = np.abs(a @ c - b)
        w = w * err
        w /= w.sum()
    return c, np.max(np.abs(a @ c - b))


def show(name, c, err):
    print(f"{name:6s} rel err {err:.2e}: " + ", ".join("%.9g" % np.float32(v) for v in c))


pi4, half_ln2 = np.pi / 4, np.log(2) / 2
r = cheb_nodes(1e-4, pi4)
s = r * r
# sin r = r + r^3 (c0 + c1 s + c2 s^2)
show("sin", *lawson_fit((np.sin(r) - r) / r**3, [0, 1, 2], s, r**3 / np.sin(r)))
# cos r = 1 + s (c0 + c1 s + c2 s^2 + c3 s^3)
show("cos", *lawson_fit((np.cos(r) - 1) / s, [0, 1, 2, 3], s, s / np.cos(r)))
r = cheb_nodes(-half_ln2, half_ln2)
r = r[np.abs(r) > 1e-5]
# exp r = 1 + r + r^2 (c0 + ... + c4 r^4)
show("exp", *lawson_fit((np.expm1(r) - r) / r**2, [0, 1, 2, 3, 4], r, r**2 / np.exp(r)))
# expm1 r = r (1 + r (c0 + ... + c5 r^5))
p = np.expm1(r) / r
show("expm1", *lawson_fit((p - 1) / r, [0, 1, 2, 3, 4, 5], r, r / p))
