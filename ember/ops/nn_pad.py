"""pad: constant padding (one op; negative pads crop) and reflect/replicate/circular padding (an index
gather along each padded axis, whose gradient sums the copies back onto their source)."""
from __future__ import annotations

import numpy as np

from .. import backend
from .._tensor import Tensor
from ..autograd.function import Op
from .indexing import IndexSelect
from .nn_args import tensor_arg

__all__ = ["pad"]


class ConstantPad(Op):
    """z = x with pads[i] = (before, after) entries of `value` added along each axis (negative pads crop);
    dz/dx = gz padded by the negated pads (the crop back, zeros where x was cropped)."""

    saves_inputs = False

    def forward(self, x, pads, value):
        self.pads = pads
        shape = tuple(n + l + r for n, (l, r) in zip(x.shape, pads))
        am = backend.array_module(x)
        out = am.zeros(shape, x.dtype) if value == 0 else am.full(shape, value, x.dtype)
        src = tuple(slice(max(-l, 0), n - max(-r, 0)) for n, (l, r) in zip(x.shape, pads))
        dst = tuple(slice(max(l, 0), m - max(r, 0)) for m, (l, r) in zip(shape, pads))
        if all(s.start < s.stop for s in src):
            out[dst] = x[src]
        return out

    def jvp(self, t, x, pads, value):
        return ConstantPad.apply(t[0], pads, 0)  # the fill is a constant: its entries' tangent is 0

    def backward(self, gz):
        return ConstantPad.apply(gz, tuple((-l, -r) for l, r in self.pads), 0)


def _pad_index(n: int, l: int, r: int, mode: str) -> np.ndarray:
    """Source index along an axis of length n for each of the n + l + r outputs of a reflect/replicate/circular pad."""
    i = np.arange(-l, n + r)
    if mode == "reflect":
        i = np.abs(i)
        return np.where(i >= n, 2 * (n - 1) - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    # circular: the input cropped by the negative pads, wrapped around (as PyTorch)
    lo, m = max(-l, 0), n - max(-l, 0) - max(-r, 0)
    return lo + (np.arange(n + l + r) - max(l, 0)) % m


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last len(pad)/2 dims: pad = (last_before, last_after, 2nd-last_before, ...). mode 'constant'
    (fill `value`, negative pads crop) or 'reflect', 'replicate', 'circular' (of the last 1–3 dims of a
    batched or unbatched input; the gradient sums the copies back onto their source)."""
    x = tensor_arg(input, "pad", "input", 1)
    try:
        p = tuple(int(v.__index__()) for v in pad)
    except (AttributeError, TypeError):
        raise TypeError(f"pad(): argument 'pad' must be a sequence of ints, got {pad!r}") from None
    if len(p) % 2:
        raise RuntimeError(f"pad(): Padding length must be divisible by 2, got pad={list(p)}")
    m = len(p) // 2
    if m > x.ndim:
        raise RuntimeError(f"pad(): Padding length should be less than or equal to two times the input dimension but "
                           f"got padding length {len(p)} and input of dimension {x.ndim}")
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"pad(): Unrecognised padding mode {mode!r}; expected one of {', '.join(_PAD_MODES)}")
    # pads per axis, first axis first (pad lists the last axis first)
    pads = ((0, 0),) * (x.ndim - m) + tuple((p[2 * j], p[2 * j + 1]) for j in reversed(range(m)))
    if mode == "constant":
        for ax, (n, (l, r)) in enumerate(zip(x.shape, pads)):
            if n + l + r < 0:
                raise RuntimeError(f"pad(): The input size {n}, plus negative padding {l} and {r} resulted in a negative "
                                   f"output size, which is invalid. Check dimension {ax} of your input.")
        return ConstantPad.apply(x, pads, 0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f"pad(): Padding mode {mode!r} doesn't take in value argument (got value={value})")
    if not (m in (1, 2, 3) and x.ndim in (m + 1, m + 2)):
        raise NotImplementedError(f"pad(): Padding size {len(p)} is not supported for {x.ndim}D input tensor in mode "
                                  f"{mode!r}. Supported: padding size 2 for 2D/3D input, 4 for 3D/4D input, 6 for 4D/5D "
                                  f"input (the last 1, 2 or 3 dims of a batched or unbatched input).")
    y = x
    for ax in range(x.ndim - m, x.ndim):
        n, (l, r) = x.shape[ax], pads[ax]
        if not (l or r):
            continue
        if mode == "reflect" and (l >= n or r >= n):
            raise RuntimeError(f"pad(): Argument #4: Padding size should be less than the corresponding input dimension, "
                               f"but got: padding ({l}, {r}) at dimension {ax} of input {list(x.shape)}")
        if mode == "circular" and (l > n or r > n):
            raise RuntimeError(f"pad(): Padding value causes wrapping around more than once: padding ({l}, {r}) at "
                               f"dimension {ax} of input {list(x.shape)}")
        if n + l + r < 0 or n == 0:
            raise RuntimeError(f"pad(): padding ({l}, {r}) at dimension {ax} of input {list(x.shape)} in mode {mode!r} "
                               f"gives an invalid output size")
        y = IndexSelect.apply(y, dim=ax, index=backend.array_module(x._data).asarray(_pad_index(n, l, r, mode)))
    return y
