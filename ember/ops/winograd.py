"""Winograd's minimal filtering F(2×2, 3×3): 3×3, stride-1 convolutions with 2.25× fewer multiplications.

In one dimension, two outputs of a 3-tap correlation y_i = Σ_k d[i+k]·g[k] from four inputs take four
multiplications instead of six (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016):

    y = Aᵀ [(G g) ⊙ (Bᵀ d)]      Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   (4×4)
                                  G  = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1]               (4×3)
                                  Aᵀ = [1 1 1 0; 0 1 -1 -1]                        (2×4)

Nested over rows and columns, a 2×2 output tile comes from a 4×4 input tile d and the 3×3 kernel g as
Y = Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A. Over channels the ⊙ becomes a sum, so for each of the 16 tile positions ξ
one matrix product does all the work:

    U[ξ] = (G ⊗ G) w          (O, C)     the transformed kernel
    V[ξ] = (Bᵀ ⊗ Bᵀ) d        (C, P)     the transformed input tiles (P = images · tiles)
    M[ξ] = U[ξ] · V[ξ]        (O, P)     16 GEMMs of 2·O·C·P flops: 4·O·C·(4P) against im2col's 9·O·C·(4P)
    y    = (Aᵀ ⊗ Aᵀ) M        (4, O, P)  each tile's 2×2 outputs

The transforms are written as matrices over the flattened tile (Kronecker products, 16×16, 16×9, 4×16),
so each is one GEMM over all tiles rather than dozens of strided adds. Its weight gradient is the same
pipeline read backwards (the adjoint of each linear map):

    dM[ξ] = (Aᵀ ⊗ Aᵀ)ᵀ dY     dU[ξ] = dM[ξ] · V[ξ]ᵀ     dw = (G ⊗ G)ᵀ dU

F(2×2, 3×3)'s transforms have entries 0, ±½ and ±1, so its rounding error is that of the direct sum
(tests/test_conv_algos.py measures it); F(4×4, 3×3), with entries up to 8 and 1/24, was measured at 10-30×
the direct error in float32 and is not used. The caller (nn_conv) chooses this algorithm per shape.
"""
from __future__ import annotations

import numpy as np

from .. import backend
from .windows import strided

_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64)
_G = np.array([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]], np.float64)
_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64)
# the 2-D transforms over a flattened tile: (Bᵀ d B) flattened = (Bᵀ ⊗ Bᵀ) d flattened, and so on
_KB, _KG, _KA = np.kron(_BT, _BT), np.kron(_G, _G), np.kron(_AT, _AT)
# Images per chunk: transformed tiles of at most _CHUNK_BYTES, so that the chunk's 16 GEMMs run while its tiles are
# in cache, but at least _MIN_TILES tiles, the GEMMs' columns (one thread, batch 32, forward: 64 channels on 32²
# 38 -> 34 ms from 4 MB chunks to 2 MB; 512 on 4² 28 -> 22 ms from 8 images a chunk to 32)
_CHUNK_BYTES = 2 << 20
_MIN_TILES = 128

_consts: dict = {}


def _k(name: str, dtype, am):
    """One of the transform matrices in `dtype` on the arrays' device (cached)."""
    key = (name, np.dtype(dtype).str, am.__name__)
    m = _consts.get(key)
    if m is None:
        m = _consts[key] = am.asarray({"B": _KB, "G": _KG, "A": _KA}[name].astype(dtype))
    return m


def tiles(hw: tuple, p: tuple) -> tuple:
    """((OH, OW), (TH, TW)): a stride-1 3×3 convolution's output size over the padding p and its 2×2 tiles."""
    oh, ow = hw[0] + p[0][0] + p[0][1] - 2, hw[1] + p[1][0] + p[1][1] - 2
    return (oh, ow), ((oh + 1) // 2, (ow + 1) // 2)


def _chunks(n: int, per_image: int, tiles: int):
    """(n0, n1) chunks of n images, each needing `per_image` bytes of transformed tiles for its `tiles` tiles."""
    step = max(1, min(n, max(_CHUNK_BYTES // max(per_image, 1), -(-_MIN_TILES // tiles))))
    for n0 in range(0, n, step):
        yield n0, min(n0 + step, n)


def transform_input(x, p: tuple):
    """V: (16, C, N·TH·TW), the 4×4 input tiles (stride 2) of x padded by p (and by zeros past its end, to
    whole tiles), through Bᵀ ⊗ Bᵀ."""
    am = backend.array_module(x)
    n, c, h, w = x.shape
    _, (th, tw) = tiles((h, w), p)
    (pt, _), (pl, _) = p
    xp = am.zeros((n, c, 2 * th + 2, 2 * tw + 2), x.dtype)
    hh, ww = min(h, 2 * th + 2 - pt), min(w, 2 * tw + 2 - pl)  # rows past the last tile are never read
    xp[:, :, pt:pt + hh, pl:pl + ww] = x[:, :, :hh, :ww]
    sn, sc, sh, sw = xp.strides
    d = am.empty((4, 4, c, n, th, tw), x.dtype)  # tile entries first: the transform is one GEMM over the rest
    d[...] = strided(xp, (4, 4, c, n, th, tw), (sh, sw, sc, sn, 2 * sh, 2 * sw))
    return (_k("B", x.dtype, am) @ d.reshape(16, -1)).reshape(16, c, n * th * tw)


def transform_kernel(w):
    """U: (16, O, C), the 3×3 kernels through G ⊗ G."""
    o, c = w.shape[:2]
    am = backend.array_module(w)
    return (_k("G", w.dtype, am) @ w.reshape(o * c, 9).T).reshape(16, o, c)


def conv3x3(x, w, b, p: tuple, keep: bool = False):
    """y = conv2d(x, w) + b for a 3×3 kernel, stride 1, padding p ((top, bottom), (left, right)), one group:
    an (N, O, OH, OW) array, computed chunk by chunk over the images. Returns (y, the chunks' transformed
    inputs V if `keep` else None): the weight gradient reuses them (conv3x3_weight_grad)."""
    am = backend.array_module(x)
    n, c, h, wd = x.shape
    o = w.shape[0]
    (oh, ow), (th, tw) = tiles((h, wd), p)
    u = transform_kernel(w)
    ka = _k("A", x.dtype, am)
    y = am.empty((n, o, oh, ow), np.result_type(x.dtype, w.dtype))
    kept = [] if keep else None
    for n0, n1 in _chunks(n, 16 * (c + o) * th * tw * x.itemsize, th * tw):
        m = n1 - n0
        v = transform_input(x[n0:n1], p)
        if keep:
            kept.append(v)
        mm = am.matmul(u, v)  # (16, O, m·TH·TW)
        t = (ka @ mm.reshape(16, -1)).reshape(2, 2, o, m, th, tw).transpose(3, 2, 4, 0, 5, 1)  # [n, o, i, a, j, b]
        whole = (oh, ow) == (2 * th, 2 * tw)
        if whole:  # y's rows 2i + a, columns 2j + b: written in one pass
            yt = y[n0:n1].reshape(m, o, th, 2, tw, 2)
        else:  # odd sizes: the last tile row or column is cut off
            yt = am.empty((m, o, th, 2, tw, 2), y.dtype)
        if b is None:
            yt[...] = t
        else:
            am.add(t, b.reshape(o, 1, 1, 1, 1), out=yt)
        if not whole:
            y[n0:n1] = yt.reshape(m, o, 2 * th, 2 * tw)[:, :, :oh, :ow]
    return y, kept


def conv3x3_weight_grad(x, g, p: tuple, kept: list | None = None):
    """dw = ∂⟨g, conv3x3(x, w)⟩/∂w: an (O, C, 3, 3) array, the forward pipeline's adjoint chunk by chunk,
    over the forward's transformed inputs `kept` when given (the same chunks: they depend on the shapes only)."""
    am = backend.array_module(x)
    n, c, h, wd = x.shape
    o = g.shape[1]
    (oh, ow), (th, tw) = tiles((h, wd), p)
    ka = _k("A", g.dtype, am)
    du = am.zeros((16, o, c), np.result_type(x.dtype, g.dtype))
    for i, (n0, n1) in enumerate(_chunks(n, 16 * (c + o) * th * tw * x.itemsize, th * tw)):
        m = n1 - n0
        v = kept[i] if kept is not None else transform_input(x[n0:n1], p)
        gt = am.empty((2, 2, o, m, th, tw), g.dtype)  # g's 2×2 tiles, entries first: gt[a, b, o, n, i, j]
        gm = g[n0:n1]
        if (oh, ow) != (2 * th, 2 * tw):  # odd sizes: zeros past g's last row or column
            gm = am.zeros((m, o, 2 * th, 2 * tw), g.dtype)
            gm[:, :, :oh, :ow] = g[n0:n1]
        gt.transpose(3, 2, 4, 0, 5, 1)[...] = gm.reshape(m, o, th, 2, tw, 2)
        dm = (ka.T @ gt.reshape(4, -1)).reshape(16, o, m * th * tw)
        du += am.matmul(dm, v.transpose(0, 2, 1))
    return (_k("G", du.dtype, am).T @ du.reshape(16, o * c)).T.reshape(o, c, 3, 3)
