"""Array kernels shared by the sliding-window ops (convolution, unfold/fold, pooling, the fused conv block):
window geometry, padding of the last two axes, strided window views, and im2col columns in chunks of images.

Everything here works on raw arrays (NumPy or CuPy), not Tensors: the ops of `nn_conv`, `nn_fold`, `nn_pool`
and `nn_fused` call it from their forward and backward.

    windows(pad_hw(x, win.p), win, ohw)[n, c, i, j, a, b] = x_pad[n, c, i·sh + a·dh, j·sw + b·dw]
    im2col: the same entries as a (C·kh·kw, OH·OW) matrix per image, rows in (c, a, b) order
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import backend


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


def strided_at(base: np.ndarray, offset: int, shape: tuple, strides: tuple, xp=np) -> np.ndarray:
    """A writeable view of the C-contiguous array `base` from byte `offset` on (np.ndarray on its buffer: ~1 µs, where
    as_strided takes ~10 µs, which adds up over the slots and chunks of every step). On a device (xp not numpy),
    as_strided on the flat view starting at `offset`."""
    if xp is np:
        return np.ndarray(shape, base.dtype, buffer=base, offset=offset, strides=strides)
    return xp.lib.stride_tricks.as_strided(base.reshape(-1)[offset // base.itemsize:], shape, strides)


def windows(xp: np.ndarray, win: Win, ohw: tuple) -> np.ndarray:
    """Read-only (N, C, OH, OW, kh, kw) view of the windows of the padded (N, C, Hp, Wp) array xp."""
    sn, sc, sh, sw = xp.strides
    return strided(xp, xp.shape[:2] + tuple(ohw) + tuple(win.k),
                   (sn, sc, sh * win.s[0], sw * win.s[1], sh * win.d[0], sw * win.d[1]))


# Bytes of im2col columns built per chunk of images: each chunk is multiplied while still in cache
# (one thread: W3's conv2 forward 4.6 -> 3.8 ms at batch 128, 45.6 -> 31.5 ms at batch 1000, where
# whole-batch columns would take 113 MB), and the per-image products write (N, O, OH·OW) directly.
_CHUNK_BYTES = 2 << 20


def chunk(n: int, per_image: int) -> int:
    """Images per chunk when each needs `per_image` bytes of columns."""
    return max(1, min(n, _CHUNK_BYTES // max(per_image, 1)))


WIDE_MIN_OUT = 32  # output channels: see wide_rows


def wide_rows(x_shape: tuple, win: Win, ohw: tuple, o: int) -> bool:
    """Whether a convolution builds its im2col columns with "wide" rows.

    The columns of an image are normally (K, OH·OW), K = C·kh·kw in (c, a, b) order: im2col copies
    K·OH runs of OW elements. With stride 1, the entries that kernel offset (a, b) reads are one
    contiguous run of the flat padded plane if each output row is computed over the padded width Wp
    (the last Wp - OW columns garbage, cropped after the GEMM): K runs of OH·Wp. That pays where the
    K column rows outweigh the O output rows and the garbage costs at most a quarter more GEMM work.
    Measured, one thread, batch 128: W3's conv2 input gradient (K = 18·O) 5.4 -> 4.3 ms; its forward
    (K = 4.5·O) within 3%; conv1 (K < O) 0.9 -> 1.4 ms. (A channel-last copy of the input, copying runs
    of kw·C, measured within 5% of the better of the two on W3's conv2 and was left out.)
    Not for fewer than 32 output channels: with 2 BLAS threads (the benchmarks' setting) the wide GEMMs of
    W3's conv2 input gradient (O = 16) took 4.7 ms against 1.4 plain at batch 32, 18.8 against 5.4 at 128,
    where one thread had them level; with O = 64 on 32² the wide rows still win at 2 threads (18 ms against 23)."""
    c, w = x_shape[1], x_shape[3]
    wp = w + win.p[1][0] + win.p[1][1]
    return (win.s == (1, 1) and wp > ohw[1] and 4 * (wp - ohw[1]) <= ohw[1] and o >= WIDE_MIN_OUT
            and c * win.k[0] * win.k[1] >= 8 * o)


def cols_chunks(x, win: Win, ohw: tuple, cols=None, fill=None, wide: bool = False, ones: bool = False):
    """Yield (n0, n1, columns of images n0:n1): an (m, K, OH·OW) array, K = C·kh·kw in (c, a, b) order,
    or (m, K, OH·Wp) with `wide` rows (see wide_rows); whole rows are copied at a time (the
    (OH·OW, K) order is ~5x slower). With `ones`, a row of ones follows the K rows (for the bias).
    `cols`: the whole batch's columns, already built, yielded in slices; else they are built chunk by
    chunk, into `fill` (an (N, K (+1), OH·OW) array, to keep, its row of ones already set) or into one
    reused chunk buffer, from each chunk padded into a reused zero-bordered buffer."""
    n = x.shape[0]
    if cols is not None:
        nc = chunk(n, cols[:1].nbytes)
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
    nc = chunk(n, k * oh * rw * x.itemsize)
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
