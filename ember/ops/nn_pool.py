"""Pooling: max, average and adaptive (average/max) over the last two axes of (N, C, H, W) or (C, H, W).

Max pooling is its own op: the windows are strided views of the padded input, and the running
maximum over the kernel offsets is taken for all windows at once (kh·kw vectorised passes,
never a loop over pixels; measured 5x faster than copying the windows out and calling argmax),
a chunk of images at a time so that the passes read the chunk from cache.
Its gradient scatters gz to each window's argmax. Average pooling is a convolution with a
kernel of ones (one GEMM over the window matrix), divided by the window sizes.
"""
from __future__ import annotations


import numpy as np

from .. import _capture, backend
from .._tensor import Tensor, constant, make
from ..autograd import forward_ad
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from .indexing import Take
from .linalg import matmul
from .nn_args import ntuple, tensor_arg
from .nn_conv import Conv
from .shape import View
from .windows import Win, chunk, pad_hw
from .. import _dtype as dt

_new = object.__new__

__all__ = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d"]


# ---------------------------------------------------------------------- geometry
def _pool_win(op: str, hw: tuple, kernel_size, stride, padding, dilation, ceil_mode: bool) -> tuple:
    """(Win, (OH, OW)) with PyTorch's output size; ceil_mode's partial last windows get extra bottom/right padding."""
    k = ntuple(kernel_size, 2, op, "kernel_size")
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else ntuple(stride, 2, op, "stride")
    p = ntuple(padding, 2, op, "padding")
    d = ntuple(dilation, 2, op, "dilation")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}(): kernel_size must be greater than zero, but got {list(k)}")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}(): stride must be greater than zero, but got {list(s)}")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{op}(): dilation must be greater than zero, but got {list(d)}")
    eff = tuple(dd * (kk - 1) + 1 for kk, dd in zip(k, d))
    if any(v < 0 or v > e // 2 for v, e in zip(p, eff)):
        raise RuntimeError(f"{op}(): pad should be at most half of effective kernel size, but got pad={list(p)}, "
                           f"kernel_size={list(k)} and dilation={list(d)}")
    out, pads = [], []
    for n, e, ss, pp in zip(hw, eff, s, p):
        num = n + 2 * pp - e
        o = (-(-num // ss) if ceil_mode else num // ss) + 1
        if ceil_mode and (o - 1) * ss >= n + pp:  # the last window must start inside the input or its left padding
            o -= 1
        out.append(o)
        pads.append((pp, pp + max(0, (o - 1) * ss + e - (n + 2 * pp))))
    if any(o < 1 for o in out):
        raise RuntimeError(f"{op}(): Given input size {list(hw)}, kernel_size={list(k)}, stride={list(s)}, "
                           f"padding={list(p)}, dilation={list(d)}: calculated output size {out} is too small")
    return Win(k, s, d, tuple(pads)), tuple(out)


def _as_4d(op: str, x: Tensor) -> tuple:
    if x.ndim not in (3, 4) or any(n == 0 for n in x.shape[-3:]):
        raise RuntimeError(f"{op}(): Expected 3D (unbatched) or 4D (batched) input with non-zero channel and spatial "
                           f"sizes, but got input of size: {list(x.shape)}")
    return (x, True) if x.ndim == 4 else (View.apply(x, (1,) + tuple(x.shape)), False)


def _unbatch(t: Tensor, batched: bool) -> Tensor:
    return t if batched else View.apply(t, t.shape[1:])


# ---------------------------------------------------------------------- max pooling
def argmax_scan(views: list, need_idx: bool, y: np.ndarray, idx: np.ndarray | None) -> None:
    """Running maximum over equally shaped arrays (the window entries, in row-major kernel order) into y
    and, if asked, the position of PyTorch's pick into idx: the first maximum, or the last NaN when there is one."""
    if not need_idx:
        y[...] = views[0]
        for v in views[1:]:
            np.maximum(y, v, out=y)
        return
    am = backend.array_module(y)
    idx[...] = 0
    it = idx.dtype.type
    wins, cand = am.empty(y.shape, bool), am.empty_like(idx)
    # two buffers in turn, so that "v wins" is a compare of the new maximum with the old on contiguous
    # arrays rather than of the strided v (W3's pools: 1.26 -> 0.90 ms and 0.80 -> 0.54 ms); the last
    # maximum lands in y
    bufs = (y, am.empty_like(y))
    cur = bufs[(len(views) - 1) % 2]
    cur[...] = views[0]
    for o, v in enumerate(views[1:], 1):
        prev, cur = cur, bufs[(len(views) - 1 - o) % 2]
        np.maximum(prev, v, out=cur)
        np.greater(cur, prev, out=wins)
        # o grows, so "idx = o where v wins" is a maximum: branch-free, unlike np.where or masked assignment
        np.maximum(idx, np.multiply(wins, it(o), out=cand), out=idx)
    if dt.is_float(y.dtype) and np.isnan(y).any():  # rare: redo the positions with PyTorch's NaN rule
        m = views[0].copy()
        idx[...] = 0
        for o, v in enumerate(views[1:], 1):
            u = v > m
            u |= v != v
            np.maximum(idx, u * it(o), out=idx)
            np.maximum(m, v, out=m)


def index_dtype(entries: int):
    """The dtype of window entry numbers 0 .. entries-1."""
    return np.uint8 if entries <= 256 else np.int32


def _lowest(dtype):
    return -np.inf if dt.is_float(dtype) else np.iinfo(dtype).min


def _disjoint(win: Win) -> bool:
    """Whether no two windows share an input position."""
    return all(s >= d * (k - 1) + 1 for k, s, d in zip(win.k, win.s, win.d))


def needs_indices(x: Tensor) -> bool:
    """Whether a max pool of x must keep its argmax positions for a derivative: x is recorded for backward or
    carries a forward-AD tangent."""
    return (x._requires_grad and MODE.grad) or bool(MODE.fw and forward_ad.is_dual(x))


class MaxPool(Op):
    """z[n, c, i, j] = max of window (i, j);  dz/dx = gz scattered to each window's argmax (PoolScatter)."""

    saves_inputs = False

    def forward(self, x, win, need_idx):
        n, c = x.shape[:2]
        ohw = win.out(x.shape[2:])
        am = backend.array_module(x)
        y = am.empty((n, c) + ohw, x.dtype)
        self.idx = am.empty(y.shape, index_dtype(win.k[0] * win.k[1])) if need_idx else None
        # chunks of images, so that the kh·kw strided passes over a chunk read it from cache, not memory
        # (one thread, batch 1000: W3's first pool 11.0 -> 6.5 ms without indices, 23 -> 12 ms with them)
        nc = chunk(n, c * x.shape[2] * x.shape[3] * x.itemsize)
        for n0 in range(0, n, nc):
            xp = pad_hw(x[n0:n0 + nc], win.p, _lowest(x.dtype))
            argmax_scan([xp[:, :, r, cs] for _, _, r, cs in win.offsets(ohw)], need_idx, y[n0:n0 + nc],
                         None if self.idx is None else self.idx[n0:n0 + nc])
        self.win, self.hw = win, x.shape[2:]
        return y

    def jvp(self, t, x):
        """z' = x' at each window's argmax (`max_pool2d` keeps the indices when x carries a tangent)."""
        return PoolGather.apply(t[0], self.idx, self.win, self.hw)

    def backward(self, gz):
        return PoolScatter.apply(gz, self.idx, self.win, self.hw)


class PoolScatter(Op):
    """z = zeros of the input's shape with g[n, c, i, j] added where window (i, j)'s entry number idx[n, c, i, j] lies;
    dz/dg = PoolGather(gz), its adjoint."""

    saves_inputs = False

    def forward(self, g, idx, win, hw):
        self.args = (idx, win, hw)
        (pt, pb), (pl, pr) = win.p
        h, w = hw
        n, c, oh, ow = g.shape
        hp, wp = h + pt + pb, w + pl + pr
        disjoint = _disjoint(win)
        # windows that tile the padded input write every entry: no zeroing needed (W3's pools: 5-15% faster)
        tiled = disjoint and win.d == (1, 1) and win.s == win.k and (oh * win.s[0], ow * win.s[1]) == (hp, wp)
        padded = bool(pt or pb or pl or pr)
        am = backend.array_module(g)
        out = (am.empty if tiled and not padded else am.zeros)((n, c, h, w), g.dtype)
        # a product with the 0/1 mask is branch-free (np.where is ~5x slower), but inf·0 would put NaN
        # in the other entries of an inf's window: non-finite gradients (rare; one sum detects them) take np.where
        finite = np.isfinite(g.sum())
        zero = g.dtype.type(0)
        # chunks of images, as in MaxPool, so the kh·kw strided writes of a chunk stay in cache
        nc = chunk(n, c * hp * wp * g.itemsize)
        for n0 in range(0, n, nc):
            gc, ic = g[n0:n0 + nc], idx[n0:n0 + nc]
            buf = (am.empty if tiled else am.zeros)((len(gc), c, hp, wp), g.dtype) if padded else out[n0:n0 + nc]
            for o, (_, _, rows, cols) in enumerate(win.offsets((oh, ow))):
                if finite and disjoint:
                    np.multiply(gc, ic == o, out=buf[:, :, rows, cols])
                    continue
                picked = gc * (ic == o) if finite else am.where(ic == o, gc, zero)
                if disjoint:
                    buf[:, :, rows, cols] = picked
                else:
                    buf[:, :, rows, cols] += picked
            if padded:
                out[n0:n0 + nc] = buf[:, :, pt:pt + h, pl:pl + w]
        return out

    jvp = Op.linear_jvp  # linear in g

    def backward(self, gz):
        return PoolGather.apply(gz, *self.args)


class PoolGather(Op):
    """z[n, c, i, j] = x at window (i, j)'s entry number idx[n, c, i, j];  dz/dx = PoolScatter(gz), its adjoint."""

    saves_inputs = False

    def forward(self, x, idx, win, hw):
        self.args = (idx, win, hw)
        xp = pad_hw(x, win.p)
        am = backend.array_module(x)
        out = am.zeros(idx.shape, x.dtype)
        for o, (_, _, rows, cols) in enumerate(win.offsets(idx.shape[2:])):
            am.copyto(out, xp[:, :, rows, cols], where=idx == o)
        return out

    jvp = Op.linear_jvp  # linear in x

    def backward(self, gz):
        return PoolScatter.apply(gz, *self.args)


def _plane_indices(idx: np.ndarray, win: Win, hw: tuple) -> np.ndarray:
    """Window entry numbers as PyTorch's indices: flat positions h·W + w in each (unpadded) input plane."""
    kh, kw = win.k
    am = backend.array_module(idx)
    a, b = np.divmod(idx.astype(np.int64), kw)
    oh, ow = idx.shape[2:]
    rows = (am.arange(oh) * win.s[0] - win.p[0][0]).reshape(oh, 1) + a * win.d[0]
    cols = am.arange(ow) * win.s[1] - win.p[1][0] + b * win.d[1]
    return rows * hw[1] + cols


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Maximum over (dilated, strided) kH x kW windows of the input padded with -inf. With return_indices, also
    the int64 index of each maximum as a flat position in its input plane (PyTorch's convention)."""
    x, batched = _as_4d("max_pool2d", tensor_arg(input, "max_pool2d", "input", 1))
    win, _ = _pool_win("max_pool2d", x.shape[2:], kernel_size, stride, padding, dilation, ceil_mode)
    node = _new(MaxPool)
    # the argmax indices are kept when backward, forward AD or the caller needs them
    y = _unbatch(dispatch(node, (x,), (x._data, win, return_indices or needs_indices(x))), batched)
    if return_indices:
        if _capture.ACTIVE is not None:
            _capture.settle(y)  # (ember.lazy: the node has run, so its indices exist)
        return y, _unbatch(make(_plane_indices(node.idx, win, x.shape[2:])), batched)
    return y


# ---------------------------------------------------------------------- average pooling
def _window_sizes(n: int, o: int, k: int, s: int, p: int, include_pad: bool) -> np.ndarray:
    """Per output position along one axis: PyTorch's divisor (window clipped to the padded, or the real, input)."""
    start = np.arange(o) * s - p
    end = np.minimum(start + k, n + p)
    if not include_pad:
        start, end = np.maximum(start, 0), np.minimum(end, n)
    return np.maximum(end - start, 1)  # an empty window sums to 0: any divisor gives PyTorch's 0


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over kH x kW windows: Σ window / divisor, the divisor being divisor_override, or the window's size
    (counting the zero padding when count_include_pad, never the part beyond it that ceil_mode adds)."""
    x, batched = _as_4d("avg_pool2d", tensor_arg(input, "avg_pool2d", "input", 1))
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"avg_pool2d(): needs a floating-point input, got {x.dtype}")
    win, (oh, ow) = _pool_win("avg_pool2d", x.shape[2:], kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None and divisor_override <= 0:
        raise RuntimeError(f"avg_pool2d(): divisor must be not zero, got divisor_override={divisor_override}")
    n, c, h, w = x.shape
    # the window sums: a 1-channel convolution of every plane with a kernel of ones (one GEMM)
    am = backend.array_module(x._data)
    ones = constant(am.ones((1, 1) + win.k, x._data.dtype))
    sums = View.apply(Conv.apply(View.apply(x, (n * c, 1, h, w)), ones, None, win, 1), (n, c, oh, ow))
    if divisor_override is not None:
        y = sums / divisor_override
    else:
        dh = _window_sizes(h, oh, win.k[0], win.s[0], win.p[0][0], count_include_pad)
        dw = _window_sizes(w, ow, win.k[1], win.s[1], win.p[1][0], count_include_pad)
        div = np.multiply.outer(dh, dw)
        y = sums / (int(div[0, 0]) if (div == div[0, 0]).all() else constant(am.asarray(div.astype(x._data.dtype))))
    return _unbatch(y, batched)


# ---------------------------------------------------------------------- adaptive pooling
def _adaptive_size(op: str, output_size, hw: tuple) -> tuple:
    sizes = output_size if isinstance(output_size, (tuple, list)) else (output_size, output_size)
    if len(sizes) != 2:
        raise ValueError(f"{op}(): output_size must be an int or a pair (None keeps the input's size), got "
                         f"{output_size!r}")
    out = tuple(n if o is None else o for o, n in zip(sizes, hw))
    if any(not isinstance(o, (int, np.integer)) or o < 0 for o in out):
        raise ValueError(f"{op}(): output_size must hold non-negative ints (or None), got {output_size!r}")
    return tuple(int(o) for o in out)


def _bins(n: int, o: int) -> tuple:
    """PyTorch's adaptive bins along an axis: bin i covers [⌊i·n/o⌋, ⌈(i+1)·n/o⌉)."""
    i = np.arange(o)
    return (i * n) // o, -((-(i + 1) * n) // o)


def _avg_matrix(n: int, o: int, dtype) -> np.ndarray:
    """(o, n) matrix whose row i averages bin i."""
    start, end = _bins(n, o)
    j = np.arange(n)
    inside = (j >= start[:, None]) & (j < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype)


def adaptive_avg_pool2d(input: Tensor, output_size) -> Tensor:
    """Average over PyTorch's adaptive bins, giving output_size (int, pair, None = input size). Separable: y =
    A_h · x · A_wᵀ with per-axis averaging matrices (two GEMMs); the mean for a (1, 1) output."""
    x = tensor_arg(input, "adaptive_avg_pool2d", "input", 1)
    if x.ndim not in (3, 4) or any(n == 0 for n in x.shape[-2:]):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D input with non-zero spatial sizes, but got "
                           f"input of size {list(x.shape)}")
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"adaptive_avg_pool2d(): needs a floating-point input, got {x.dtype}")
    (h, w), dtype = x.shape[-2:], x._data.dtype
    oh, ow = _adaptive_size("adaptive_avg_pool2d", output_size, (h, w))
    if (oh, ow) == (1, 1):
        return x.mean((-2, -1), keepdim=True)
    am = backend.array_module(x._data)  # the small averaging matrices are built on the host, then moved
    return matmul(constant(am.asarray(_avg_matrix(h, oh, dtype))), matmul(x, constant(am.asarray(_avg_matrix(w, ow, dtype).T.copy()))))


def adaptive_max_pool2d(input: Tensor, output_size, return_indices: bool = False):
    """Maximum over PyTorch's adaptive bins; with return_indices also the flat in-plane int64 indices."""
    x, batched = _as_4d("adaptive_max_pool2d", tensor_arg(input, "adaptive_max_pool2d", "input", 1))
    n, c, h, w = x.shape
    oh, ow = _adaptive_size("adaptive_max_pool2d", output_size, (h, w))
    if oh == 0 or ow == 0:
        raise RuntimeError(f"adaptive_max_pool2d(): output_size must be positive, got {(oh, ow)}")
    # every bin padded to the longest by repeating its last index (a repeat never beats the first maximum)
    idx_h, idx_w = [], []
    for size, o, out in ((h, oh, idx_h), (w, ow, idx_w)):
        start, end = _bins(size, o)
        k = int((end - start).max())
        out.append(np.minimum(start[:, None] + np.arange(k), end[:, None] - 1))  # (o, k)
    am = backend.array_module(x._data)  # the bin indices are built on the host, then moved
    ih, iw = am.asarray(idx_h[0]), am.asarray(idx_w[0])
    g = x._data[:, :, ih[:, :, None, None], iw[None, None, :, :]]  # (N, C, OH, KH, OW, KW)
    code = am.empty((n, c, oh, ow), index_dtype(ih.shape[1] * iw.shape[1]))
    argmax_scan([g[:, :, :, a, :, b] for a in range(ih.shape[1]) for b in range(iw.shape[1])], True,
                 am.empty(code.shape, g.dtype), code)
    a, b = np.divmod(code.astype(np.int64), iw.shape[1])
    plane = ih[am.arange(oh)[:, None], a] * w + iw[am.arange(ow), b]  # flat in-plane index of each maximum
    glob = plane + (am.arange(n * c) * (h * w)).reshape(n, c, 1, 1)
    y = _unbatch(Take.apply(x, index=glob), batched)
    if return_indices:
        return y, _unbatch(make(plane), batched)
    return y
