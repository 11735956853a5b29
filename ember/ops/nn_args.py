"""Argument checks shared by the nn ops (convolution, unfold/fold, pad, interpolate, pooling): PyTorch's
error messages for a non-Tensor argument and for a size given as an int or a sequence of ints."""
from __future__ import annotations

from .._tensor import Tensor


def tensor_arg(v, op: str, name: str, pos: int) -> Tensor:
    """v itself when it is a Tensor; else PyTorch's TypeError naming argument `name` (position `pos`) of `op`."""
    if not isinstance(v, Tensor):
        raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be Tensor, not {type(v).__name__}")
    return v


def ntuple(v, n: int, op: str, name: str) -> tuple:
    """An int, or a sequence of 1 or n ints, as a tuple of n ints (PyTorch's error otherwise)."""
    seq = v if isinstance(v, (tuple, list)) else (v,)
    try:
        t = tuple(int(i.__index__()) for i in seq)
    except (AttributeError, TypeError):
        raise TypeError(f"{op}(): {name} must be an int or a tuple of {n} ints, got {v!r}") from None
    if len(t) == 1:
        t = t * n
    if len(t) != n:
        raise RuntimeError(f"{op}(): expected {name} to be a single integer value or a list of {n} values to match the "
                           f"{'convolution' if op.startswith('conv') else 'pooling'} dimensions, but got {name}={list(t)}")
    return t
