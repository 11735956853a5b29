"""Convolution, transposed convolution, unfold/fold (im2col/col2im), padding and interpolation.

A convolution is a matrix product over a strided window view of the padded input
(`im2col`): each image's windows, copied into a (C·kh·kw, OH·OW) matrix, times the weight
reshaped to (O, C·kh·kw) — one GEMM per image, built and multiplied in chunks of images that
stay in cache. Its two derivatives close a set of three ops, each the adjoint of the others,
so every derivative of every order is again one of them:

    Conv(x, w)            y  = W · im2col(x)
    ConvTranspose(g, w)   dx = col2im(Wᵀ · g)        (= ∂⟨g, conv(x, w)⟩/∂x; also the public conv_transpose)
    ConvWeightGrad(x, g)  dw = g · im2col(x)ᵀ       (= ∂⟨g, conv(x, w)⟩/∂w)

1-D convolutions are the 2-D ones on a height-1 image. All work on float32 stays float32.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import backend
from .._tensor import Tensor, make
from ..autograd.function import Op
from ..autograd.grad_mode import MODE
from .arithmetic import ones_vector
from .indexing import IndexSelect
from .shape import View, broadcast_to

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "unfold", "fold", "pad", "interpolate"]


# ---------------------------------------------------------------------- window geometry
class Win(NamedTuple):
    """Sliding windows over the last two axes: kernel (kh, kw), stride, dilation, and padding
    ((top, bottom), (left, right)) — asymmetric, for padding='same' with even kernels and ceil_mode pooling."""

    k: tuple
    s: tuple
    d: tuple
    p: tuple

    def out(self, hw: tuple) -> tuple:
        """Output size (OH, OW) for an input of spatial size hw: ⌊(n + pads - d·(k-1) - 1)/s⌋ + 1."""
        return tuple((n + p0 + p1 - d * (k - 1) - 1) // s + 1
                     for n, k, s, d, (p0, p1) in zip(hw, self.k, self.s, self.d, self.p))

    def offsets(self, ohw: tuple):
        """For each kernel offset (a, b): a, b and the slices of the padded input that its window entries read."""
        (kh, kw), (sh, sw), (dh, dw), (oh, ow) = self.k, self.s, self.d, ohw
        for a in range(kh):
            rows = slice(a * dh, a * dh + (oh - 1) * sh + 1, sh)
            for b in range(kw):
                yield a, b, rows, slice(b * dw, b * dw + (ow - 1) * sw + 1, sw)


def pad_hw(x: np.ndarray, p: tuple, value=0) -> np.ndarray:
    """x with its last two axes padded by p = ((top, bottom), (left, right)) with `value` (x itself when p is all 0)."""
    (pt, pb), (pl, pr) = p
    if not (pt or pb or pl or pr):
        return x
    h, w = x.shape[-2:]
    shape = x.shape[:-2] + (h + pt + pb, w + pl + pr)
    m = backend.array_module(x)
    out = m.zeros(shape, x.dtype) if value == 0 else m.full(shape, value, x.dtype)
    out[..., pt:pt + h, pl:pl + w] = x
    return out


def strided(x, shape: tuple, strides: tuple):
    """A view of x with the given shape and strides: read-only on the CPU (a guard against writes through
    overlapping windows); CuPy's as_strided has no `writeable` flag."""
    if x.__class__ is np.ndarray:
        return as_strided(x, shape, strides, writeable=False)
    return backend.array_module(x).lib.stride_tricks.as_strided(x, shape, strides)


def windows(xp: np.ndarray, win: Win, ohw: tuple) -> np.ndarray:
    """Read-only (N, C, OH, OW, kh, kw) view of the windows of the padded (N, C, Hp, Wp) array xp."""
    sn, sc, sh, sw = xp.strides
    return strided(xp, xp.shape[:2] + tuple(ohw) + tuple(win.k),
                   (sn, sc, sh * win.s[0], sw * win.s[1], sh * win.d[0], sw * win.d[1]))


# Bytes of im2col columns built per chunk of images: each chunk is multiplied while still in cache
# (one thread: W3's conv2 forward 4.6 -> 3.8 ms at batch 128, 45.6 -> 31.5 ms at batch 1000, where
# whole-batch columns would take 113 MB), and the per-image products write (N, O, OH·OW) directly.
_CHUNK_BYTES = 2 << 20


def _chunk(n: int, per_image: int) -> int:
    """Images per chunk when each needs `per_image` bytes of columns."""
    return max(1, min(n, _CHUNK_BYTES // max(per_image, 1)))


def _wide_rows(x_shape: tuple, win: Win, ohw: tuple, o: int) -> bool:
    """Whether a convolution builds its im2col columns with "wide" rows.

    The columns of an image are normally (K, OH·OW), K = C·kh·kw in (c, a, b) order: im2col copies
    K·OH runs of OW elements. With stride 1, the entries that kernel offset (a, b) reads are one
    contiguous run of the flat padded plane if each output row is computed over the padded width Wp
    (the last Wp - OW columns garbage, cropped after the GEMM): K runs of OH·Wp. That pays where the
    K column rows outweigh the O output rows and the garbage costs at most a quarter more GEMM work.
    Measured, one thread, batch 128: W3's conv2 input gradient (K = 18·O) 5.4 -> 4.3 ms; its forward
    (K = 4.5·O) within 3%; conv1 (K < O) 0.9 -> 1.4 ms. (A channel-last copy of the input, copying runs
    of kw·C, measured within 5% of the better of the two on W3's conv2 and was left out.)"""
    c, w = x_shape[1], x_shape[3]
    wp = w + win.p[1][0] + win.p[1][1]
    return win.s == (1, 1) and wp > ohw[1] and 4 * (wp - ohw[1]) <= ohw[1] and c * win.k[0] * win.k[1] >= 8 * o


def _cols_chunks(x, win: Win, ohw: tuple, cols=None, fill=None, wide: bool = False, ones: bool = False):
    """Yield (n0, n1, columns of images n0:n1): an (m, K, OH·OW) array, K = C·kh·kw in (c, a, b) order,
    or (m, K, OH·Wp) with `wide` rows (see _wide_rows); whole rows are copied at a time (the
    (OH·OW, K) order is ~5x slower). With `ones`, a row of ones follows the K rows (for the bias).
    `cols`: the whole batch's columns, already built, yielded in slices; else they are built chunk by
    chunk, into `fill` (an (N, K (+1), OH·OW) array, to keep, its row of ones already set) or into one
    reused chunk buffer, from each chunk padded into a reused zero-bordered buffer."""
    n = x.shape[0]
    if cols is not None:
        nc = _chunk(n, cols[:1].nbytes)
        for n0 in range(0, n, nc):
            yield n0, min(n0 + nc, n), cols[n0:n0 + nc]
        return
    c, h, w = x.shape[1:]
    (kh, kw), (oh, ow), (sh_, sw_), (dh, dw) = win.k, ohw, win.s, win.d
    (pt, pb), (pl, pr) = win.p
    if wide:
        pb += 1  # one more zero row: the last offsets' runs reach dw·(kw-1) entries past the plane
    hp, wp = h + pt + pb, w + pl + pr
    k = c * kh * kw
    rw = wp if wide else ow
    nc = _chunk(n, k * oh * rw * x.itemsize)
    am = backend.array_module(x)
    if fill is None:
        buf = am.empty((nc, k + ones, oh * rw), x.dtype)
        buf[:, k:] = 1
    else:
        buf = fill
    xpad = am.zeros((min(nc, n), c, hp, wp), x.dtype)
    for n0 in range(0, n, nc):
        n1 = min(n0 + nc, n)
        m = n1 - n0
        xp = xpad[:m]
        xp[:, :, pt:pt + h, pl:pl + w] = x[n0:n1]
        sn, sc, sh, sw = xp.strides
        if wide:
            v = strided(xp, (m, c, kh, kw, oh * wp), (sn, sc, sh * dh, sw * dw, sw))
        else:
            v = strided(xp, (m, c, kh, kw, oh, ow), (sn, sc, sh * dh, sw * dw, sh * sh_, sw * sw_))
        part = buf[:m] if fill is None else fill[n0:n1]
        if am is np:
            np.copyto(np.reshape(part[:, :k], v.shape, copy=False), v)  # copy=False: a view, or an error
        else:  # part[:, :k] is contiguous in its last axis: its reshape is a view
            part[:, :k].reshape(v.shape)[...] = v
        yield n0, n1, part


def _conv(x, w, b, win: Win, groups: int, keep: bool = False, ohw: tuple | None = None):
    """y = conv(x, w) + b, chunk by chunk over the images: per image and group one (O, K) @ (K, OH·RW)
    GEMM (RW = OW, or Wp with wide rows) into the (N, O, OH, OW) result; `ohw` limits (OH, OW) to the
    first windows. With one group the bias is a column of the weight times a row of ones in the
    columns (no pass of its own over the output: W3's conv1 ~0.2 ms). Returns (y, the whole batch's
    (N, K (+1), OH·OW) columns if `keep` else None)."""
    n, c, hw = x.shape[0], x.shape[1], x.shape[2:]
    o = w.shape[0]
    oh, ow = ohw or win.out(hw)
    k = c * win.k[0] * win.k[1]
    wide = not keep and _wide_rows(x.shape, win, (oh, ow), o)  # dw's GEMMs want the plain columns
    rw = hw[1] + win.p[1][0] + win.p[1][1] if wide else ow
    am = backend.array_module(x)
    out = am.empty((n, o, oh, ow), np.result_type(x.dtype, w.dtype))
    fold = b is not None and groups == 1
    if fold:
        wm = am.concatenate((w.reshape(1, o, k), b.reshape(1, o, 1)), axis=2)
    else:
        wm = w.reshape(groups, o // groups, k // groups)
    cols = None
    if keep:
        cols = am.empty((n, k + fold, oh * ow), x.dtype)
        cols[:, k:] = 1
    rows = None  # with wide rows, the GEMM's (m, O, OH, Wp) result, whose first OW columns go to out
    for n0, n1, part in _cols_chunks(x, win, (oh, ow), fill=cols, wide=wide, ones=fold):
        m, y = n1 - n0, out[n0:n1]
        if wide:
            if rows is None:
                rows = am.empty((len(part), o, oh, rw), out.dtype)
            y = rows[:m]
        if groups == 1:
            np.matmul(wm[0], part, out=y.reshape(m, o, oh * rw))
        else:
            np.matmul(wm, part.reshape(m, groups, k // groups, oh * rw), out=y.reshape(m, groups, o // groups, oh * rw))
        if b is not None and not fold:  # while the chunk is in cache
            np.add(y[..., :ow], b.reshape(o, 1, 1), out=out[n0:n1])
        elif wide:
            out[n0:n1] = y[..., :ow]
    return out, cols


def _flipped_transpose(w, groups: int):
    """The kernel of the adjoint convolution: wt[g·C/G + c, o, a, b] = w[g·O/G + o, c, kh-1-a, kw-1-b]."""
    o, cg, kh, kw = w.shape
    wt = w.reshape(groups, o // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    return backend.array_module(w).ascontiguousarray(wt).reshape(groups * cg, o // groups, kh, kw)


def _conv_transpose(g, w, win: Win, groups: int, hw: tuple):
    """The adjoint of conv(·, w) applied to g (N, O, OH, OW): an (N, C, H, W) array.

    Stride 1 (when the padding is at most the kernel's extent): the convolution of g, zero-padded
    by d·(k-1) - p, with the flipped and transposed kernel — an im2col gather and GEMMs like the
    forward (one thread, W3's conv2 input gradient: 5.8 -> 4.3 ms). Otherwise one (C/G, O/G) @ (O/G, N·OH·OW)
    product per kernel offset, added into the strided slice of a padded buffer that the offset's
    window entries came from: col2im without the (C·kh·kw, N·OH·OW) column matrix."""
    n, o, oh, ow = g.shape
    cg, kh, kw = w.shape[1:]
    c = cg * groups
    h, wd = hw
    (pt, pb), (pl, pr) = win.p
    if win.s == (1, 1):
        ext_h, ext_w = win.d[0] * (kh - 1), win.d[1] * (kw - 1)
        full = ((ext_h - pt, h - oh + pt), (ext_w - pl, wd - ow + pl))
        if min(full[0] + full[1]) >= 0:
            return _conv(g, _flipped_transpose(w, groups), None, Win(win.k, win.s, win.d, full), groups)[0]
    am = backend.array_module(g)
    gm = _channels_first(g, groups)
    wt = w.reshape(groups, o // groups, cg, kh, kw)
    buf = am.zeros((c, n, h + pt + pb, wd + pl + pr), g.dtype)
    part = am.empty((groups, cg, gm.shape[2]), g.dtype)  # reused: one allocation instead of kh·kw
    for a, b, rows, cols in win.offsets((oh, ow)):
        np.matmul(wt[:, :, :, a, b].transpose(0, 2, 1), gm, out=part)
        buf[:, :, rows, cols] += part.reshape(c, n, oh, ow)
    return am.ascontiguousarray(buf[:, :, pt:pt + h, pl:pl + wd].transpose(1, 0, 2, 3))


def _channels_first(g: np.ndarray, groups: int) -> np.ndarray:
    """(N, O, OH, OW) as a (groups, O/groups, N·OH·OW) matrix per group."""
    n, o, oh, ow = g.shape
    return backend.array_module(g).ascontiguousarray(g.reshape(n, o, oh * ow).transpose(1, 0, 2)).reshape(
        groups, o // groups, n * oh * ow)


def _conv_weight_grad(x, g, win: Win, groups: int, wshape: tuple, cols=None):
    """dw = Σ_n g[n] · im2col(x)[n]ᵀ per group (the adjoint of conv(x, ·) applied to g), chunk by chunk,
    over the forward's kept columns `cols` when given."""
    n, o, oh, ow = g.shape
    k = wshape[1] * wshape[2] * wshape[3]
    gm = g.reshape(n, groups, o // groups, oh * ow)
    dw = backend.array_module(g).zeros((groups, o // groups, k), np.result_type(x.dtype, g.dtype))
    for n0, n1, part in _cols_chunks(x, win, (oh, ow), cols):
        cm = part[:, :k * groups].reshape(n1 - n0, groups, k, oh * ow)  # without the forward's row of ones
        dw += np.matmul(gm[n0:n1], cm.transpose(0, 1, 3, 2)).sum(0)
    return dw.reshape(wshape)


# ---------------------------------------------------------------------- the three convolution ops
class Conv(Op):
    """z = conv(x, w) + b (cross-correlation, as PyTorch), over the first `ohw` windows when given;
    dz/dx: ConvTranspose(gz, w), dz/dw: ConvWeightGrad(x, gz), dz/db: Σ gz over (N, OH, OW)."""

    def forward(self, x, w, b, win, groups, keep_cols=False, ohw=None):
        out, cols = _conv(x, w, b, win, groups, keep_cols, ohw)
        if keep_cols:  # im2col(x), for dw: recomputing it would cost about as much as dw's GEMM
            self.cols = cols
        return out

    def backward(self, gz, x, w, b, win, groups):
        cols = self.__dict__.pop("cols", None)  # used once: a second backward (retain_graph) recomputes it
        gx = ConvTranspose.apply(gz, w, win, groups, x.shape[2:]) if self.needs(0) else None
        gw = ConvWeightGrad.apply(x, gz, win, groups, w.shape, cols=cols) if self.needs(1) else None
        gb = ChannelSum.apply(gz) if b is not None and self.needs(2) else None
        return gx, gw, gb, None, None


class ChannelSum(Op):
    """z[o] = Σ_{n,i,j} g[n, o, i, j] (the bias gradient);  dz/dg = gz broadcast over (n, i, j).

    Two matrix-vector products: ~4x faster than NumPy's sum over axes (0, 2, 3)."""

    saves_inputs = False

    def forward(self, g):
        self.shape = g.shape
        n, o, h, w = g.shape
        if g.__class__ is not np.ndarray:  # the cached ones vector lives on the host
            return g.sum((0, 2, 3))
        rows = g.reshape(n * o, h * w)
        per_image = (rows @ ones_vector(rows.shape[1], g.dtype)).reshape(n, o)
        return ones_vector(n, g.dtype) @ per_image

    def backward(self, gz):
        return broadcast_to(View.apply(gz, (1, self.shape[1], 1, 1)), self.shape)


class ConvTranspose(Op):
    """z = convᵀ(g, w), the adjoint of x ↦ conv(x, w) (an x-shaped result);  dz/dg: Conv(gz, w),
    dz/dw: ConvWeightGrad(gz, g)  (since ⟨gz, convᵀ(g, w)⟩ = ⟨conv(gz, w), g⟩)."""

    def forward(self, g, w, win, groups, hw):
        return _conv_transpose(g, w, win, groups, hw)

    def backward(self, gz, g, w, win, groups, hw):
        # ohw: with output_padding ≥ stride (stride < dilation), gz spans more windows than g has entries
        gg = Conv.apply(gz, w, None, win, groups, ohw=g.shape[2:]) if self.needs(0) else None
        gw = ConvWeightGrad.apply(gz, g, win, groups, w.shape) if self.needs(1) else None
        return gg, gw, None, None, None


class ConvWeightGrad(Op):
    """z = ∂⟨g, conv(x, w)⟩/∂w (a w-shaped result, bilinear in x and g);  with ⟨gz, z⟩ = ⟨g, conv(x, gz)⟩:
    dz/dx: ConvTranspose(g, gz), dz/dg: Conv(x, gz)."""

    def forward(self, x, g, win, groups, wshape, cols=None):
        return _conv_weight_grad(x, g, win, groups, wshape, cols)

    def backward(self, gz, x, g, win, groups, wshape):
        gx = ConvTranspose.apply(g, gz, win, groups, x.shape[2:]) if self.needs(0) else None
        gg = Conv.apply(x, gz, None, win, groups, ohw=g.shape[2:]) if self.needs(1) else None
        return gx, gg, None, None, None


# ---------------------------------------------------------------------- argument checks
def _tensor(v, op: str, name: str, pos: int) -> Tensor:
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


def _batched(x: Tensor, n: int, op: str, what: str = "input") -> bool:
    """Whether x is batched ((N, C, *spatial) with n spatial dims) rather than unbatched (C, *spatial)."""
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) {what} to {op}, but got {what} of size: "
                           f"{list(x.shape)}")
    return x.ndim == n + 2


def _same_dtype(op: str, **named) -> None:
    ref_name, ref = next(iter(named.items()))
    for name, t in named.items():
        if t is not None and t.data.dtype != ref.data.dtype:
            raise RuntimeError(f"{op}(): {ref_name} ({ref.dtype}) and {name} ({t.dtype}) must have the same dtype; "
                               f"convert one with .to(...)")
    if ref.data.dtype.kind not in "fiu":
        raise RuntimeError(f"{op}(): not implemented for {ref.dtype} inputs")


def _conv_checks(op: str, x: Tensor, w: Tensor, b, groups, transposed: bool) -> int:
    """Validate channels, groups, bias and dtypes; returns groups as an int."""
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise RuntimeError(f"{op}(): non-positive groups is not supported (got groups={groups!r})")
    if w.shape[0] % groups:
        raise RuntimeError(f"{op}(): Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
                           f"but got weight of size {list(w.shape)} instead")
    c_in = w.shape[0] if transposed else w.shape[1] * groups
    if x.shape[1] != c_in:
        raise RuntimeError(f"{op}(): Given {'transposed=1, ' if transposed else ''}groups={groups}, weight of size "
                           f"{list(w.shape)}, expected input{list(x.shape)} to have {c_in} channels, but got "
                           f"{x.shape[1]} channels instead")
    if b is not None:
        _tensor(b, op, "bias", 3)
        c_out = w.shape[1] * groups if transposed else w.shape[0]
        if b.shape != (c_out,):
            raise RuntimeError(f"{op}(): Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with "
                               f"{c_out} elements, but got bias of size {list(b.shape)} instead")
    _same_dtype(op, input=x, weight=w, bias=b)
    return groups


def _conv_win(op: str, hw: tuple, k: tuple, stride, padding, dilation) -> Win:
    n = len(k)
    s = ntuple(stride, n, op, "stride")
    d = ntuple(dilation, n, op, "dilation")
    if any(v <= 0 for v in s):
        raise RuntimeError(f"{op}(): non-positive stride is not supported (got stride={list(s)})")
    if any(v <= 0 for v in d):
        raise RuntimeError(f"{op}(): dilation should be greater than zero, but got {list(d)}")
    if isinstance(padding, str):
        if padding == "valid":
            p = ((0, 0),) * n
        elif padding == "same":
            if any(v != 1 for v in s):
                raise RuntimeError(f"{op}(): padding='same' is not supported for strided convolutions (stride={list(s)})")
            # total padding d·(k-1); an odd total puts the extra row/column at the bottom/right, as PyTorch
            p = tuple((dd * (kk - 1) // 2, dd * (kk - 1) - dd * (kk - 1) // 2) for kk, dd in zip(k, d))
        else:
            raise RuntimeError(f"{op}(): Invalid padding string: {padding!r}, should be one of 'valid', 'same', an int "
                               f"or a tuple of {n} ints")
    else:
        pp = ntuple(padding, n, op, "padding")
        if any(v < 0 for v in pp):
            raise RuntimeError(f"{op}(): negative padding is not supported (got padding={list(pp)})")
        p = tuple((v, v) for v in pp)
    padded = tuple(h + p0 + p1 for h, (p0, p1) in zip(hw, p))
    eff = tuple(dd * (kk - 1) + 1 for kk, dd in zip(k, d))
    if any(pd < e for pd, e in zip(padded, eff)):
        raise RuntimeError(f"{op}(): Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
                           f"Kernel size: ({' x '.join(map(str, eff))}). Kernel size can't be greater than actual input "
                           f"size (input {list(hw)}, padding {[list(q) for q in p]}, dilation {list(d)})")
    return Win(k, s, d, p) if n == 2 else Win((1,) + k, (1,) + s, (1,) + d, ((0, 0),) + p)


def _as_2d(t: Tensor, batched: bool, one_d: bool) -> Tensor:
    """(N, C, H, W) view of an unbatched and/or 1-D (length L as 1 x L) input."""
    shape = t.shape if batched else (1,) + tuple(t.shape)
    if one_d:
        shape = shape[:2] + (1,) + shape[2:]
    return t if shape == t.shape else View.apply(t, shape)


def _from_2d(y: Tensor, batched: bool, one_d: bool) -> Tensor:
    shape = y.shape
    if one_d:
        shape = shape[:2] + shape[3:]
    if not batched:
        shape = shape[1:]
    return y if shape == y.shape else View.apply(y, shape)


# ---------------------------------------------------------------------- conv1d / conv2d
def _conv_inputs(op: str, nd: int, input, weight, bias, groups, transposed: bool) -> tuple:
    """Checked (x, w, batched, x as (N, C, H, W), groups) for the nd-D convolution `op`."""
    x = _tensor(input, op, "input", 1)
    w = _tensor(weight, op, "weight", 2)
    if w.ndim != nd + 2:
        channels = "in_channels, out_channels/groups" if transposed else "out_channels, in_channels/groups"
        raise RuntimeError(f"{op}(): expected a {nd + 2}-D weight ({channels}, "
                           f"{', '.join('kH kW'.split()[-nd:])}), got weight of size {list(w.shape)}")
    batched = _batched(x, nd, op)
    x2 = _as_2d(x, batched, nd == 1)
    return x, w, batched, x2, _conv_checks(op, x2, w, bias, groups, transposed)


def _convnd(op: str, nd: int, input, weight, bias, stride, padding, dilation, groups) -> Tensor:
    x, w, batched, x2, groups = _conv_inputs(op, nd, input, weight, bias, groups, False)
    win = _conv_win(op, x.shape[-nd:], tuple(w.shape[2:]), stride, padding, dilation)
    w2 = View.apply(w, w.shape[:2] + (1,) + w.shape[2:]) if nd == 1 else w
    keep = w._requires_grad and MODE.grad
    return _from_2d(Conv.apply(x2, w2, bias, win, groups, keep_cols=keep), batched, nd == 1)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """2-D cross-correlation: out[n, o] = b[o] + Σ_c,a,b w[o, c, a, b] · x_pad[n, g(o)·C/G + c, i·s + a·d, j·s + b·d].

    input (N, C, H, W) or (C, H, W); weight (O, C/groups, kH, kW); padding an int, a pair, 'valid' or
    'same' (even kernels pad the extra row/column at the bottom/right)."""
    return _convnd("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0, dilation=1,
           groups: int = 1) -> Tensor:
    """1-D cross-correlation over (N, C, L) or (C, L) with weight (O, C/groups, k): conv2d on a height-1 image."""
    return _convnd("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


# ---------------------------------------------------------------------- transposed convolution
def _conv_transposend(op: str, nd: int, input, weight, bias, stride, padding, output_padding, groups,
                      dilation) -> Tensor:
    x, w, batched, x2, groups = _conv_inputs(op, nd, input, weight, bias, groups, True)
    if isinstance(padding, str):
        raise RuntimeError(f"{op}(): padding must be an int or a tuple of {nd} ints for transposed convolutions, "
                           f"got {padding!r}")
    k = tuple(w.shape[2:])
    s, p, d = (ntuple(v, nd, op, name) for v, name in ((stride, "stride"), (padding, "padding"), (dilation, "dilation")))
    op_ = ntuple(output_padding, nd, op, "output_padding")
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
    # the result is the input gradient of a convolution whose input has this size
    hw = tuple((n - 1) * ss - 2 * pp + dd * (kk - 1) + o + 1
               for n, ss, pp, dd, kk, o in zip(x.shape[-nd:], s, p, d, k, op_))
    if any(v < 0 for v in hw):  # 0 is an empty result, as in PyTorch
        raise RuntimeError(f"{op}(): Given input size {list(x.shape)}, the calculated output size {list(hw)} is too "
                           f"small (reduce padding or increase stride/output_padding)")
    win = Win(k, s, d, tuple((v, v) for v in p))
    w2 = w
    if nd == 1:
        win = Win((1,) + k, (1,) + s, (1,) + d, ((0, 0),) + win.p)
        hw = (1,) + hw
        w2 = View.apply(w, w.shape[:2] + (1,) + w.shape[2:])
    y = ConvTranspose.apply(x2, w2, win, groups, hw)
    if bias is not None:
        y = y + View.apply(bias, (1, bias.shape[0], 1, 1))
    return _from_2d(y, batched, nd == 1)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """2-D transposed convolution (the gradient of conv2d with respect to its input), weight
    (C_in, C_out/groups, kH, kW); output size (H-1)·s - 2p + d·(k-1) + output_padding + 1."""
    return _conv_transposend("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                             dilation)


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
                     output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """1-D transposed convolution over (N, C_in, L) or (C_in, L); weight (C_in, C_out/groups, k)."""
    return _conv_transposend("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                             dilation)


# ---------------------------------------------------------------------- unfold / fold
class Unfold(Op):
    """z[n, (c, a, b), (i, j)] = x_pad[n, c, i·s + a·d, j·s + b·d] (im2col);  dz/dx = Fold(gz), its adjoint."""

    saves_inputs = False

    def forward(self, x, win, hw):
        self.consts = (win, hw)
        ohw = win.out(hw)
        n, c = x.shape[:2]
        v = windows(pad_hw(x, win.p), win, ohw)  # (N, C, OH, OW, kh, kw)
        return backend.array_module(x).ascontiguousarray(v.transpose(0, 1, 4, 5, 2, 3)).reshape(n, c * win.k[0] * win.k[1], ohw[0] * ohw[1])

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


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding local blocks of (N, C, H, W) (or (C, H, W)) as columns: (N, C·kH·kW, L), L the number of blocks."""
    x = _tensor(input, "unfold", "input", 1)
    win = _fold_args("unfold", kernel_size, dilation, padding, stride)
    if x.ndim not in (3, 4):
        raise RuntimeError(f"unfold(): Input Error: Only 3D or 4D input Tensors are supported (got {x.ndim}D, "
                           f"size {list(x.shape)})")
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
    x = _tensor(input, "fold", "input", 1)
    win = _fold_args("fold", kernel_size, dilation, padding, stride)
    hw = ntuple(output_size, 2, "fold", "output_size")
    if x.ndim not in (2, 3):
        raise RuntimeError(f"fold(): Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                           f"(got {x.ndim}D, size {list(x.shape)})")
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


# ---------------------------------------------------------------------- pad
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
    return i % n  # circular


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last len(pad)/2 dims: pad = (last_before, last_after, 2nd-last_before, ...). mode 'constant'
    (fill `value`, negative pads crop) or 'reflect', 'replicate', 'circular' (of the last 1–3 dims of a
    batched or unbatched input; the gradient sums the copies back onto their source)."""
    x = _tensor(input, "pad", "input", 1)
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
        y = IndexSelect.apply(y, dim=ax, index=backend.array_module(x.data).asarray(_pad_index(n, l, r, mode)))
    return y


# ---------------------------------------------------------------------- interpolate
_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear")


def _source_scale(n_in: int, n_out: int, scale, align_corners: bool, dtype):
    """PyTorch's source-coordinate scale (computed in the input's float type, as its kernels do)."""
    if align_corners:
        return dtype.type((n_in - 1) / (n_out - 1)) if n_out > 1 else dtype.type(0)
    if scale is not None and scale > 0:
        return dtype.type(1.0 / scale)
    return dtype.type(n_in) / dtype.type(n_out)


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial dims of (N, C, L) or (N, C, H, W): mode 'nearest' / 'nearest-exact' (3-D or 4-D),
    'linear' (3-D), 'bilinear' (4-D, separable: linear along H then W). Output size from `size`, or
    ⌊in · scale_factor⌋; source coordinates follow PyTorch (align_corners, scale_factor)."""
    x = _tensor(input, "interpolate", "input", 1)
    if mode not in _INTERP_MODES:
        raise NotImplementedError(f"interpolate(): mode {mode!r} is not supported; expected one of "
                                  f"{', '.join(_INTERP_MODES)}")
    if x.ndim not in (3, 4):
        raise NotImplementedError(f"interpolate(): Only 3D and 4D input tensors (N, C, L) / (N, C, H, W) are supported, "
                                  f"got {x.ndim}D input of size {list(x.shape)}")
    nd = x.ndim - 2
    if mode == "linear" and nd != 1:
        raise NotImplementedError(f"interpolate(): Got {x.ndim}D input, but linear mode needs 3D input")
    if mode == "bilinear" and nd != 2:
        raise NotImplementedError(f"interpolate(): Got {x.ndim}D input, but bilinear mode needs 4D input")
    if antialias:
        raise NotImplementedError("interpolate(): antialias=True is not supported")
    linear = mode in ("linear", "bilinear")
    if align_corners is not None and not linear:
        raise ValueError("interpolate(): align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if x.data.dtype.kind != "f" and linear:
        raise RuntimeError(f"interpolate(): mode {mode!r} needs a floating-point input, got {x.dtype}")
    if (size is None) == (scale_factor is None):
        raise ValueError("interpolate(): " + ("only one of size or scale_factor should be defined" if size is not None
                                              else "either size or scale_factor should be defined"))
    in_sz = tuple(x.shape[2:])
    if size is not None:
        out_sz = ntuple(size, nd, "interpolate", "size")
        scales = (None,) * nd
    else:
        sf = tuple(scale_factor) if isinstance(scale_factor, (tuple, list)) else (scale_factor,) * nd
        if len(sf) != nd:
            raise ValueError(f"interpolate(): Input and scale_factor must have the same number of spatial dimensions, "
                             f"but got input with spatial dimensions of {list(in_sz)} and scale_factor of shape "
                             f"{list(sf)}.")
        out_sz = tuple(math.floor(n * float(f)) for n, f in zip(in_sz, sf))
        scales = (None,) * nd if recompute_scale_factor else tuple(float(f) for f in sf)
    if any(v <= 0 for v in out_sz):
        raise RuntimeError(f"interpolate(): output size {list(out_sz)} must be positive (input size {list(in_sz)})")
    ftype = x.data.dtype if x.data.dtype.kind == "f" else np.dtype(np.float32)
    y = x
    am = backend.array_module(x.data)  # the source indices and weights are computed on the host, then moved
    for ax, n_in, n_out, sc in zip(range(2, x.ndim), in_sz, out_sz, scales):
        j = np.arange(n_out)
        if not linear:
            s = _source_scale(n_in, n_out, sc, False, np.dtype(np.float32))  # PyTorch's nearest uses float
            jj = j.astype(np.float32) + np.float32(0.5) if mode == "nearest-exact" else j.astype(np.float32)
            src = np.minimum(np.floor(jj * s).astype(np.int64), n_in - 1)
            y = IndexSelect.apply(y, dim=ax, index=am.asarray(src))
            continue
        s = _source_scale(n_in, n_out, sc, bool(align_corners), ftype)
        if align_corners:
            src = s * j.astype(ftype)
        else:
            src = np.maximum(s * (j.astype(ftype) + ftype.type(0.5)) - ftype.type(0.5), ftype.type(0))
        i0 = src.astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        l1 = (src - i0).astype(ftype)
        shape = (n_out,) + (1,) * (x.ndim - 1 - ax)
        w1 = make(am.asarray(l1.reshape(shape)))
        w0 = make(am.asarray((ftype.type(1) - l1).reshape(shape)))
        y = IndexSelect.apply(y, dim=ax, index=am.asarray(i0)) * w0 + IndexSelect.apply(y, dim=ax, index=am.asarray(i1)) * w1
    return y
