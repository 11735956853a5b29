"""Unfold (im2col) and fold (col2im): sliding local blocks of an image as columns, and their sum back.

    unfold(x)[n, (c, a, b), (i, j)] = x_pad[n, c, i·sh + a·dh, j·sw + b·dw]
    fold = unfoldᵀ: each column entry added back to the input position it was read from

The two ops are each other's adjoint, so each one's gradient is the other.
"""
from __future__ import annotations

from .. import backend
from .. import _dtype as dt
from .._tensor import Tensor
from ..autograd.function import Op
from .nn_args import ntuple, tensor_arg
from .shape import View
from .windows import Win, pad_hw, windows

__all__ = ["unfold", "fold"]


class Unfold(Op):
    """z[n, (c, a, b), (i, j)] = x_pad[n, c, i·s + a·d, j·s + b·d] (im2col);  dz/dx = Fold(gz), its adjoint."""

    saves_inputs = False

    def forward(self, x, win, hw):
        self.consts = (win, hw)
        ohw = win.out(hw)
        n, c = x.shape[:2]
        v = windows(pad_hw(x, win.p), win, ohw)  # (N, C, OH, OW, kh, kw)
        return backend.array_module(x).ascontiguousarray(v.transpose(0, 1, 4, 5, 2, 3)).reshape(n, c * win.k[0] * win.k[1], ohw[0] * ohw[1])

    jvp = Op.linear_jvp  # linear in x

    def backward(self, gz):
        return Fold.apply(gz, *self.consts)


class Fold(Op):
    """z = col2im(g): each column's (c, a, b) entries added back to the input positions they were read from;
    dz/dg = Unfold(gz), its adjoint."""

    saves_inputs = False

    def forward(self, g, win, hw):
        self.consts = (win, hw)
        n = g.shape[0]
        kh, kw = win.k
        ohw = win.out(hw)
        cols = g.reshape(n, g.shape[1] // (kh * kw), kh, kw, *ohw)
        (pt, pb), (pl, pr) = win.p
        h, w = hw
        am = backend.array_module(g)
        buf = am.zeros((n, cols.shape[1], h + pt + pb, w + pl + pr), g.dtype)
        for a, b, rows, cs in win.offsets(ohw):
            buf[:, :, rows, cs] += cols[:, :, a, b]
        return am.ascontiguousarray(buf[:, :, pt:pt + h, pl:pl + w])

    jvp = Op.linear_jvp  # linear in g

    def backward(self, gz):
        return Unfold.apply(gz, *self.consts)


def _fold_args(op: str, kernel_size, dilation, padding, stride) -> Win:
    k = ntuple(kernel_size, 2, op, "kernel_size")
    d = ntuple(dilation, 2, op, "dilation")
    p = ntuple(padding, 2, op, "padding")
    s = ntuple(stride, 2, op, "stride")
    if any(v <= 0 for v in k + d + s) or any(v < 0 for v in p):
        raise RuntimeError(f"{op}(): kernel_size, dilation and stride must be positive and padding non-negative, got "
                           f"kernel_size={list(k)}, dilation={list(d)}, padding={list(p)}, stride={list(s)}")
    return Win(k, s, d, tuple((v, v) for v in p))


def _float_only(op: str, x: Tensor) -> None:
    if not dt.is_float(x._data.dtype):  # as PyTorch, whose im2col/col2im kernels are floating-point only
        raise NotImplementedError(f"{op}(): not implemented for {x.dtype} input; convert it with .float()")


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding local blocks of (N, C, H, W) (or (C, H, W)) as columns: (N, C·kH·kW, L), L the number of blocks."""
    x = tensor_arg(input, "unfold", "input", 1)
    win = _fold_args("unfold", kernel_size, dilation, padding, stride)
    if x.ndim not in (3, 4):
        raise RuntimeError(f"unfold(): Input Error: Only 3D or 4D input Tensors are supported (got {x.ndim}D, "
                           f"size {list(x.shape)})")
    _float_only("unfold", x)
    batched = x.ndim == 4
    hw = tuple(x.shape[-2:])
    ohw = win.out(hw)
    if any(v < 1 for v in ohw):
        raise RuntimeError(f"unfold(): Given input with spatial size {hw}, kernel_size={win.k}, dilation={win.d}, "
                           f"padding={(win.p[0][0], win.p[1][0])}, calculated shape of the array of sliding blocks as "
                           f"{ohw}, but its components must be at least one.")
    x4 = x if batched else View.apply(x, (1,) + tuple(x.shape))
    y = Unfold.apply(x4, win, hw)
    return y if batched else View.apply(y, y.shape[1:])


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sum sliding local blocks (N, C·kH·kW, L) (or unbatched) back into an (N, C, *output_size) image: unfold's adjoint."""
    x = tensor_arg(input, "fold", "input", 1)
    win = _fold_args("fold", kernel_size, dilation, padding, stride)
    hw = ntuple(output_size, 2, "fold", "output_size")
    if x.ndim not in (2, 3):
        raise RuntimeError(f"fold(): Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                           f"(got {x.ndim}D, size {list(x.shape)})")
    _float_only("fold", x)
    batched = x.ndim == 3
    kk = win.k[0] * win.k[1]
    c_kk, length = x.shape[-2:]
    if c_kk % kk:
        raise RuntimeError(f"fold(): Expected size of input's dimension {x.ndim - 2} to be divisible by the product of "
                           f"kernel_size, but got input.size({x.ndim - 2})={c_kk} and kernel_size={win.k}.")
    ohw = win.out(hw)
    if any(v < 1 for v in ohw) or ohw[0] * ohw[1] != length:
        raise RuntimeError(f"fold(): Given output_size={hw}, kernel_size={win.k}, dilation={win.d}, "
                           f"padding={(win.p[0][0], win.p[1][0])}, stride={win.s}, expected size of input's dimension "
                           f"{x.ndim - 1} to match the calculated number of sliding blocks {ohw[0]} * {ohw[1]} = "
                           f"{ohw[0] * ohw[1]}, but got input.size({x.ndim - 1})={length}.")
    x3 = x if batched else View.apply(x, (1,) + tuple(x.shape))
    y = Fold.apply(x3, win, hw)
    return y if batched else View.apply(y, y.shape[1:])
