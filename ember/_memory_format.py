"""Memory formats: `ember.contiguous_format`, `channels_last`, `channels_last_3d`, `preserve_format`.

A tensor's array may have any strides (NumPy's, as PyTorch's storage). `channels_last` keeps a 4-d tensor's
logical shape (N, C, H, W) but lays its memory out as (N, H, W, C): the array is an NHWC-contiguous array
viewed through a transpose. Every op takes such arrays as they are (NumPy follows strides); what changes is
which memory is adjacent. `is_contiguous(memory_format=...)`, `contiguous(memory_format=...)`,
`clone(memory_format=...)` and `to(memory_format=...)` read and produce these layouts as PyTorch's do.
"""
from __future__ import annotations

import numpy as np

from . import backend


class memory_format:
    """A memory layout of a tensor's elements (PyTorch's `torch.memory_format`)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return "ember." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


contiguous_format = memory_format("contiguous_format")
channels_last = memory_format("channels_last")
channels_last_3d = memory_format("channels_last_3d")
preserve_format = memory_format("preserve_format")
_ALL = {f.name: f for f in (contiguous_format, channels_last, channels_last_3d, preserve_format)}


def _by_name(name: str) -> memory_format:
    return _ALL[name]


# channel-last orders: the axes of the logical shape, outermost first in memory
_ORDER = {"channels_last": (0, 2, 3, 1), "channels_last_3d": (0, 2, 3, 4, 1)}
_RANK = {"channels_last": 4, "channels_last_3d": 5}


def check(fmt, op: str) -> memory_format:
    if fmt is None:
        return preserve_format if op == "clone" else contiguous_format
    if not isinstance(fmt, memory_format):
        raise TypeError(f"{op}(): memory_format must be an ember.memory_format such as ember.channels_last, got "
                        f"{type(fmt).__name__}")
    return fmt


def _strides_in_order(a, order: tuple) -> bool:
    """Whether `a` is dense with its axes laid out in memory in `order` (outermost first); size-1 axes are free."""
    expected = a.itemsize
    for ax in reversed(order):
        n = a.shape[ax]
        if n != 1 and a.strides[ax] != expected:
            return False
        expected *= n
    return True


def is_in(a, fmt: memory_format) -> bool:
    """Whether array `a` is laid out in `fmt` (PyTorch's `is_contiguous(memory_format=fmt)`)."""
    if fmt is contiguous_format:
        return a.flags.c_contiguous
    if fmt is preserve_format:
        raise RuntimeError("is_contiguous(): preserve memory format is unsupported by the contiguous operator")
    if a.ndim != _RANK[fmt.name]:
        return False
    return _strides_in_order(a, _ORDER[fmt.name])


def lay_out(a, fmt: memory_format, op: str):
    """A copy of array `a` laid out in `fmt` (preserve_format: `a`'s own order where it is dense, else C)."""
    xp = backend.array_module(a)
    if fmt is contiguous_format:
        return xp.ascontiguousarray(a) if not a.flags.c_contiguous else a.copy()
    if fmt is preserve_format:
        return a.copy(order="K")
    rank = _RANK[fmt.name]
    if a.ndim != rank:
        raise RuntimeError(f"{op}(): required rank {rank} tensor to use {fmt.name} format, got a tensor of shape "
                           f"{list(a.shape)}")
    order = _ORDER[fmt.name]
    inverse = tuple(int(i) for i in np.argsort(order))
    return xp.ascontiguousarray(a.transpose(order)).transpose(inverse)
