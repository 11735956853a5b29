"""Gradient clipping, in place on the parameters' `.grad` arrays (PyTorch's `torch.nn.utils.clip_grad`)."""
from __future__ import annotations

import math

import numpy as np

from ... import _capture
from ... import _dtype as dt
from ..._tensor import Tensor, bump_version, make

__all__ = ["clip_grad_norm_", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm"]


def _as_list(tensors, what: str) -> list:
    if isinstance(tensors, Tensor):
        return [tensors]
    try:
        out = list(tensors)
    except TypeError:
        raise TypeError(f"{what} must be a Tensor or an iterable of Tensors, got {type(tensors).__name__}") from None
    for i, t in enumerate(out):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}[{i}] must be a Tensor, got {type(t).__name__}")
    return out


def _grads(parameters) -> list:
    return [p.grad for p in _as_list(parameters, "parameters") if p.grad is not None]


def _vector_norm(a, p: float) -> float:
    """The p-norm of all of a's elements, accumulated in float64 (a float, so summing norms loses nothing)."""
    if a.size == 0:
        return 0.0
    x = np.abs(a.astype(np.float64, copy=False)).reshape(-1)
    if p == math.inf:
        return float(x.max())
    if p == -math.inf:
        return float(x.min())
    if p == 0:
        return float(np.count_nonzero(x))
    if p == 1:
        return float(x.sum())
    if p == 2:
        return float(math.sqrt(x @ x))
    return float((x ** p).sum() ** (1.0 / p))


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """The norm_type-norm of the norms of `tensors` (= the norm of all their elements together), as a 0-d tensor
    of their dtype; 0 when there are none."""
    ts = [t._data if isinstance(t, Tensor) else t for t in _as_list(tensors, "tensors")]
    p = float(norm_type)
    if not ts:
        return make(np.asarray(0.0, dt.NP_DEFAULT_FLOAT))
    norms = [_vector_norm(a, p) for a in ts]
    total = _vector_norm(np.asarray(norms), p)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {p} for gradients from `parameters` is non-finite, so it cannot "
                           f"be clipped. To disable this error and scale the gradients by the non-finite norm anyway, "
                           f"set `error_if_nonfinite=False`")
    return make(np.asarray(total, np.result_type(*ts)))


def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
    """Scale the gradients of `parameters` in place by min(1, max_norm/(total_norm + 1e-6))."""
    coef = min(float(max_norm) / (float(total_norm) + 1e-6), 1.0)
    for p in _as_list(parameters, "parameters"):
        g = p.grad
        if g is not None:
            if _capture.ACTIVE is not None:
                _capture.writing(g)
            g._data *= np.asarray(coef, g._data.dtype)
            bump_version(g)


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                    foreach=None) -> Tensor:
    """Rescale the gradients of `parameters` in place so that their total norm_type-norm is at most max_norm:
    each is multiplied by min(1, max_norm/(total + 1e-6)). Returns the total norm before clipping (a 0-d tensor).
    norm_type may be inf (the largest absolute gradient). `foreach` is accepted for compatibility."""
    params = _as_list(parameters, "parameters")
    grads = [p.grad for p in params if p.grad is not None]
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    if grads:
        clip_grads_with_norm_(params, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient of `parameters` in place to [-clip_value, clip_value]."""
    v = float(clip_value)
    for g in _grads(parameters):
        if _capture.ACTIVE is not None:
            _capture.writing(g)
        np.clip(g._data, -v, v, out=g._data)
        bump_version(g)
