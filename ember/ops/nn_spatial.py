"""The spatial ops beyond 2-D: 1-D and 3-D pooling (max, average, adaptive, power-average), max unpooling,
fractional max pooling, 3-D (transposed) convolution, and the pixel/channel shuffles.

Pooling works on the last nd axes of (N, C, *spatial) (an unbatched (C, *spatial) input gets a batch of one):

- Max pooling is two ops. `WindowMax` finds each window's maximum, or its flat position in the input
  plane (PyTorch's `indices`), with one vectorised pass per kernel offset over strided views of the input
  padded with the lowest value (never a loop over windows); it has no derivative. The differentiable
  maximum is `PlaneGather(x, index)`, whose adjoint `PlaneScatter` adds the gradient back at the indices
  (and max_unpool is `PlaneAssign`, which writes values at given indices). Adaptive and fractional max
  pooling are the same ops over windows given by per-axis position tables instead of a stride.
- Average pooling is separable: a window sum along each pooled axis (`WindowSum`, k strided adds; its
  adjoint `WindowSumT` adds the gradient back over the same windows), divided by the window sizes.
  Adaptive average pooling is a product with a per-axis averaging matrix.

The 1-D max pool runs nn_pool's 2-D kernel on a height-1 image. 3-D convolution is im2col + GEMM as the
2-D one in nn_conv: three ops, each the adjoint of the others (`Conv3`, `Conv3T`, `Conv3W`).
"""
from __future__ import annotations

import itertools
import math
from typing import NamedTuple

import numpy as np

from .. import _capture, backend
from .. import _dtype as dt
from .._tensor import Tensor, constant, make
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from .nn_args import ntuple, tensor_arg
from .nn_conv import conv_inputs, conv_win
from .nn_pool import MaxPool, needs_indices, _plane_indices, _window_sizes, _bins, argmax_scan, index_dtype, _lowest
from .shape import View
from .windows import Win, chunk, strided

_new = object.__new__

__all__ = ["avg_pool1d", "avg_pool3d", "max_pool1d", "max_pool1d_with_indices", "max_pool2d_with_indices", "max_pool3d",
           "max_pool3d_with_indices", "adaptive_avg_pool1d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "adaptive_max_pool3d",
           "adaptive_max_pool3d_with_indices", "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_unpool1d", "max_unpool2d",
           "max_unpool3d", "fractional_max_pool2d", "fractional_max_pool2d_with_indices", "conv3d", "conv_transpose3d",
           "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle"]


# ---------------------------------------------------------------------- geometry
class Geom(NamedTuple):
    """Sliding windows over the last nd axes: per axis the kernel size, stride, dilation and (before, after)
    padding (the after padding includes what ceil_mode's partial last window needs), and the output size."""

    k: tuple
    s: tuple
    d: tuple
    p: tuple
    out: tuple

    def slices(self):
        """For each kernel offset (row-major): per axis the slice of the padded input its window entries read."""
        per_axis = [[slice(a * d, a * d + (o - 1) * s + 1, s) for a in range(k)]
                    for k, s, d, o in zip(self.k, self.s, self.d, self.out)]
        return itertools.product(*per_axis)


def pool_geom(op: str, sizes: tuple, kernel_size, stride, padding, dilation, ceil_mode: bool) -> Geom:
    """The checked window geometry of pooling `op` over spatial `sizes`, with PyTorch's output size
    ⌊(n + 2p - d·(k-1) - 1 + (ceil_mode ? s-1 : 0)) / s⌋ + 1 (less one when ceil_mode's last window would
    start in the right padding)."""
    nd = len(sizes)
    k = ntuple(kernel_size, nd, op, "kernel_size")
    no_stride = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if no_stride else ntuple(stride, nd, op, "stride")
    p = ntuple(padding, nd, op, "padding")
    d = ntuple(dilation, nd, op, "dilation")
    for name, v in (("kernel_size", k), ("stride", s), ("dilation", d)):
        if any(e <= 0 for e in v):
            raise RuntimeError(f"{op}(): {name} must be greater than zero, but got {name}={list(v)}")
    eff = tuple(dd * (kk - 1) + 1 for kk, dd in zip(k, d))
    if any(v < 0 or v > e // 2 for v, e in zip(p, eff)):
        raise RuntimeError(f"{op}(): pad should be at most half of effective kernel size, but got padding={list(p)}, "
                           f"kernel_size={list(k)} and dilation={list(d)}")
    out, pads = [], []
    for n, e, ss, pp in zip(sizes, eff, s, p):
        num = n + 2 * pp - e
        o = (-(-num // ss) if ceil_mode else num // ss) + 1
        if ceil_mode and (o - 1) * ss >= n + pp:
            o -= 1
        out.append(o)
        pads.append((pp, pp + max(0, (o - 1) * ss + e - (n + 2 * pp))))
    if any(o < 1 for o in out):
        raise RuntimeError(f"{op}(): Given input size {list(sizes)}, kernel_size={list(k)}, stride={list(s)}, "
                           f"padding={list(p)}, dilation={list(d)}: calculated output size {out} is too small")
    return Geom(k, s, d, tuple(pads), tuple(out))


def batched(op: str, x: Tensor, nd: int) -> tuple:
    """(x as (N, C, *spatial), whether x was batched): x must be (C, *spatial) or (N, C, *spatial) with nd spatial
    axes and non-zero channel and spatial sizes (N may be 0), and not bool."""
    if x.ndim not in (nd + 1, nd + 2) or any(v == 0 for v in x.shape[-nd - 1:]):
        raise RuntimeError(f"{op}(): Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input with non-zero channel "
                           f"and spatial sizes, but got input of size: {list(x.shape)}")
    if x._data.dtype == np.bool_:
        raise NotImplementedError(f"{op}(): not implemented for bool input; convert it with .float()")
    return (x, True) if x.ndim == nd + 2 else (View.apply(x, (1,) + tuple(x.shape)), False)


def unbatch(t: Tensor, was_batched: bool) -> Tensor:
    return t if was_batched else View.apply(t, tuple(t.shape[1:]))


def _float_only(op: str, x: Tensor) -> None:
    """PyTorch implements `op` for floating-point inputs only."""
    if not dt.is_float(x._data.dtype):
        raise NotImplementedError(f"{op}(): not implemented for {x.dtype} input; convert it with .float()")


def _pad_last(x: np.ndarray, pads: tuple, value) -> np.ndarray:
    """x with its last len(pads) axes padded by pads = ((before, after), ...) with `value` (x itself if all 0)."""
    if not any(a or b for a, b in pads):
        return x
    nd = len(pads)
    lead = x.shape[:x.ndim - nd]
    shape = lead + tuple(n + a + b for n, (a, b) in zip(x.shape[x.ndim - nd:], pads))
    am = backend.array_module(x)
    out = am.zeros(shape, x.dtype) if value == 0 else am.full(shape, value, x.dtype)
    out[(Ellipsis,) + tuple(slice(a, a + n) for n, (a, _) in zip(x.shape[x.ndim - nd:], pads))] = x
    return out


# ---------------------------------------------------------------------- window maxima and their positions
def _argmax(views: list, out_shape: tuple, dtype, need_idx: bool, am) -> tuple:
    """(maxima, row-major kernel entry number of each maximum or None) of equally shaped views."""
    y = am.empty(out_shape, dtype)
    code = am.empty(out_shape, index_dtype(len(views))) if need_idx else None
    argmax_scan(views, need_idx, y, code)
    return y, code


def _strided_max(x: np.ndarray, g: Geom, need_idx: bool) -> np.ndarray:
    """The maxima over the windows of g or, with need_idx, their int64 flat in-plane positions; a chunk of images
    at a time, so that the passes over a chunk read it from cache."""
    n, c, sp = x.shape[0], x.shape[1], x.shape[2:]
    am = backend.array_module(x)
    y = am.empty((n, c) + g.out, x.dtype)
    code = am.empty(y.shape, index_dtype(math.prod(g.k))) if need_idx else None
    low = _lowest(x.dtype)
    nc = chunk(n, c * math.prod(sp) * x.itemsize)
    for n0 in range(0, n, nc):
        xp = _pad_last(x[n0:n0 + nc], g.p, low)
        argmax_scan([xp[(Ellipsis,) + sl] for sl in g.slices()], need_idx, y[n0:n0 + nc],
                    None if code is None else code[n0:n0 + nc])
    if not need_idx:
        return y
    # flat position = the window's first entry (from its output position) + the picked entry's offset (a table
    # lookup by kernel entry number): two passes instead of unravelling the entry number per axis
    strides = [math.prod(sp[j + 1:]) for j in range(len(sp))]
    base = 0
    for j, (s, (p0, _), o, st) in enumerate(zip(g.s, g.p, g.out, strides)):
        base = base + ((am.arange(o) * s - p0) * st).reshape((o,) + (1,) * (len(sp) - 1 - j))
    offsets = am.asarray([sum(a * d * st for a, d, st in zip(combo, g.d, strides))
                          for combo in itertools.product(*map(range, g.k))])
    if any(p0 for p0, _ in g.p) and bool((y == low).any()):
        return _first_real_positions(code, g, sp, am)
    flat = am.take(offsets, code)
    flat += base
    return flat


def _first_real_positions(code, g: Geom, sp: tuple, am):
    """The flat positions of entry numbers `code`, where a window whose real entries all hold the lowest value
    (tied with its padding, the first entry picked) reports its first real entry, as PyTorch: per axis, a
    position p in the left padding becomes p mod d."""
    flat = 0
    for j, (a, (s, d, (p0, _), o, size)) in enumerate(zip(am.unravel_index(code, g.k),
                                                          zip(g.s, g.d, g.p, g.out, sp))):
        pos = (am.arange(o) * s - p0).reshape((o,) + (1,) * (len(sp) - 1 - j)) + a * d
        flat = flat * size + am.maximum(pos, am.mod(pos, d))
    return flat


def _table_max(x: np.ndarray, tables: tuple, need_idx: bool) -> np.ndarray:
    """The maxima over windows given by per-axis position tables P_j (N or 1, C or 1, o_j, k_j) (every entry a
    valid position; a shorter window repeats its last one) or, with need_idx, their int64 flat in-plane positions."""
    n, c, sp = x.shape[0], x.shape[1], x.shape[2:]
    nd = len(sp)
    am = backend.array_module(x)
    flat = 0
    for j, t in enumerate(tables):  # flat positions of every entry, (N', C', o1, k1, ..., o_nd, k_nd)
        flat = flat * sp[j] + t.reshape(t.shape[:2] + (1, 1) * j + t.shape[2:] + (1, 1) * (nd - 1 - j))
    ok = tuple(t.shape[2] for t in tables)
    ks = tuple(t.shape[3] for t in tables)
    if 0 in ok:
        return am.empty((n, c) + ok, x.dtype if not need_idx else np.int64)
    entries = am.take_along_axis(x.reshape(n, c, -1), flat.reshape(flat.shape[:2] + (-1,)), axis=2)
    entries = entries.reshape((n, c) + flat.shape[2:])
    views = [entries[(slice(None), slice(None)) + sum(((slice(None), a) for a in combo), ())]
             for combo in itertools.product(*(range(k) for k in ks))]
    y, code = _argmax(views, (n, c) + ok, x.dtype, need_idx, am)
    if not need_idx:
        return y
    # the flat positions in (N', C', o1, ..., o_nd, k1·...·k_nd) order, then the one each code picks
    perm = (0, 1) + tuple(range(2, 2 + 2 * nd, 2)) + tuple(range(3, 3 + 2 * nd, 2))
    by_window = flat.transpose(perm).reshape(flat.shape[:2] + ok + (-1,))
    return am.take_along_axis(by_window, code.astype(np.int64)[..., None], axis=-1)[..., 0]


class WindowMax(Op):
    """The maximum of each pooling window of x (N, C, *spatial) (what='values'), or its int64 flat position in the
    input plane (what='index': PyTorch's indices; the first maximum, or the last NaN). Windows: a `Geom` (strided
    windows of the input padded with the lowest value) or per-axis position tables (adaptive, fractional).
    No derivative: applied with grad mode off (`_window_max`); the differentiable maximum is PlaneGather(x, index)."""

    saves_inputs = False

    def forward(self, x, windows, what, samples=None):
        need_idx = what == "index"
        if isinstance(windows, Geom):
            return _strided_max(x, windows, need_idx)
        if samples is not None:  # fractional pooling: windows = ("fractional", sizes, out, k)
            return _table_max(x, _fractional_tables(samples, *windows[1:]), need_idx)
        am = backend.array_module(x)
        return _table_max(x, tuple(am.asarray(t) for t in windows), need_idx)

    def jvp(self, t, x, windows, what, samples=None):
        """The index has no tangent; the maxima's is x' at the argmax (`_max_by_windows` takes PlaneGather itself
        when x carries a tangent, so this is for completeness)."""
        if what == "index" or not isinstance(t[0], Tensor):
            return None
        args = (x, windows, "index") if samples is None else (x, windows, "index", samples)
        return PlaneGather.apply(t[0], _window_max(*args))

    def backward(self, gz):
        raise RuntimeError("WindowMax: an index has no derivative")  # never recorded (applied with grad mode off)


def _window_max(x: Tensor, windows, what: str, samples: Tensor | None = None) -> Tensor:
    prev = MODE.grad
    MODE.grad = False
    try:
        return WindowMax.apply(x, windows, what) if samples is None else WindowMax.apply(x, windows, what, samples)
    finally:
        MODE.grad = prev


class PlaneGather(Op):
    """z[n, c, *o] = x[n, c] at the flat in-plane position idx[n, c, *o] (x: (N, C, *spatial); idx (N, C or 1, *o),
    one set of positions for every channel when 1);  dz/dx = PlaneScatter(gz, idx), its adjoint."""

    def forward(self, x, idx):
        n, c = x.shape[:2]
        am = backend.array_module(x)
        # one take of globally numbered positions (plane (n, c) starts at (n·C + c)·P): ~1.7x faster than
        # take_along_axis, which builds an index array per axis
        p = math.prod(x.shape[2:])
        start = (am.arange(n)[:, None] * c + am.arange(c)) * p
        glob = idx.reshape(n, idx.shape[1], -1) + start[:, :, None]
        return am.take(x.reshape(-1), glob).reshape((n, c) + idx.shape[2:])

    jvp = Op.linear_jvp  # linear in x

    def backward(self, gz, x, idx):
        return PlaneScatter.apply(gz, idx, tuple(x.shape[2:]), False), None


class PlaneGatherUnique(PlaneGather):
    """PlaneGather whose indices never repeat within a plane (max pooling over disjoint windows): its adjoint
    writes instead of adding."""

    def backward(self, gz, x, idx):
        return PlaneScatter.apply(gz, idx, tuple(x.shape[2:]), True), None


class PlaneScatter(Op):
    """z = zeros (N, C, *spatial) with g[n, c, *o] added at the flat in-plane position idx[n, c, *o] (idx (N, C or 1,
    *o); `unique`: no position repeats within a plane, so a write does);  dz/dg = PlaneGather(gz, idx), its adjoint."""

    def forward(self, g, idx, spatial, unique):
        n, c = g.shape[:2]
        p = math.prod(spatial)
        am = backend.array_module(g)
        idx = am.broadcast_to(idx.reshape(n, idx.shape[1], -1), (n, c, math.prod(g.shape[2:])))
        glob = (idx + (am.arange(n * c) * p).reshape(n, c, 1)).reshape(-1)  # positions numbered across planes
        if unique:  # one write per position (~2x faster than put_along_axis)
            out = am.zeros(n * c * p, g.dtype)
            out[glob] = g.reshape(-1)
        elif dt.is_float(g.dtype):  # one bincount: ~10x faster than add.at
            out = am.bincount(glob, weights=g.reshape(-1), minlength=n * c * p).astype(g.dtype, copy=False)
        else:
            out = am.zeros(n * c * p, g.dtype)
            am.add.at(out, glob, g.reshape(-1))
        return out.reshape((n, c) + tuple(spatial))

    jvp = Op.linear_jvp  # linear in g

    def backward(self, gz, g, idx, spatial, unique):
        return PlaneGather.apply(gz, idx), None, None, None


class PlaneAssign(Op):
    """z = zeros (N, C, *spatial) with x[n, c, *i] written at the flat in-plane position idx[n, c, *i] (a repeated
    position keeps one of the values written there, as PyTorch's max_unpool); dz/dx = PlaneGather(gz, idx)."""

    def forward(self, x, idx, spatial, op):
        n, c = x.shape[:2]
        p = math.prod(spatial)
        am = backend.array_module(x)
        flat = idx.reshape(n, c, -1)
        if flat.size:
            lo, hi = int(flat.min()), int(flat.max())
            if lo < 0 or hi >= p:
                raise RuntimeError(f"{op}(): Found an invalid max index: {lo if lo < 0 else hi} (output volumes are of "
                                   f"size {'x'.join(map(str, spatial))}); indices must lie in [0, {p})")
        out = am.zeros((n, c, p), x.dtype)
        am.put_along_axis(out, flat, x.reshape(n, c, -1), axis=2)
        return out.reshape((n, c) + tuple(spatial))

    jvp = Op.linear_jvp  # linear in x

    def backward(self, gz, x, idx, spatial, op):
        return PlaneGather.apply(gz, idx), None, None, None


# ---------------------------------------------------------------------- window sums (average pooling)
def _axis_slice(ndim: int, axis: int, sl: slice) -> tuple:
    return (slice(None),) * axis + (sl,) + (slice(None),) * (ndim - axis - 1)


class WindowSum(Op):
    """z[.., i, ..] = Σ_{a<k} x_pad[.., i·s + a, ..] along `axis`, x zero-padded by pads = (before, after) there;
    dz/dx = WindowSumT(gz), its adjoint."""

    saves_inputs = False

    def forward(self, x, axis, k, s, pads):
        n = x.shape[axis]
        self.args = (axis, k, s, pads, n)
        o = (n + pads[0] + pads[1] - k) // s + 1
        am = backend.array_module(x)
        if pads[0] or pads[1]:
            xp = am.zeros(x.shape[:axis] + (n + pads[0] + pads[1],) + x.shape[axis + 1:], x.dtype)
            xp[_axis_slice(x.ndim, axis, slice(pads[0], pads[0] + n))] = x
        else:
            xp = x
        out = xp[_axis_slice(x.ndim, axis, slice(0, (o - 1) * s + 1, s))].copy()
        for a in range(1, k):
            out += xp[_axis_slice(x.ndim, axis, slice(a, a + (o - 1) * s + 1, s))]
        return out

    jvp = Op.linear_jvp  # linear in x

    def backward(self, gz):
        return WindowSumT.apply(gz, *self.args)


class WindowSumT(Op):
    """z = the adjoint of WindowSum applied to g: g[.., i, ..] added to each of window i's k positions along `axis`
    (an input of length n);  dz/dg = WindowSum(gz)."""

    saves_inputs = False

    def forward(self, g, axis, k, s, pads, n):
        self.args = (axis, k, s, pads)
        o = g.shape[axis]
        am = backend.array_module(g)
        if s == k and pads == (0, 0) and o * k == n:  # windows that tile the axis: each entry of g repeated k times
            return am.repeat(g, k, axis=axis)
        buf = am.zeros(g.shape[:axis] + (n + pads[0] + pads[1],) + g.shape[axis + 1:], g.dtype)
        for a in range(k):
            buf[_axis_slice(g.ndim, axis, slice(a, a + (o - 1) * s + 1, s))] += g
        if buf.shape[axis] == n:
            return buf
        return buf[_axis_slice(g.ndim, axis, slice(pads[0], pads[0] + n))].copy()

    jvp = Op.linear_jvp  # linear in g

    def backward(self, gz):
        return WindowSum.apply(gz, *self.args)


# ---------------------------------------------------------------------- average pooling
def _avg_pool(op: str, nd: int, input, kernel_size, stride, padding, ceil_mode: bool, count_include_pad: bool,
              divisor_override) -> Tensor:
    """Σ window / divisor over (N, C, *spatial) windows (separable window sums), the divisor being divisor_override
    or the window's size (counting the zero padding when count_include_pad, never what ceil_mode adds beyond it).
    Integer inputs divide with truncation, as PyTorch."""
    x, was_batched = batched(op, tensor_arg(input, op, "input", 1), nd)
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError(f"{op}(): divisor must be not zero, got divisor_override={divisor_override}")
    sizes = tuple(x.shape[2:])
    g = pool_geom(op, sizes, kernel_size, stride, padding, 1, ceil_mode)
    sums = x
    for j in reversed(range(nd)):  # the last axis first: each pass shrinks what the next one reads
        if (g.k[j], g.s[j], g.p[j]) != (1, 1, (0, 0)):
            sums = WindowSum.apply(sums, 2 + j, g.k[j], g.s[j], g.p[j])
    if divisor_override is not None:
        div = divisor_override
    else:
        per_axis = [_window_sizes(n, o, k, s, p0, count_include_pad)
                    for n, o, k, s, (p0, _) in zip(sizes, g.out, g.k, g.s, g.p)]
        full = per_axis[0]
        for v in per_axis[1:]:
            full = np.multiply.outer(full, v)
        uniform = bool((full == full.flat[0]).all())
        div = int(full.flat[0]) if uniform else None
        if div is None:
            am = backend.array_module(x._data)
            full_t = constant(am.asarray(full.astype(x._data.dtype if dt.is_float(x._data.dtype) else np.int64)))
    if dt.is_float(x._data.dtype):
        y = sums / (div if div is not None else full_t)
    else:  # PyTorch's integer average: the sum divided with truncation
        y = sums.div(div if div is not None else full_t, rounding_mode="trunc")
    return unbatch(y, was_batched)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """Mean over windows of length kernel_size of (N, C, L) or (C, L): y[.., i] = Σ_a x_pad[.., i·s + a] / divisor
    (the window's size, counting the zero padding when count_include_pad)."""
    return _avg_pool("avg_pool1d", 1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


def avg_pool3d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """Mean over kT x kH x kW windows of (N, C, D, H, W) or (C, D, H, W): Σ window / divisor, the divisor being
    divisor_override or the window's size (counting the zero padding when count_include_pad)."""
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)


# ---------------------------------------------------------------------- max pooling
def _disjoint(g: Geom) -> bool:
    """Whether no two windows share an input position (so max indices never repeat within a plane)."""
    return all(s >= d * (k - 1) + 1 for k, s, d in zip(g.k, g.s, g.d))


def _max_by_windows(x: Tensor, windows, return_indices: bool, unique: bool, samples: Tensor | None = None):
    """max over `windows` of x (N, C, *spatial): the values, differentiable through PlaneGather at the argmax
    indices, and the indices when asked. `unique`: no two windows share a position."""
    differentiable = needs_indices(x)
    if not (return_indices or differentiable):
        return _window_max(x, windows, "values", samples), None
    idx = _window_max(x, windows, "index", samples)
    if differentiable:
        y = (PlaneGatherUnique if unique else PlaneGather).apply(x, idx)
    else:
        y = _window_max(x, windows, "values", samples)
    return y, (idx if return_indices else None)


def max_pool3d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Maximum over (dilated, strided) kT x kH x kW windows of (N, C, D, H, W) or (C, D, H, W), padded with -inf.
    With return_indices, also the int64 index of each maximum as a flat position d·H·W + h·W + w in its input volume."""
    x, was_batched = batched("max_pool3d", tensor_arg(input, "max_pool3d", "input", 1), 3)
    g = pool_geom("max_pool3d", tuple(x.shape[2:]), kernel_size, stride, padding, dilation, ceil_mode)
    y, idx = _max_by_windows(x, g, return_indices, _disjoint(g))
    if return_indices:
        return unbatch(y, was_batched), unbatch(idx, was_batched)
    return unbatch(y, was_batched)


def max_pool3d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple:
    """max_pool3d giving (values, indices) whatever return_indices says (PyTorch's boolean-dispatch sibling)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
               return_indices: bool = False):
    """Maximum over (dilated, strided) windows of length kernel_size of (N, C, L) or (C, L), padded with -inf
    (nn_pool's 2-D kernel on a height-1 image). With return_indices, also the int64 position of each maximum."""
    x, was_batched = batched("max_pool1d", tensor_arg(input, "max_pool1d", "input", 1), 1)
    n, c, length = x.shape
    g = pool_geom("max_pool1d", (length,), kernel_size, stride, padding, dilation, ceil_mode)
    win = Win((1,) + g.k, (1,) + g.s, (1,) + g.d, ((0, 0),) + g.p)
    x2 = View.apply(x, (n, c, 1, length))
    node = _new(MaxPool)
    y = dispatch(node, (x2,), (x2._data, win, return_indices or needs_indices(x2)))
    y = unbatch(View.apply(y, (n, c, g.out[0])), was_batched)
    if return_indices:
        if _capture.ACTIVE is not None:
            _capture.settle(y)  # (ember.lazy: the node has run, so its indices exist)
        idx = make(_plane_indices(node.idx, win, (1, length)).reshape(n, c, g.out[0]))
        return y, unbatch(idx, was_batched)
    return y


def max_pool1d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple:
    """max_pool1d giving (values, indices) whatever return_indices says."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple:
    """max_pool2d giving (values, indices) whatever return_indices says."""
    from .nn_pool import max_pool2d
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


# ---------------------------------------------------------------------- adaptive pooling
def adaptive_sizes(op: str, output_size, sizes: tuple, allow_none: bool = True) -> tuple:
    """output_size (an int, or a sequence of len(sizes) ints; None keeps that input size) as a tuple of ints."""
    nd = len(sizes)
    seq = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * nd
    if len(seq) != nd:
        raise RuntimeError(f"{op}(): output_size must be an int or a sequence of {nd} ints, got {output_size!r}")
    out = []
    for o, n in zip(seq, sizes):
        if o is None and allow_none:
            out.append(n)
            continue
        if isinstance(o, bool) or not hasattr(o, "__index__"):
            raise TypeError(f"{op}(): argument 'output_size' must be an int or a tuple of ints, got {output_size!r}")
        out.append(int(o.__index__()))
    if any(o < 0 for o in out):
        raise RuntimeError(f"{op}(): elements of output_size must be greater than or equal to 0, but got "
                           f"output_size={out}")
    return tuple(out)


def _avg_matrix(n: int, o: int, dtype) -> np.ndarray:
    """(o, n) matrix whose row i averages PyTorch's adaptive bin i, [⌊i·n/o⌋, ⌈(i+1)·n/o⌉)."""
    start, end = _bins(n, o)
    j = np.arange(n)
    inside = (j >= start[:, None]) & (j < end[:, None])
    return (inside / np.maximum(end - start, 1)[:, None]).astype(dtype)


def _adaptive_avg(op: str, nd: int, input, output_size) -> Tensor:
    """Average over PyTorch's adaptive bins, separably: a product with an (o, n) averaging matrix along each axis."""
    x = tensor_arg(input, op, "input", 1)
    if x.ndim not in (nd + 1, nd + 2) or any(v == 0 for v in x.shape[-nd - 1:]):
        raise RuntimeError(f"{op}(): Expected {nd + 1}D or {nd + 2}D input with non-zero channel and spatial sizes, "
                           f"but got input of size {list(x.shape)}")
    _float_only(op, x)
    sizes = tuple(x.shape[-nd:])
    out = adaptive_sizes(op, output_size, sizes, allow_none=nd > 1)
    if out == (1,) * nd:
        return x.mean(tuple(range(-nd, 0)), keepdim=True)
    am = backend.array_module(x._data)
    dtype = x._data.dtype
    y = x
    for j in range(nd):
        n, o = sizes[j], out[j]
        if n == o:
            continue
        m = constant(am.asarray(_avg_matrix(n, o, dtype)))
        ax = x.ndim - nd + j
        lead, rest = tuple(y.shape[:ax]), tuple(y.shape[ax + 1:])
        if not rest:  # the last axis: (…, n) @ Mᵀ
            y = View.apply(View.apply(y, (math.prod(lead), n)).matmul(m.transpose(0, 1)), lead + (o,))
        else:  # M @ (…, n, rest)
            y = View.apply(m.matmul(View.apply(y, (math.prod(lead), n, math.prod(rest)))), lead + (o,) + rest)
    return y


def adaptive_avg_pool1d(input: Tensor, output_size) -> Tensor:
    """Average over PyTorch's adaptive bins of (N, C, L) or (C, L): bin i covers [⌊i·L/o⌋, ⌈(i+1)·L/o⌉)."""
    return _adaptive_avg("adaptive_avg_pool1d", 1, input, output_size)


def adaptive_avg_pool3d(input: Tensor, output_size) -> Tensor:
    """Average over PyTorch's adaptive bins of (N, C, D, H, W) or (C, D, H, W), giving output_size (an int or a
    triple; None keeps that input size)."""
    return _adaptive_avg("adaptive_avg_pool3d", 3, input, output_size)


def _bin_table(n: int, o: int) -> np.ndarray:
    """(1, 1, o, k) positions of the adaptive bins along an axis, k the longest bin; shorter bins repeat their last
    position (a repeat never beats the first maximum)."""
    start, end = _bins(n, o)
    k = int((end - start).max()) if o else 1
    return np.minimum(start[:, None] + np.arange(k), end[:, None] - 1).reshape(1, 1, o, k)


def _adaptive_max(op: str, nd: int, input, output_size, return_indices: bool):
    x, was_batched = batched(op, tensor_arg(input, op, "input", 1), nd)
    _float_only(op, x)
    sizes = tuple(x.shape[2:])
    out = adaptive_sizes(op, output_size, sizes, allow_none=nd > 1)
    y, idx = _max_by_windows(x, tuple(_bin_table(n, o) for n, o in zip(sizes, out)), return_indices, False)
    if return_indices:
        return unbatch(y, was_batched), unbatch(idx, was_batched)
    return unbatch(y, was_batched)


def adaptive_max_pool1d(input: Tensor, output_size, return_indices: bool = False):
    """Maximum over PyTorch's adaptive bins of (N, C, L) or (C, L); with return_indices also the int64 positions."""
    return _adaptive_max("adaptive_max_pool1d", 1, input, output_size, return_indices)


def adaptive_max_pool3d(input: Tensor, output_size, return_indices: bool = False):
    """Maximum over PyTorch's adaptive bins of (N, C, D, H, W) or (C, D, H, W); with return_indices also the int64
    flat positions d·H·W + h·W + w of the maxima in their input volume."""
    return _adaptive_max("adaptive_max_pool3d", 3, input, output_size, return_indices)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False) -> tuple:
    """adaptive_max_pool1d giving (values, indices) whatever return_indices says."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False) -> tuple:
    """adaptive_max_pool2d giving (values, indices) whatever return_indices says."""
    from .nn_pool import adaptive_max_pool2d
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False) -> tuple:
    """adaptive_max_pool3d giving (values, indices) whatever return_indices says."""
    return adaptive_max_pool3d(input, output_size, True)


# ---------------------------------------------------------------------- power-average pooling
def _lp_pool(op: str, nd: int, input, norm_type, kernel_size, stride, ceil_mode: bool) -> Tensor:
    """(Σ_window x^p)^(1/p), as PyTorch computes it: avg_pool(x^p) (no padding) times the window size, with the
    sign of the sum kept on its absolute value (sign(s)·relu(|s|)) before the 1/p-th power."""
    from .nn_activation import relu
    x = tensor_arg(input, op, "input", 1)
    k = ntuple(kernel_size, nd, op, "kernel_size")
    s = _avg_pool(op, nd, x.pow(norm_type), kernel_size, stride, 0, ceil_mode, True, None)
    return (s.sign() * relu(s.abs())).mul(math.prod(k)).pow(1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: int, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over windows of length kernel_size: (Σ_window x^p)^(1/p), p = norm_type (p = ∞ is max
    pooling, p = 1 sum pooling)."""
    return _lp_pool("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over kH x kW windows: (Σ_window x^p)^(1/p), p = norm_type."""
    return _lp_pool("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> Tensor:
    """Power-average pooling over kT x kH x kW windows: (Σ_window x^p)^(1/p), p = norm_type."""
    return _lp_pool("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode)


# ---------------------------------------------------------------------- max unpooling
def _unpool(op: str, nd: int, input, indices, kernel_size, stride, padding, output_size) -> Tensor:
    """The partial inverse of max pooling: zeros of the output size with input[n, c, *i] written at the flat
    position indices[n, c, *i] of its plane. Default output size (in - 1)·s - 2p + k per axis; output_size (nd
    sizes, or N, C and them) may pick any size within a stride of it."""
    x = tensor_arg(input, op, "input", 1)
    idx = tensor_arg(indices, op, "indices", 2)
    if x.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}(): Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input, but got input of "
                           f"size {list(x.shape)}")
    if idx._data.dtype != np.int64:
        raise RuntimeError(f"{op}(): elements in indices should be type int64 but got: {idx.dtype}")
    if idx.shape != x.shape:
        raise RuntimeError(f"{op}(): Expected shape of indices to be same as that of the input tensor "
                           f"({list(x.shape)}) but got indices tensor with shape: {list(idx.shape)}")
    _float_only(op, x)
    k = ntuple(kernel_size, nd, op, "kernel_size")
    s = k if stride is None else ntuple(stride, nd, op, "stride")
    p = ntuple(padding, nd, op, "padding")
    default = tuple((n - 1) * ss - 2 * pp + kk for n, ss, pp, kk in zip(x.shape[-nd:], s, p, k))
    if output_size is None:
        out = default
    else:
        seq = tuple(int(v) for v in output_size)
        if len(seq) == nd + 2 or (len(seq) == nd + 1 and x.ndim == nd + 1):
            seq = seq[-nd:]
        if len(seq) != nd:
            raise ValueError(f"{op}(): output_size should be a sequence containing {nd} or {nd + 2} elements, but it "
                             f"has a length of '{len(seq)}'")
        for j, (o, dflt, ss) in enumerate(zip(seq, default, s)):
            if not dflt - ss < o < dflt + ss:
                raise ValueError(f"{op}(): invalid output_size {list(seq)} (dim {j} must be between {dflt - ss} and "
                                 f"{dflt + ss}, exclusive)")
        out = seq
    xb, was_batched = (x, True) if x.ndim == nd + 2 else (View.apply(x, (1,) + tuple(x.shape)), False)
    ib = idx if was_batched else View.apply(idx, (1,) + tuple(idx.shape))
    return unbatch(PlaneAssign.apply(xb, ib, out, op), was_batched)


def max_unpool1d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of max_pool1d: zeros with each input value put back at its index (N, C, L) or (C, L)."""
    return _unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of max_pool2d: zeros with each input value put back at its flat index h·W + w."""
    return _unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None) -> Tensor:
    """The partial inverse of max_pool3d: zeros with each input value put back at its flat index d·H·W + h·W + w."""
    return _unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)


# ---------------------------------------------------------------------- fractional max pooling
def _fractional_starts(u, n: int, o: int, k: int):
    """PyTorch's pseudo-random window starts along an axis of length n for samples u in [0, 1) (any shape):
    start_i = ⌊(i + u)·α⌋ - ⌊u·α⌋ with α = (n - k)/(o - 1), in u's float type, and the last window at n - k."""
    ft = u.dtype.type
    alpha = ft(n - k) / ft(o - 1) if o > 1 else ft(0)
    i = backend.array_module(u).arange(o, dtype=u.dtype)
    starts = ((i + u[..., None]) * alpha).astype(np.int64) - (u[..., None] * alpha).astype(np.int64)
    starts[..., -1] = n - k
    return starts


def fractional_max_pool2d(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                          return_indices: bool = False, _random_samples: Tensor | None = None):
    """Fractional max pooling (Graham, 2014): kH x kW windows at pseudo-random, non-uniformly spaced starts chosen
    to give output_size (or ⌊input size · output_ratio⌋), one draw per (image, channel) from _random_samples
    (N, C, 2) in [0, 1) (width then height; drawn uniformly when None). With return_indices, also the int64 flat
    positions h·W + w of the maxima."""
    op = "fractional_max_pool2d"
    x, was_batched = batched(op, tensor_arg(input, op, "input", 1), 2)
    _float_only(op, x)
    if output_size is None and output_ratio is None:
        raise ValueError("fractional_max_pool2d requires specifying either an output_size or an output_ratio")
    k = ntuple(kernel_size, 2, op, "kernel_size")
    if any(v <= 0 for v in k):
        raise RuntimeError(f"{op}(): kernel_size must be greater than zero, but got {list(k)}")
    n, c, h, w = x.shape
    if output_size is None:
        ratio = tuple(output_ratio) if isinstance(output_ratio, (tuple, list)) else (output_ratio, output_ratio)
        out = (int(h * ratio[0]), int(w * ratio[1]))
    else:
        out = ntuple(output_size, 2, op, "output_size")
    for name, o, kk, size in (("height", out[0], k[0], h), ("width", out[1], k[1], w)):
        if o <= 0 or o + kk - 1 > size:
            raise RuntimeError(f"{op}(): pool {name} {kk} too large relative to input {name} {size} and output "
                               f"{name} {o} (needs output {name} + kernel {name} - 1 <= input {name})")
    if _random_samples is None:
        from .._creation import rand
        samples = rand(n, c, 2, dtype=x.dtype, device=x.device)
    else:
        samples = tensor_arg(_random_samples, op, "_random_samples", 6)
        if samples.ndim != 3 or samples.shape[0] < n or samples.shape[1] != c or samples.shape[2] != 2:
            raise RuntimeError(f"{op}(): Expect _random_samples of shape (N, C, 2) = ({n}, {c}, 2) (at least N rows), "
                               f"got {list(samples.shape)}")
        if samples._data.dtype != x._data.dtype:
            raise RuntimeError(f"{op}(): Expect _random_samples to have the same dtype as input ({x.dtype}), got "
                               f"{samples.dtype}")
        if samples.shape[0] > n:  # (PyTorch reads the first N rows)
            samples = samples[:n]
    y, idx = _max_by_windows(x, ("fractional", (h, w), out, k), return_indices, False, samples)
    if return_indices:
        return unbatch(y, was_batched), unbatch(idx, was_batched)
    return unbatch(y, was_batched)


def _fractional_tables(samples, sizes: tuple, out: tuple, k: tuple) -> tuple:
    """Per-axis window position tables (N, C, o, k) of fractional max pooling from the samples (N, C, 2)
    (samples[..., 0] is the width's, samples[..., 1] the height's)."""
    am = backend.array_module(samples)
    n = samples.shape[0]
    return tuple(_fractional_starts(samples[:, :, 1 - j], size, o, kk)[..., None] + am.arange(kk)
                 for j, (size, o, kk) in enumerate(zip(sizes, out, k)))


def fractional_max_pool2d_with_indices(input: Tensor, kernel_size, output_size=None, output_ratio=None,
                                       return_indices: bool = False, _random_samples: Tensor | None = None) -> tuple:
    """fractional_max_pool2d giving (values, indices) whatever return_indices says."""
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True, _random_samples)


# ---------------------------------------------------------------------- 3-D convolution
def _im2col3(x, g: Geom):
    """Yield (n0, n1, columns) chunk by chunk over the images of x (N, C, D, H, W): the (m, C·kd·kh·kw, L) window
    entries of images n0:n1 (rows in (c, a, b, e) order, L = OD·OH·OW), built into one reused buffer."""
    n, c = x.shape[:2]
    k, length = c * math.prod(g.k), math.prod(g.out)
    nc = chunk(n, k * length * x.itemsize)
    am = backend.array_module(x)
    buf = am.empty((min(nc, n), k, length), x.dtype)
    for n0 in range(0, n, nc):
        n1 = min(n0 + nc, n)
        xp = _pad_last(x[n0:n1], g.p, 0)
        st = xp.strides
        v = strided(xp, (n1 - n0, c) + g.k + g.out, st[:2] + tuple(t * d for t, d in zip(st[2:], g.d))
                    + tuple(t * s for t, s in zip(st[2:], g.s)))
        part = buf[:n1 - n0]
        part.reshape(v.shape)[...] = v
        yield n0, n1, part


def _conv3(x, w, b, g: Geom, groups: int):
    """y = conv3(x, w) + b: per chunk of images and group one (O/G, K/G) @ (K/G, L) GEMM."""
    n, o = x.shape[0], w.shape[0]
    kg, length = w[0].size, math.prod(g.out)
    am = backend.array_module(x)
    out = am.empty((n, o, length), np.result_type(x.dtype, w.dtype))
    wm = w.reshape(groups, o // groups, kg)
    for n0, n1, part in _im2col3(x, g):
        m = n1 - n0
        np.matmul(wm, part.reshape(m, groups, kg, length), out=out[n0:n1].reshape(m, groups, o // groups, length))
    if b is not None:
        out += b.reshape(1, o, 1)
    return out.reshape((n, o) + g.out)


def _conv3_t(gr, w, g: Geom, groups: int, sizes: tuple):
    """The adjoint of x ↦ conv3(x, w) applied to gr (N, O, *g.out): per chunk, the columns Wᵀ·gr, each kernel
    offset's entries added back to the strided slice of the padded input they came from (col2im)."""
    n, o = gr.shape[:2]
    cg = w.shape[1]
    c, kg, length = cg * groups, w[0].size, math.prod(g.out)
    am = backend.array_module(gr)
    wt = w.reshape(groups, o // groups, kg).transpose(0, 2, 1)
    padded = tuple(v + a + b for v, (a, b) in zip(sizes, g.p))
    crop = (Ellipsis,) + tuple(slice(a, a + v) for v, (a, _) in zip(sizes, g.p))
    out = am.empty((n, c) + tuple(sizes), np.result_type(gr.dtype, w.dtype))
    nc = chunk(n, c * math.prod(g.k) * length * gr.itemsize)
    offsets = list(zip(itertools.product(*map(range, g.k)), g.slices()))
    for n0 in range(0, n, nc):
        n1 = min(n0 + nc, n)
        m = n1 - n0
        cols = np.matmul(wt, gr[n0:n1].reshape(m, groups, o // groups, length)).reshape((m, c) + g.k + g.out)
        buf = am.zeros((m, c) + padded, out.dtype)
        for off, sl in offsets:
            buf[(Ellipsis,) + sl] += cols[(slice(None), slice(None)) + off]
        out[n0:n1] = buf[crop]
    return out


def _conv3_w(x, gr, g: Geom, groups: int, wshape: tuple):
    """dw = Σ_n gr[n] · im2col(x)[n]ᵀ per group: the adjoint of w ↦ conv3(x, w) applied to gr."""
    n, o = gr.shape[:2]
    kg, length = math.prod(wshape[1:]), math.prod(g.out)
    gm = gr.reshape(n, groups, o // groups, length)
    dwt = backend.array_module(gr).zeros((groups, kg, o // groups), np.result_type(x.dtype, gr.dtype))
    for n0, n1, part in _im2col3(x, g):
        # dwᵀ = cols · grᵀ: OpenBLAS's gr · colsᵀ (a long shared dimension in the transposed operand) measured
        # 8 ms against 300 ms (and up to 2 s) here for the same product, on 2 threads of a busy machine
        dwt += np.matmul(part.reshape(n1 - n0, groups, kg, length), gm[n0:n1].transpose(0, 1, 3, 2)).sum(0)
    return dwt.transpose(0, 2, 1).reshape(wshape)


def _over(g: Geom, t) -> Geom:
    """g limited to the windows that t's spatial shape holds (with output_padding, fewer than the input has)."""
    return g._replace(out=tuple(t.shape[2:]))


class Conv3(Op):
    """z = conv3(x, w) + b (cross-correlation over D, H, W);  dz/dx = Conv3T(gz, w), dz/dw = Conv3W(x, gz),
    dz/db = Σ gz over (N, D, H, W)."""

    def forward(self, x, w, b, g, groups):
        return _conv3(x, w, b, g, groups)

    def jvp(self, t, x, w, b, g, groups):
        """z' = conv3(x', w) + conv3(x, w') + b' (bilinear in x and w)."""
        tx, tw, tb = t[:3]
        z = Conv3.apply(tx, w, None, g, groups) if isinstance(tx, Tensor) else 0
        if isinstance(tw, Tensor):
            z = z + Conv3.apply(x, tw, None, g, groups)
        return z + View.apply(tb, (1, tb.shape[0], 1, 1, 1)) if isinstance(tb, Tensor) else z

    def backward(self, gz, x, w, b, g, groups):
        gx = Conv3T.apply(gz, w, g, groups, tuple(x.shape[2:])) if self.needs(0) else None
        gw = Conv3W.apply(x, gz, g, groups, tuple(w.shape)) if self.needs(1) else None
        gb = gz.sum((0, 2, 3, 4)) if b is not None and self.needs(2) else None
        return gx, gw, gb, None, None


class Conv3T(Op):
    """z = conv3ᵀ(gr, w), the adjoint of x ↦ conv3(x, w) (x of spatial size `sizes`);  since ⟨gz, conv3ᵀ(gr, w)⟩ =
    ⟨conv3(gz, w), gr⟩: dz/dgr = Conv3(gz, w) over gr's windows, dz/dw = Conv3W(gz, gr)."""

    def forward(self, gr, w, g, groups, sizes):
        return _conv3_t(gr, w, _over(g, gr), groups, sizes)

    def jvp(self, t, gr, w, g, groups, sizes):
        """z' = conv3ᵀ(gr', w) + conv3ᵀ(gr, w') (bilinear in gr and w)."""
        tg, tw = t[:2]
        z = Conv3T.apply(tg, w, g, groups, sizes) if isinstance(tg, Tensor) else 0
        return z + Conv3T.apply(gr, tw, g, groups, sizes) if isinstance(tw, Tensor) else z

    def backward(self, gz, gr, w, g, groups, sizes):
        gg = Conv3.apply(gz, w, None, _over(g, gr), groups) if self.needs(0) else None
        gw = Conv3W.apply(gz, gr, g, groups, tuple(w.shape)) if self.needs(1) else None
        return gg, gw, None, None, None


class Conv3W(Op):
    """z = ∂⟨gr, conv3(x, w)⟩/∂w (w-shaped, bilinear in x and gr);  dz/dx = Conv3T(gr, gz), dz/dgr = Conv3(x, gz)
    over gr's windows."""

    def forward(self, x, gr, g, groups, wshape):
        return _conv3_w(x, gr, _over(g, gr), groups, wshape)

    def jvp(self, t, x, gr, g, groups, wshape):
        """z' = dw(x', gr) + dw(x, gr') (bilinear in x and gr)."""
        tx, tg = t[:2]
        z = Conv3W.apply(tx, gr, g, groups, wshape) if isinstance(tx, Tensor) else 0
        return z + Conv3W.apply(x, tg, g, groups, wshape) if isinstance(tg, Tensor) else z

    def backward(self, gz, x, gr, g, groups, wshape):
        gx = Conv3T.apply(gr, gz, g, groups, tuple(x.shape[2:])) if self.needs(0) else None
        gg = Conv3.apply(x, gz, None, _over(g, gr), groups) if self.needs(1) else None
        return gx, gg, None, None, None


def _weight_5d(op: str, weight, transposed: bool) -> None:
    w = tensor_arg(weight, op, "weight", 2)
    if w.ndim != 5:
        channels = "in_channels, out_channels/groups" if transposed else "out_channels, in_channels/groups"
        raise RuntimeError(f"{op}(): expected a 5-D weight ({channels}, kT, kH, kW), got weight of size "
                           f"{list(w.shape)}")


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """3-D cross-correlation: out[n, o] = b[o] + Σ_c,a,b,e w[o, c, a, b, e] · x_pad[n, g(o)·C/G + c, i·s + a·d, ...].

    input (N, C, D, H, W) or (C, D, H, W); weight (O, C/groups, kT, kH, kW); padding an int, a triple, 'valid' or
    'same' (an odd total padding puts the extra slice at the end)."""
    _weight_5d("conv3d", weight, False)
    x, w, was_batched, x5, groups = conv_inputs("conv3d", 3, input, weight, bias, groups, False)
    win = conv_win("conv3d", tuple(x.shape[-3:]), tuple(w.shape[2:]), stride, padding, dilation)
    k, s, d, p = (t[1:] for t in win)  # conv_win's windows for nd = 3 carry a leading unit axis (its 1-D form)
    out = tuple((n + a + b - dd * (kk - 1) - 1) // ss + 1 for n, kk, ss, dd, (a, b) in zip(x.shape[-3:], k, s, d, p))
    y = Conv3.apply(x5, w, bias, Geom(k, s, d, p, out), groups)
    return y if was_batched else View.apply(y, tuple(y.shape[1:]))


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """3-D transposed convolution (the gradient of conv3d with respect to its input), weight
    (C_in, C_out/groups, kT, kH, kW); output size (n-1)·s - 2p + d·(k-1) + output_padding + 1 per axis."""
    op = "conv_transpose3d"
    _weight_5d(op, weight, True)
    x, w, was_batched, x5, groups = conv_inputs(op, 3, input, weight, bias, groups, True)
    if isinstance(padding, str):
        raise RuntimeError(f"{op}(): padding must be an int or a tuple of 3 ints for transposed convolutions, "
                           f"got {padding!r}")
    k = tuple(w.shape[2:])
    s, p, d, op_ = (ntuple(v, 3, op, name) for v, name in ((stride, "stride"), (padding, "padding"),
                                                            (dilation, "dilation"), (output_padding, "output_padding")))
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}(): non-positive stride is not supported (got stride={list(s)})")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{op}(): dilation should be greater than zero, but got {list(d)}")
    if any(v < 0 for v in p + op_):
        raise RuntimeError(f"{op}(): negative padding is not supported (got padding={list(p)}, "
                           f"output_padding={list(op_)})")
    if any(o >= ss and o >= dd for o, ss, dd in zip(op_, s, d)):
        raise RuntimeError(f"{op}(): output padding must be smaller than either stride or dilation, but got "
                           f"output_padding={list(op_)}, stride={list(s)}, dilation={list(d)}")
    sizes = tuple((n - 1) * ss - 2 * pp + dd * (kk - 1) + o + 1
                  for n, ss, pp, dd, kk, o in zip(x.shape[-3:], s, p, d, k, op_))
    if any(v < 0 for v in sizes):
        raise RuntimeError(f"{op}(): Given input size {list(x.shape)}, the calculated output size {list(sizes)} is "
                           f"too small (reduce padding or increase stride/output_padding)")
    g = Geom(k, s, d, tuple((v, v) for v in p), tuple(x.shape[-3:]))
    y = Conv3T.apply(x5, w, g, groups, sizes)
    if bias is not None:
        y = y + View.apply(bias, (1, bias.shape[0], 1, 1, 1))
    return y if was_batched else View.apply(y, tuple(y.shape[1:]))


# ---------------------------------------------------------------------- pixel and channel shuffles
def _positive_int(op: str, v, name: str, pos: int) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}(): argument '{name}' (position {pos}) must be int, not {type(v).__name__}")
    v = int(v.__index__())
    if v <= 0:
        raise RuntimeError(f"{op}(): expects a positive {name}, but got {name}={v}")
    return v


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """Rearrange (*, C·r², H, W) into (*, C, H·r, W·r): out[.., c, h·r + i, w·r + j] = in[.., c·r² + i·r + j, h, w]."""
    op = "pixel_shuffle"
    x = tensor_arg(input, op, "input", 1)
    r = _positive_int(op, upscale_factor, "upscale_factor", 2)
    if x.ndim < 3:
        raise RuntimeError(f"{op}(): expects input to have at least 3 dimensions, but got input with {x.ndim} "
                           f"dimension(s)")
    c, h, w = x.shape[-3:]
    if c % (r * r):
        raise RuntimeError(f"{op}(): expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    lead = tuple(x.shape[:-3])
    b = len(lead)
    y = x.reshape(lead + (c // (r * r), r, r, h, w)).permute(*range(b), b, b + 3, b + 1, b + 4, b + 2)
    return y.reshape(lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """Rearrange (*, C, H·r, W·r) into (*, C·r², H, W), the inverse of pixel_shuffle."""
    op = "pixel_unshuffle"
    x = tensor_arg(input, op, "input", 1)
    r = _positive_int(op, downscale_factor, "downscale_factor", 2)
    if x.ndim < 3:
        raise RuntimeError(f"{op}(): expects input to have at least 3 dimensions, but got input with {x.ndim} "
                           f"dimension(s)")
    c, h, w = x.shape[-3:]
    for name, v, ax in (("height", h, -2), ("width", w, -1)):
        if v % r:
            raise RuntimeError(f"{op}(): expects {name} to be divisible by downscale_factor, but "
                               f"input.size({ax})={v} is not divisible by {r}")
    lead = tuple(x.shape[:-3])
    b = len(lead)
    y = x.reshape(lead + (c, h // r, r, w // r, r)).permute(*range(b), b, b + 2, b + 4, b + 1, b + 3)
    return y.reshape(lead + (c * r * r, h // r, w // r))


def channel_shuffle(input: Tensor, groups: int) -> Tensor:
    """Interleave the channels (dim 1) of (N, C, *) across `groups` groups: out[:, j·G + g] = in[:, g·(C/G) + j]."""
    op = "channel_shuffle"
    x = tensor_arg(input, op, "input", 1)
    if isinstance(groups, bool) or not hasattr(groups, "__index__"):
        raise TypeError(f"{op}(): argument 'groups' (position 2) must be int, not {type(groups).__name__}")
    g = int(groups.__index__())
    if x.ndim <= 2:
        raise RuntimeError(f"{op}(): expects input with > 2 dims, but got input with sizes {list(x.shape)}")
    if g <= 0:
        raise RuntimeError(f"{op}(): Number of groups to divide channels in must be positive. Value of groups:{g}")
    n, c = x.shape[:2]
    if c % g:
        raise RuntimeError(f"{op}(): Number of channels must be divisible by groups. Got {c} channels and {g} groups.")
    rest = tuple(x.shape[2:])
    return x.reshape((n, g, c // g) + rest).transpose(1, 2).reshape((n, c) + rest)


native_channel_shuffle = channel_shuffle
