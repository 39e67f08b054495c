#!/usr/bin/env python3
"""Fits the coefficients of the kernels' erfc (kc/core/gelu.hpp, KernelMath::normal_cdf, which
evaluates Phi(x) = erfc(-x / sqrt 2) / 2 with this form, z = |x| / sqrt 2 folded into its constants).

The form: for z >= 0,  erfc(z) = t * 2^(Q(t) - z^2 log2(e)),  t = 1 / (1 + z/2),
with Q a polynomial of degree DEGREE (5) in t. erfc(z) e^(z^2) is smooth and slowly varying in t on
(0, 1], so a low-degree polynomial fits its logarithm closely; the exponential factor e^(-z^2)
carries the fast decay exactly. Negative arguments use erfc(-z) = 2 - erfc(z).

The fit minimizes the maximum relative error of erfc on z in [0, 10] (beyond 10, erfc is below
float's smallest normal number and flushes to 0 in the kernels) by iteratively reweighted least
squares. (The float check below clamps z at Z_MAX to keep its exponent finite; the kernels need
no clamp: 2^(exponent) flushes to 0 there.)
Prints the coefficients and the error of the fitted form, in double and in float arithmetic
(exactly rounded exp2 and reciprocal; the kernels' MUFU versions add about 2^-22 each).

Run: python3 stage2-core/tools/fit_erfc.py
"""
import math

import numpy as np
from scipy.special import erfcx  # erfc(z) * exp(z^2), accurate for large z

DEGREE = 5
SLOPE = 0.5  # t = 1 / (1 + SLOPE z)
Z_MAX = 10.0


def fit():
    z = np.concatenate([np.linspace(0.0, Z_MAX, 20001), np.geomspace(1e-7, Z_MAX, 20001)])
    t = 1.0 / (1.0 + SLOPE * z)
    target = np.log2(erfcx(z) / t)
    vander = np.vander(t, DEGREE + 1, increasing=True)
    weights = np.ones_like(z)
    for _ in range(200):
        coefficients, *_ = np.linalg.lstsq(vander * weights[:, None], target * weights, rcond=None)
        error = np.abs(vander @ coefficients - target)
        weights *= 1.0 + 20.0 * error / error.max()
        weights /= weights.mean()
    return coefficients


def erfc_float(z, coefficients):
    """erfc in the kernel's order of operations, in float32 (exact exp2/reciprocal)."""
    z = np.float32(z)
    a = np.abs(z)
    m = np.where(a > np.float32(Z_MAX), np.float32(Z_MAX), a).astype(np.float32)
    t = (np.float32(1.0) / (np.float32(SLOPE) * m + np.float32(1.0))).astype(np.float32)
    q = np.float32(coefficients[-1])
    for c in coefficients[-2::-1]:
        q = (q * t + np.float32(c)).astype(np.float32)
    exponent = ((m * np.float32(-math.log2(math.e))) * m + q).astype(np.float32)
    r = (t * np.exp2(exponent.astype(np.float64)).astype(np.float32)).astype(np.float32)
    return np.where(z < 0, np.float32(2.0) - r, r)


def main():
    coefficients = fit()
    print(f"erfc(z) = t * 2^(Q(t) - z^2 log2 e), t = 1/(1 + {SLOPE} z), Q of degree {DEGREE}:")
    print("  " + ", ".join(f"{float(np.float32(c))!r}f" for c in coefficients))
    zz = np.linspace(0.0, Z_MAX, 200001)
    tt = 1.0 / (1.0 + SLOPE * zz)
    fitted = tt * np.exp2(np.polyval(coefficients[::-1], tt))
    print(f"max relative error of the form, double, z in [0, {Z_MAX:g}]: "
          f"{np.max(np.abs(fitted / erfcx(zz) - 1.0)):.2e}")
    print("max relative error in float arithmetic (it grows with z: the rounding of z^2 in the")
    print("exponent), by range of z:")
    for low, high in [(-5, 0), (0, 1), (1, 2), (2, 4), (4, 6), (6, 8), (8, 9)]:
        z = np.linspace(low, high, 20001)
        exact = np.array([math.erfc(v) for v in z])
        approx = erfc_float(z, coefficients).astype(np.float64)
        print(f"  [{low:g}, {high:g}]: {np.max(np.abs(approx - exact) / exact):.1e}")


if __name__ == "__main__":
    main()
