"""Special functions on raw arrays, without SciPy: erf to float64 accuracy on any device.

`erf_array` is what the `erf` op (ops/unary.py) and the exact GELU (ops/nn_activation.py) compute with.
On the CPU it uses SciPy's ufunc where SciPy is installed (an optional speed-up) and otherwise a NumPy-only
evaluation: a Chebyshev fit of the scaled log of erfc, and a Taylor series near 0.
"""
from __future__ import annotations

import math

import numpy as np

from .. import _dtype as dt
from .. import backend


def _erfc_scaled_log(z: float) -> float:
    """g = ln(erfc(z)/t) + z², t = 2/(2+z), for z >= 0, to near float64 accuracy.

    Below 7 from math.erfc. Above, erfc underflows (z > 27), so g comes from the asymptotic series
    erfc(z)·e^(z²) = 1/(z√π) · Σ_k (-1)^k (2k-1)!!/(2z²)^k, whose smallest term there is < 1e-21;
    this form also avoids cancelling ln(erfc) against z²."""
    t = 2 / (2 + z)
    if z < 7:
        return math.log(math.erfc(z) / t) + z * z
    s, term, k = 1.0, 1.0, 1
    while term * term > 1e-36:  # |term| > 1e-18 (`abs` is the ember op in this module)
        term *= -(2 * k - 1) / (2 * z * z)
        s += term
        k += 1
    return math.log(s / (z * math.sqrt(math.pi) * t))


def _erfc_chebyshev(n: int = 32):
    """Chebyshev interpolant of g(t) = ln(erfc(z)/t) + z² with t = 2/(2+z) ∈ (0, 1], so that
    erfc(z) = t·exp(-z² + g(t)). g is smooth in t; the fit is made once, at first use."""
    k = np.arange(n)
    t = 0.5 + 0.5 * np.cos(np.pi * (k + 0.5) / n)  # Chebyshev nodes on (0, 1)
    g = np.array([_erfc_scaled_log(2 / ti - 2) for ti in t])
    return np.polynomial.chebyshev.chebfit(2 * t - 1, g, n - 1)


_ERFC_COEF = None
_ERF_TAYLOR = [2 / math.sqrt(math.pi) * (-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(24)]


_SCIPY_ERF = None  # scipy.special.erf where SciPy is installed (an optional speed-up), else False


def erf_array(x):
    """erf on an array of any device (ops/nn_activation.py's GELU calls it too), to float64 accuracy.
    On the CPU: SciPy's ufunc when SciPy is installed (~15x faster: GELU's cost in a Transformer step), else
    NumPy only (`_erf_numpy`). On CUDA: the backend's kernel (CuPy has no `cupy.erf`; cupyx.scipy has)."""
    global _SCIPY_ERF
    if x.__class__ is not np.ndarray:
        return backend.CUDA.erf(x)
    if _SCIPY_ERF is None:
        try:
            from scipy.special import erf as _SCIPY_ERF
        except ImportError:  # the core needs only NumPy
            _SCIPY_ERF = False
    if _SCIPY_ERF is not False and x.dtype.kind == "f" and x.dtype.itemsize >= 4:
        return _SCIPY_ERF(x)
    return _erf_numpy(x)


def _erf_numpy(x):
    """erf on an array, to float64 accuracy, using NumPy only."""
    global _ERFC_COEF
    if _ERFC_COEF is None:
        _ERFC_COEF = _erfc_chebyshev()
    out_dtype = x.dtype if x.dtype.kind == "f" else dt.NP_DEFAULT_FLOAT
    z = np.abs(x.astype(np.float64).reshape(-1))  # 1-d, so that a 0-d input stays an array below
    t = 2 / (2 + z)
    erfc = t * np.exp(-z * z + np.polynomial.chebyshev.chebval(2 * t - 1, _ERFC_COEF))
    r = 1 - erfc
    small = z < 1.0
    if small.any():  # 1 - erfc loses relative precision near 0: the Taylor series there (24 terms: 1e-17 at |x| = 1)
        zs = z[small]
        z2, acc = zs * zs, np.full_like(zs, _ERF_TAYLOR[-1])
        for c in _ERF_TAYLOR[-2::-1]:  # Horner in z², smallest terms first
            acc *= z2
            acc += c
        r[small] = acc * zs
    return np.copysign(r.reshape(x.shape), x).astype(out_dtype, copy=False)
