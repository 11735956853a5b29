"""Special functions on raw arrays, without SciPy: erf to float64 accuracy on any device, and the numerics of
the ops of ops/elementwise_ext.py and `ember.special`.

`erf_array` is what the `erf` op (ops/unary.py) and the exact GELU (ops/nn_activation.py) compute with.
On the CPU it uses SciPy's ufunc where SciPy is installed (an optional speed-up) and otherwise a NumPy-only
evaluation: a Chebyshev fit of the scaled log of erfc, and a Taylor series near 0.

The others (below): the gamma family (ln Γ, ψ, ψ⁽ⁿ⁾ and Hurwitz's ζ by Stirling and Euler–Maclaurin series after
shifting the argument up; reflection for negative arguments), erfc/erfcx from the same erfc fit, erfinv and the
normal quantile by Halley steps from a closed-form guess, the modified Bessel functions I₀/I₁ by Chebyshev series
fitted at first use, the orthogonal polynomials by their recurrences; a few rare ones through SciPy only.
"""
from __future__ import annotations

import importlib
import math

import numpy as np

from .. import _dtype as dt
from .. import backend
from ..backend import array_module


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
        r[small] = _erf_taylor(z[small])
    return np.copysign(r.reshape(x.shape), x).astype(out_dtype, copy=False)


def _erf_taylor(z):
    """erf(z) for |z| < 1 by its Taylor series (float64)."""
    z2, acc = z * z, backend.array_module(z).full_like(z, _ERF_TAYLOR[-1])
    for c in _ERF_TAYLOR[-2::-1]:  # Horner in z², smallest terms first
        acc *= z2
        acc += c
    return acc * z


# ====================================================================== the other special functions
# Each `<name>_array` takes a float array (the ops promote integer inputs first) and returns one of its dtype,
# from SciPy's ufunc where SciPy is installed and the array is NumPy's, else from `_<name>_numpy`: a NumPy-only
# evaluation in float64 to ~1e-13 relative accuracy (tests/test_special.py holds the two equal). The NumPy-only
# forms call the array module of their input (`xp`), so they run on CUDA arrays too. A few rare functions exist
# through SciPy only (`special_fn`: cupyx.scipy's on CUDA).
_SCIPY_FNS: dict = {}  # name -> scipy.special.<name>, or None without SciPy


def scipy_fn(name: str):
    """scipy.special.<name> where SciPy is installed, else None."""
    f = _SCIPY_FNS.get(name, 0)
    if f == 0:
        try:
            import scipy.special
            f = getattr(scipy.special, name)
        except ImportError:
            f = None
        _SCIPY_FNS[name] = f
    return f


def special_fn(name: str, api: str, like):
    """The ufunc `name` of scipy.special for arrays of `like`'s device: SciPy's for NumPy arrays, cupyx.scipy's for
    CUDA ones; else a RuntimeError saying that `api` (e.g. "ember.special.bessel_j0") needs it."""
    if array_module(like) is np:
        f = scipy_fn(name)
        if f is None:
            raise RuntimeError(f"{api} needs SciPy: pip install 'ember[fast]' (or pip install scipy)")
        return f
    be = backend.cuda_backend()
    mod = be.cpx.scipy.special if be.fake else importlib.import_module("cupyx.scipy.special")
    f = getattr(mod, name, None)
    if f is None:
        raise RuntimeError(f"{api} is not available for CUDA tensors (cupyx.scipy.special has no {name}); compute it "
                           f"on the CPU: .cpu()")
    return f


def _evaluate(name: str, numpy_impl, x):
    """SciPy's `name` on a NumPy array where installed, else `numpy_impl` on a flat float64 copy (1-d, so that
    its ufuncs give arrays, never NumPy scalars); the result in x's dtype (float32 for narrower floats)."""
    d = x.dtype if x.dtype.itemsize >= 4 else np.dtype(np.float32)
    if x.__class__ is np.ndarray:
        f = scipy_fn(name)
        if f is not None:
            return f(x.astype(d, copy=False)).astype(d, copy=False)
    return numpy_impl(x.astype(np.float64).reshape(-1)).astype(d, copy=False).reshape(x.shape)


def _clenshaw(u, coef):
    """Σ_k coef[k]·T_k(u) (Chebyshev series) by Clenshaw's recurrence, a few whole-array steps per coefficient."""
    xp = array_module(u)
    b1 = xp.zeros_like(u)
    b2 = xp.zeros_like(u)
    u2 = 2 * u
    for c in coef[:0:-1]:
        b0 = u2 * b1
        b0 -= b2
        b0 += c
        b1, b2 = b0, b1
    return u * b1 - b2 + coef[0]


def _chebfit(f, n: int) -> np.ndarray:
    """Chebyshev coefficients of the degree n-1 interpolant of f (a Python function) on [-1, 1]."""
    odd = 2 * np.arange(n) + 1  # the nodes u_j = cos θ_j, θ_j = π(2j+1)/(2n)
    fu = np.array([f(float(v)) for v in np.cos(np.pi * odd / (2 * n))])
    # c_k = (2/n) Σ_j f(u_j) cos(k θ_j), with k θ_j reduced exactly (in integers) to [0, 2π) before the cosine
    angle = np.pi * (np.outer(np.arange(n), odd) % (4 * n)) / (2 * n)
    c = np.cos(angle) @ fu * (2 / n)
    c[0] /= 2
    return c


def _abs_sinpi(x):
    """|sin(πx)|, exactly 0 at the integers (from the distance to the nearest integer, in [0, 1/2])."""
    xp = array_module(x)
    return xp.sin(np.pi * xp.abs(x - xp.round(x)))


def _tanpi(x):
    """tan(πx), exactly 0 at the integers (period 1: the argument is reduced to [-1/2, 1/2])."""
    xp = array_module(x)
    return xp.tan(np.pi * (x - xp.round(x)))


# ---------------------------------------------------------------------- gamma family
# Bernoulli numbers B_2k, k = 1..8, for the Stirling series of ln Γ and ψ (accurate to 1e-17 from z = 10)
_B2K = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510)
_SHIFT = 10  # arguments below this are shifted up by the recurrences before the asymptotic series
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def _shifted(x):
    """(z, n) with z = x + n ≥ 10 for each x in (0, 10) (n = 0 elsewhere); the loop runs over the ≤ 10 steps."""
    xp = array_module(x)
    n = xp.where(x < _SHIFT, xp.ceil(_SHIFT - x), 0.0)
    return x + n, n


def _lgamma_numpy(x):
    """ln|Γ(x)|: Stirling's series (x - ½)ln z - z + ½ln 2π + Σ B_2k / (2k(2k-1) z^(2k-1)) at z = x + n ≥ 10, less
    ln(x(x+1)…(x+n-1)) (Γ(x+1) = xΓ(x)); for x < 0.5 the reflection ln Γ(x) = ln(π/|sin πx|) - ln Γ(1-x)."""
    xp = array_module(x)
    neg = x < 0.5
    y = xp.where(neg, 1 - x, x)  # ≥ 0.5
    z, n = _shifted(y)
    r = 1 / (z * z)
    s = 0.0
    for k in range(len(_B2K), 0, -1):  # the series in 1/z², smallest terms first
        s = s * r + _B2K[k - 1] / (2 * k * (2 * k - 1))
    res = (z - 0.5) * xp.log(z) - z + _HALF_LOG_2PI + s / z
    prod = xp.ones_like(y)
    for k in range(1, _SHIFT):  # (y+1)…(y+n-1); y itself separately: ln y stays exact for tiny y
        prod *= xp.where(k < n, y + k, 1.0)
    res -= xp.where(n > 0, xp.log(y) + xp.log(prod), 0.0)
    if neg.any():
        refl = xp.log(np.pi / _abs_sinpi(x)) - res  # inf at the non-positive integers (sin πx = 0)
        res = xp.where(neg, refl, res)
    res = xp.where((x == 1) | (x == 2), 0.0, res)  # exact at the roots Γ(1) = Γ(2) = 1
    return xp.where(xp.isinf(x), np.inf, res)  # Γ(±inf): ln|Γ| = inf, as PyTorch's lgamma


def _digamma_numpy(x):
    """ψ(x) = d ln Γ(x)/dx: ψ(z) ≈ ln z - 1/(2z) - Σ B_2k / (2k z^2k) at z = x + n ≥ 10, less Σ 1/(x+k)
    (ψ(x+1) = ψ(x) + 1/x); for x < 0.5 the reflection ψ(x) = ψ(1-x) - π/tan(πx). At 0: -1/x (∓inf, as PyTorch),
    at the negative integers NaN."""
    xp = array_module(x)
    neg = x < 0.5
    y = xp.where(neg, 1 - x, x)
    z, n = _shifted(y)
    r = 1 / (z * z)
    s = 0.0
    for k in range(len(_B2K), 0, -1):
        s = s * r + _B2K[k - 1] / (2 * k)
    res = xp.log(z) - 0.5 / z - s * r
    for k in range(_SHIFT):
        res -= xp.where(k < n, 1 / (y + k), 0.0)
    if neg.any():
        t = _tanpi(x)
        refl = xp.where(t == 0, np.nan, res - np.pi / t)
        res = xp.where(neg, xp.where(x == 0, -1 / x, refl), res)
    return xp.where(x == np.inf, np.inf, res)


def _zeta_numpy(s, q):
    """Hurwitz's ζ(s, q) = Σ_k (q+k)^-s, for s > 1: nine terms summed, then the Euler–Maclaurin tail at a = q + 9,
    a^(1-s)/(s-1) + a^-s/2 + Σ_j B_2j/(2j)! · s(s+1)…(s+2j-2) · a^(-s-2j+1). s = 1: inf; s < 1: NaN. For q ≤ 0:
    inf at the integers; else, for an integer s, the reflection of ψ^(s-1) (`_polygamma_reflected`), NaN for
    other s (q^-s is not real). s: an array that broadcasts with the array q, or a number."""
    xp = array_module(q)
    neg = q <= 0
    qq = xp.where(neg, 1.0, q)
    number = not hasattr(s, "shape")
    if number and s == math.floor(s) and 1 < s <= 64:
        res = _zeta_integer_order(int(s), qq)  # (polygamma's case, and the gradients of lgamma and digamma)
    else:
        res = _zeta_positive(s, qq)
    res = xp.where(s == 1, np.inf, xp.where(s < 1, np.nan, res))
    if neg.any():
        if not number:
            s, q = xp.broadcast_arrays(s, q)
        refl = xp.full(res.shape, np.nan)
        m = neg & (s == xp.floor(s)) & (s > 1)  # integer orders: by reflection
        if m.any():
            orders = [int(s)] if number else [int(o) for o in xp.unique(s[m])]  # (one pass per distinct order)
            for order in orders:
                sel = m & (s == order)
                psi = _polygamma_reflected(order - 1, q[sel])
                refl[sel] = (-1) ** order * psi / math.factorial(order - 1)
        refl = xp.where(q == xp.floor(q), np.inf, refl)
        res = xp.where(neg, refl, res)
    return res


def _zeta_positive(s, q):
    """ζ(s, q) for q > 0 and any s > 1 (arrays that broadcast), by the Euler–Maclaurin sum of `_zeta_numpy`."""
    res = 0.0
    for k in range(9):
        res = res + (q + k) ** -s
    a = q + 9
    res = res + a ** (1 - s) / (s - 1) + 0.5 * a ** -s
    term = s * a ** (-s - 1)  # s·a^(-s-1), then ·(s+2j-1)(s+2j)/a² each j
    fact = 2.0  # (2j)!
    for j in range(1, 13):
        res = res + _bernoulli_2j(j) / fact * term
        term = term * (s + 2 * j - 1) * (s + 2 * j) / (a * a)
        fact *= (2 * j + 1) * (2 * j + 2)
    return res


def _zeta_integer_order(n: int, q):
    """ζ(n, q) for an integer n ≥ 2 and q > 0: as `_zeta_positive`, with the powers by repeated multiplication
    (no pow: ~2.5x faster) and the tail's series, whose coefficients are then numbers, by Horner's rule in 1/a²."""
    def recip_pow(b):  # b^-n
        r, out, e = 1 / b, None, n
        while e:
            if e & 1:
                out = r if out is None else out * r
            e >>= 1
            if e:
                r = r * r
        return out
    res = recip_pow(q)
    for k in range(1, 9):
        res += recip_pow(q + k)
    a = q + 9
    a_n = recip_pow(a)
    # tail = a^-n·(a/(n-1) + 1/2 + Σ_j c_j·a^(1-2j)), c_j = B_2j/(2j)!·n(n+1)…(n+2j-2): Horner in u = 1/a²
    coef, rising, fact = [], float(n), 2.0
    for j in range(1, 13):
        coef.append(_bernoulli_2j(j) / fact * rising)
        rising *= (n + 2 * j - 1) * (n + 2 * j)
        fact *= (2 * j + 1) * (2 * j + 2)
    u = 1 / (a * a)
    series = coef[-1]
    for c in coef[-2::-1]:
        series = series * u + c
    res += a_n * (a / (n - 1) + 0.5 + series / a)
    return res


_BERN = {}


def _bernoulli_2j(j: int) -> float:
    """B_2j (B_2 = 1/6, B_4 = -1/30, ...), by the Akiyama–Tanigawa algorithm in exact fractions (cached)."""
    if not _BERN:
        from fractions import Fraction
        a = [Fraction(0)] * 26
        for m in range(26):
            a[m] = Fraction(1, m + 1)
            for k in range(m, 0, -1):
                a[k - 1] = k * (a[k - 1] - a[k])
            if m % 2 == 0 and m:
                _BERN[m // 2] = float(a[0])
    return _BERN[j]


def _polygamma_reflected(n: int, x):
    """ψ^(n)(x) for x < 0 from the reflection ψ(1-x) - ψ(x) = π cot πx differentiated n times:
    ψ^(n)(x) = (-1)^n ψ^(n)(1-x) - π^(n+1) P_n(cot πx), where d^n/dy^n cot y = P_n(cot y), P_0(c) = c and
    P_(k+1)(c) = -(1 + c²) P_k'(c)."""
    p = np.polynomial.Polynomial([0.0, 1.0])
    for _ in range(n):
        p = -np.polynomial.Polynomial([1.0, 0.0, 1.0]) * p.deriv()
    c = 1 / _tanpi(x)
    value = 0.0
    for coef in p.coef[::-1]:  # P_n(c) by Horner's rule
        value = value * c + coef
    return (-1) ** n * _polygamma_numpy(n, 1 - x) - np.pi ** (n + 1) * value


def _polygamma_numpy(n: int, x):
    """ψ^(n)(x), the n-th derivative of ψ: (-1)^(n+1) n! ζ(n+1, x) for n ≥ 1."""
    if n == 0:
        return _digamma_numpy(x)
    return (-1) ** (n + 1) * math.factorial(n) * _zeta_numpy(np.float64(n + 1), x)


def lgamma_array(x):
    """ln|Γ(x)| (inf at the non-positive integers and at ±inf, as PyTorch's lgamma)."""
    r = _evaluate("gammaln", _lgamma_numpy, x)
    return array_module(x).where(x == -np.inf, np.inf, r).astype(r.dtype, copy=False)  # (SciPy's gives -inf there)


def digamma_array(x):
    """ψ(x) (∓inf at ±0, NaN at the negative integers, as PyTorch's digamma)."""
    return _evaluate("psi", _digamma_numpy, x)


def polygamma_array(n: int, x):
    """ψ^(n)(x) for an integer n ≥ 0."""
    if n == 0:
        return digamma_array(x)
    r = zeta_array(n + 1.0, x) * ((-1) ** (n + 1) * math.factorial(n))
    return array_module(x).where(x == np.inf, 0, r).astype(r.dtype, copy=False) if n == 1 else r  # ψ'(inf) = 0


def zeta_array(s, q):
    """Hurwitz's ζ(s, q) (`_zeta_numpy`, also where SciPy is installed: its zeta is 3-7x slower); NaN at q = inf,
    as PyTorch's."""
    xp = array_module(q)
    d = np.result_type(s.dtype, q.dtype) if hasattr(s, "dtype") else q.dtype
    d = d if d.itemsize >= 4 else np.dtype(np.float32)
    if hasattr(s, "dtype") and s.ndim:
        s, q = xp.broadcast_arrays(s, q)
        s = s.astype(np.float64).reshape(-1)
    else:
        s = float(s)  # (a 0-d s as a number: the fast path of an integer order)
    shape = q.shape
    q = q.astype(np.float64).reshape(-1)  # (1-d: ufuncs give arrays, never NumPy scalars)
    r = _zeta_numpy(s, q)
    return xp.where(q == np.inf, np.nan, r).astype(d, copy=False).reshape(shape)


# ---------------------------------------------------------------------- erfc, erfcx, erfinv and the normal distribution
def _erfc_parts(z):
    """(t, g) with erfc(z) = t·exp(-z² + g) for z ≥ 0 (the Chebyshev fit `_ERFC_COEF` of `_erf_numpy`)."""
    global _ERFC_COEF
    if _ERFC_COEF is None:
        _ERFC_COEF = _erfc_chebyshev()
    t = 2 / (2 + z)
    return t, _clenshaw(2 * t - 1, _ERFC_COEF)


def _erfcx_numpy(x):
    """erfcx(x) = e^(x²)·erfc(x): t·e^g for x ≥ 0 (no overflow, no underflow), 2e^(x²) - erfcx(-x) below."""
    xp = array_module(x)
    z = xp.abs(x)
    t, g = _erfc_parts(xp.where(xp.isnan(z), 0.0, xp.minimum(z, 1e300)))
    r = t * xp.exp(g)
    r = xp.where(x < 0, 2 * xp.exp(x * x) - r, xp.where(x == np.inf, 0.0, r))
    return xp.where(xp.isnan(x), np.nan, r)


def _erfc_numpy(x):
    """erfc(x) = 1 - erf(x), without cancellation: t·exp(-x² + g) for x ≥ 1, 2 - erfc(-x) for x ≤ -1, and
    1 - erf(x) between, from erf's Taylor series (x: 1-d)."""
    xp = array_module(x)
    z = xp.abs(x)
    t, g = _erfc_parts(xp.where(xp.isnan(z), 0.0, xp.minimum(z, 1e300)))
    tail = t * xp.exp(g - z * z)
    r = xp.where(x < 0, 2 - tail, tail)
    small = z < 1
    if small.any():
        r[small] = 1 - _erf_taylor(x[small])
    return xp.where(xp.isnan(x), np.nan, r)


def _erfinv_numpy(x):
    """erfinv(x) for |x| ≤ 1 (±1 give ±inf, |x| > 1 NaN)."""
    xp = array_module(x)
    ax = xp.abs(x)
    y = _inverse_erf(ax, 1 - ax)
    return xp.copysign(xp.where(ax > 1, np.nan, y), x)


def _inverse_erf(ax, c):
    """y ≥ 0 with erf(y) = ax, given c = 1 - ax exactly (for small c the caller's c is more accurate than 1 - ax).
    Winitzki's closed-form approximation (to ~2e-3), then two Halley steps (cubic convergence: ~1e-8, then the
    rounding level): on erf(y) = ax for ax ≤ 1/2, where the Taylor series gives erf; on ln erfc(y) = ln c above,
    the log keeping the step accurate as erfc underflows. Each branch runs on its own elements only."""
    xp = array_module(ax)
    shape = ax.shape
    ax, c = ax.reshape(-1), c.reshape(-1)  # 1-d, so that a 0-d input stays an array below
    a = 0.147
    w = xp.log(c * (1 + ax))  # ln(1 - ax²)
    b = 2 / (np.pi * a) + w / 2
    y = xp.sqrt(xp.maximum(xp.sqrt(b * b - w / a) - b, 0.0))
    two_over_sqrt_pi = 2 / math.sqrt(math.pi)
    near = ax <= 0.5
    yn, an = y[near], ax[near]
    for _ in range(2):  # f = erf(y) - ax, f' = 2/√π·e^(-y²), f''/f' = -2y
        step = (_erf_taylor(yn) - an) / (two_over_sqrt_pi * xp.exp(-yn * yn))
        yn = yn - step / (1 + yn * step)
    far = ~near & (c > 0)
    yf, logc = y[far], xp.log(c[far])
    for _ in range(2):  # h = ln erfcx(y) - y² - ln c, h' = -k with k = 2/(√π·erfcx(y)), h'' = k(2y - k)
        t, g = _erfc_parts(yf)
        k = two_over_sqrt_pi / (t * xp.exp(g))
        step = -(g + xp.log(t) - yf * yf - logc) / k
        yf = yf - step / (1 + step * (yf - k / 2))
    y[near], y[far] = yn, yf
    return xp.where(c == 0, np.inf, y).reshape(shape)


def _ndtr_numpy(x):
    """Φ(x) = erfc(-x/√2)/2, the standard normal CDF."""
    return 0.5 * _erfc_numpy(-x * _SQRT1_2)


def _log_ndtr_numpy(x):
    """ln Φ(x): ln1p(-erfc(x/√2)/2) for x ≥ 0; ln(erfcx(-x/√2)/2) - x²/2 below (no underflow)."""
    xp = array_module(x)
    z = x * _SQRT1_2
    pos = xp.log1p(-0.5 * _erfc_numpy(xp.maximum(z, 0.0)))
    neg = xp.log(0.5 * _erfcx_numpy(-xp.minimum(z, 0.0))) - z * z
    return xp.where(x >= 0, pos, neg)


def _ndtri_numpy(p):
    """Φ⁻¹(p) = -√2·erfcinv(2p), by symmetry from q = min(p, 1 - p) (exact): y with erfc(y) = 2q."""
    xp = array_module(p)
    q = xp.where(p > 0.5, 1 - p, p)
    y = _SQRT2 * _inverse_erf(1 - 2 * q, 2 * q)
    y = xp.where(p > 0.5, y, -y)
    return xp.where((p < 0) | (p > 1), np.nan, y)


_SQRT2 = math.sqrt(2.0)
_SQRT1_2 = math.sqrt(0.5)


def erfc_array(x):
    return _evaluate("erfc", _erfc_numpy, x)


def erfcx_array(x):
    return _evaluate("erfcx", _erfcx_numpy, x)


def erfinv_array(x):
    return _evaluate("erfinv", _erfinv_numpy, x)


def ndtr_array(x):
    return _evaluate("ndtr", _ndtr_numpy, x)


def log_ndtr_array(x):
    return _evaluate("log_ndtr", _log_ndtr_numpy, x)


def ndtri_array(p):
    return _evaluate("ndtri", _ndtri_numpy, p)


# ---------------------------------------------------------------------- modified Bessel functions I0, I1
def _bessel_i_scaled_reference(nu: int, x: float) -> float:
    """e^-x·I_nu(x) for x ≥ 0 and nu ∈ {0, 1}, in 40-digit decimal arithmetic (used only to fit the Chebyshev
    series below): the power series Σ (x/2)^(2k+nu) / (k!(k+nu)!) below x = 50, where its terms are all positive;
    above, the asymptotic series e^x/√(2πx) · Σ_k (-1)^k Π_(j≤k) (4nu² - (2j-1)²) / (k! (8x)^k), whose smallest
    term there is below 1e-40."""
    from decimal import Decimal, localcontext
    with localcontext() as ctx:
        ctx.prec = 40
        X = Decimal(x)
        total, k = Decimal(0), 0
        if x < 50:
            term = (X / 2) ** nu / math.factorial(nu)
            while term > total * Decimal("1e-38") or k < 2:
                total += term
                k += 1
                term = term * (X / 2) ** 2 / (k * (k + nu))
            return float(total * (-X).exp())
        term = Decimal(1)
        while abs(term) > Decimal("1e-38"):
            total += term
            k += 1
            term = -term * (4 * nu * nu - (2 * k - 1) ** 2) / (k * 8 * X)
        return float(total / (2 * Decimal(math.pi) * X).sqrt())


_BESSEL_I = {}  # nu -> (coefficients on [0, 8] in u = x/4 - 1, coefficients on [8, inf) in u = 16/x - 1)


def _bessel_i_coef(nu: int):
    """Chebyshev fits (made once, at first use) of e^-x·I_nu(x)/x^nu on [0, 8] and of √x·e^-x·I_nu(x) above 8,
    each smooth in its variable."""
    c = _BESSEL_I.get(nu)
    if c is None:
        def near(u):
            x = 4 * (u + 1)
            return _bessel_i_scaled_reference(nu, x) / x ** nu if x else 0.5 ** nu

        def far(u):
            x = 16 / (u + 1)
            return _bessel_i_scaled_reference(nu, x) * math.sqrt(x)

        c = _BESSEL_I[nu] = (_chebfit(near, 30), _chebfit(far, 30))
    return c


def _bessel_ie_numpy(nu: int, x):
    """e^-|x|·I_nu(x) (I0 even, I1 odd)."""
    xp = array_module(x)
    near, far = _bessel_i_coef(nu)
    z = xp.abs(x)
    small = z <= 8
    r_near = _clenshaw(xp.minimum(z, 8.0) / 4 - 1, near) * (z if nu else 1.0)
    zf = xp.where(small | xp.isnan(z), 8.0, z)
    r_far = _clenshaw(16 / zf - 1, far) / xp.sqrt(zf)
    r = xp.where(small, r_near, r_far)
    r = xp.where(xp.isnan(x), np.nan, r)
    return xp.copysign(r, x) if nu else r


def _i0e_numpy(x):
    return _bessel_ie_numpy(0, x)


def _i1e_numpy(x):
    return _bessel_ie_numpy(1, x)


def _i0_numpy(x):
    xp = array_module(x)
    return _bessel_ie_numpy(0, x) * xp.exp(xp.abs(x))


def _i1_numpy(x):
    xp = array_module(x)
    return _bessel_ie_numpy(1, x) * xp.exp(xp.abs(x))


def i0_array(x):
    return _evaluate("i0", _i0_numpy, x)


def i0e_array(x):
    return _evaluate("i0e", _i0e_numpy, x)


def i1_array(x):
    return _evaluate("i1", _i1_numpy, x)


def i1e_array(x):
    return _evaluate("i1e", _i1e_numpy, x)


# ---------------------------------------------------------------------- through SciPy only
def gammainc_array(a, x, upper: bool, api: str):
    """P(a, x) (Q(a, x) when `upper`), the regularized incomplete gamma functions: SciPy's gammainc/gammaincc."""
    f = special_fn("gammaincc" if upper else "gammainc", api, x)
    return f(a, x).astype(np.result_type(a.dtype, x.dtype), copy=False)


def scipy_unary_array(name: str, api: str, x):
    """scipy.special.<name>(x) in x's dtype (for airy: its first result, Ai)."""
    f = special_fn(name, api, x)
    r = f(x.astype(np.float32) if x.dtype.itemsize < 4 else x)
    return (r[0] if name == "airy" else r).astype(x.dtype, copy=False)


def spherical_j0_array(x):
    """j₀(x) = sin(x)/x (1 at 0, 0 at ±inf)."""
    xp = array_module(x)
    with np.errstate(all="ignore"):
        return xp.where(x == 0, 1, xp.where(xp.isinf(x), 0, xp.sin(x) / x)).astype(x.dtype, copy=False)


# ---------------------------------------------------------------------- classical orthogonal polynomials
# (value at degree 1 as a function of the argument, recurrence p_(k+1) = f(k, x, p_k, p_(k-1)))
_POLYNOMIALS = {
    "chebyshev_t": (lambda x: x, lambda k, x, p, q: 2 * x * p - q),
    "chebyshev_u": (lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - q),
    "chebyshev_v": (lambda x: 2 * x - 1, lambda k, x, p, q: 2 * x * p - q),
    "chebyshev_w": (lambda x: 2 * x + 1, lambda k, x, p, q: 2 * x * p - q),
    "hermite_h": (lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - 2 * k * q),
    "hermite_he": (lambda x: x, lambda k, x, p, q: x * p - k * q),
    "laguerre_l": (lambda x: 1 - x, lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1)),
    "legendre_p": (lambda x: x, lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1)),
}


def polynomial_array(kind: str, x, n):
    """The degree-n polynomial of family `kind` at x (x and n broadcast; n truncated to an integer, 0 below 0),
    by its three-term recurrence over the degrees up to max(n), each step on the whole array. `shifted_*`
    families evaluate at 2x - 1."""
    xp = array_module(x)
    d = x.dtype
    x = x.astype(np.float64)  # (a float32 result is rounded once, from the float64 recurrence)
    if kind.startswith("shifted_"):
        kind, x = kind[len("shifted_"):], 2 * x - 1
    first, step = _POLYNOMIALS[kind]
    x, n = xp.broadcast_arrays(x, xp.trunc(n).astype(np.int64) if hasattr(n, "ndim") else xp.asarray(int(n)))
    top = int(n.max()) if n.size else 0
    out = xp.where(n >= 0, 1, 0).astype(x.dtype)  # degree 0 (and the zero of negative degrees)
    prev, cur = xp.ones_like(x), first(x)
    for k in range(1, top + 1):
        out = xp.where(n == k, cur, out)
        prev, cur = cur, step(k, x, cur, prev)
    return out.astype(d, copy=False)
