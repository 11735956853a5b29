"""Covariance and correlation: `cov` and `corrcoef` (rows are variables, columns observations).

Both are compositions of ember ops, so their gradients come from the ops' own derivatives.
"""
from __future__ import annotations

import warnings

from .. import _dtype as dt
from .._tensor import Tensor, type_name
from .._creation import arange
from .registry import Exports

__all__ = ["cov", "corrcoef"]


def _weights(w, name: str, n: int, integral: bool) -> Tensor:
    if not isinstance(w, Tensor):
        raise TypeError(f"cov(): argument '{name}' must be a Tensor, not {type_name(w)}")
    if w.ndim > 1:
        raise RuntimeError(f"cov(): expected {name} to have one or fewer dimensions but got {name} with {w.ndim} "
                           f"dimensions")
    if w.numel() != n:
        raise RuntimeError(f"cov(): expected {name} to have the same numel as there are observations in the input but "
                           f"got {w.numel()} != {n}")
    if integral and dt.is_float(w._data.dtype):
        raise RuntimeError(f"cov(): expected {name} to have integral dtype but got {name} with {w.dtype} dtype")
    if not integral and not dt.is_float(w._data.dtype):
        raise RuntimeError(f"cov(): expected {name} to have floating point dtype but got {name} with {w.dtype} dtype")
    if bool((w < 0).any()):
        raise RuntimeError(f"cov(): {name} cannot be negative")
    return w


def cov(input: Tensor, *, correction: int = 1, fweights: Tensor | None = None, aweights: Tensor | None = None) -> Tensor:
    """The covariance matrix of the variables in input's rows (one variable, as a 1-D input: a 0-d result).

    With weights w = fweights·aweights (each optional) and W = Σw, the mean is μ = Σ_j w_j x_j / W and
    cov = (x − μ) diag(w) (x − μ)ᵀ / (W − correction·Σ(w·aweights)/W) — which is N − correction without
    weights, and W − correction with frequency weights only."""
    if not isinstance(input, Tensor):
        raise TypeError(f"cov(): argument 'input' (position 1) must be Tensor, not {type_name(input)}")
    if input.ndim > 2:
        raise RuntimeError(f"cov(): expected input to have two or fewer dimensions but got an input with {input.ndim} "
                           f"dimensions")
    x = input if dt.is_float(input._data.dtype) else input.to(dt.get_default_dtype())
    x = x.reshape(1, -1) if x.ndim < 2 else x
    n = x.shape[1]
    w = None
    if fweights is not None:
        w = _weights(fweights, "fweights", n, True)
    if aweights is not None:
        a = _weights(aweights, "aweights", n, False)  # (a wider float promotes the result, as in PyTorch)
        w = a if w is None else w * a
    if w is None:
        w_sum, avg = n, x.mean(1)
        fact = n - correction
    else:
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if correction == 0:
            fact = w_sum
        elif aweights is None:
            fact = w_sum - correction
        else:
            fact = w_sum - correction * (w * aweights).sum() / w_sum
    if float(fact) <= 0:
        warnings.warn("cov(): degrees of freedom is <= 0. Correction should be strictly less than the number of "
                      "observations.", UserWarning, stacklevel=2)
        fact = fact * 0 if isinstance(fact, Tensor) else 0
    xm = x - avg.unsqueeze(1)
    c = (xm if w is None else xm * w) @ xm.t() / fact
    return c.reshape(()) if c.shape[0] == 1 else c  # (one variable: a 0-d result, as PyTorch's)


def corrcoef(input: Tensor) -> Tensor:
    """Pearson's correlation coefficients of the variables in input's rows: cov_ij / √(cov_ii·cov_jj), clipped
    to [−1, 1] (rounding can step outside)."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    i = arange(c.shape[0], device=c.device)
    s = c[i, i].sqrt()
    return (c / s.unsqueeze(1) / s.unsqueeze(0)).clamp(-1, 1)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(globals(), functions=__all__, methods=__all__)
