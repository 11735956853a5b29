"""`ember.special`: PyTorch's `torch.special` namespace of special functions.

Most are ember's own ops under SciPy's names (`expit` is `sigmoid`, `gammaln` is `lgamma`, `psi` is `digamma`,
`multigammaln` is `mvlgamma`); the ops themselves live in ember/ops/elementwise_ext.py and their numerics in
ember/ops/special.py (SciPy's ufuncs where installed, NumPy otherwise). The Bessel J, Y and K functions and Airy's
Ai are evaluated by SciPy only: without SciPy they raise a RuntimeError saying so. As in PyTorch, those, the
spherical Bessel j₀ and the orthogonal polynomials have no gradient.
"""
from __future__ import annotations

from ._tensor import Tensor
from .ops.elementwise_ext import (digamma, entr, erfc, erfcx, erfinv, exp2, i0, i0e, i1, i1e, log_ndtr, logit,
                                  mvlgamma, ndtr, ndtri, polygamma, polynomial, scipy_unary, sinc, spherical_bessel_j0,
                                  xlog1py, xlogy, zeta)
from .ops.elementwise_ext import igamma as gammainc, igammac as gammaincc, lgamma as gammaln
from .ops.nn_activation import log_softmax as _log_softmax, softmax as _softmax
from .ops.reduce import logsumexp
from .ops.unary import erf, expm1, log1p, round, sigmoid as expit

__all__ = ["airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "chebyshev_polynomial_t",
           "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "digamma", "entr", "erf",
           "erfc", "erfcx", "erfinv", "exp2", "expit", "expm1", "gammainc", "gammaincc", "gammaln",
           "hermite_polynomial_h", "hermite_polynomial_he", "i0", "i0e", "i1", "i1e", "laguerre_polynomial_l",
           "legendre_polynomial_p", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp", "modified_bessel_i0",
           "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1", "multigammaln", "ndtr", "ndtri",
           "polygamma", "psi", "round", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
           "shifted_chebyshev_polynomial_w", "sinc", "softmax", "spherical_bessel_j0", "xlog1py", "xlogy", "zeta"]

psi = digamma


def multigammaln(input: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma function of dimension p (`ember.mvlgamma`)."""
    return mvlgamma(input, p)


def log_softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """log(softmax(input)) along dim, computed stably; `dtype` converts the input first."""
    return _log_softmax(input, dim, dtype=dtype)


def softmax(input: Tensor, dim: int, *, dtype=None) -> Tensor:
    """exp(input) / Σ exp(input) along dim; `dtype` converts the input first."""
    return _softmax(input, dim, dtype=dtype)


# ---------------------------------------------------------------------- through SciPy (no gradient, as in PyTorch)
airy_ai = scipy_unary("airy_ai", "airy")
bessel_j0, bessel_j1 = scipy_unary("bessel_j0", "j0"), scipy_unary("bessel_j1", "j1")
bessel_y0, bessel_y1 = scipy_unary("bessel_y0", "y0"), scipy_unary("bessel_y1", "y1")
modified_bessel_k0 = scipy_unary("modified_bessel_k0", "k0")
modified_bessel_k1 = scipy_unary("modified_bessel_k1", "k1")
scaled_modified_bessel_k0 = scipy_unary("scaled_modified_bessel_k0", "k0e")
scaled_modified_bessel_k1 = scipy_unary("scaled_modified_bessel_k1", "k1e")


def modified_bessel_i0(input: Tensor) -> Tensor:
    """I₀(x) (`i0`), without a gradient, as PyTorch's modified_bessel_i0."""
    return i0(input).detach()


def modified_bessel_i1(input: Tensor) -> Tensor:
    """I₁(x) (`i1`), without a gradient, as PyTorch's modified_bessel_i1."""
    return i1(input).detach()


# ---------------------------------------------------------------------- classical orthogonal polynomials (recurrences)
chebyshev_polynomial_t, chebyshev_polynomial_u = polynomial("chebyshev_t"), polynomial("chebyshev_u")
chebyshev_polynomial_v, chebyshev_polynomial_w = polynomial("chebyshev_v"), polynomial("chebyshev_w")
shifted_chebyshev_polynomial_t = polynomial("shifted_chebyshev_t")
shifted_chebyshev_polynomial_u = polynomial("shifted_chebyshev_u")
shifted_chebyshev_polynomial_v = polynomial("shifted_chebyshev_v")
shifted_chebyshev_polynomial_w = polynomial("shifted_chebyshev_w")
hermite_polynomial_h, hermite_polynomial_he = polynomial("hermite_h"), polynomial("hermite_he")
laguerre_polynomial_l, legendre_polynomial_p = polynomial("laguerre_l"), polynomial("legendre_p")
