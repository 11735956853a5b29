"""Convolution and transposed convolution (1-D and 2-D), as im2col GEMMs.

A convolution is a matrix product over a strided window view of the padded input
(`im2col`): each image's windows, copied into a (C·kh·kw, OH·OW) matrix, times the weight
reshaped to (O, C·kh·kw) — one GEMM per image, built and multiplied in chunks of images that
stay in cache. Its two derivatives close a set of three ops, each the adjoint of the others,
so every derivative of every order is again one of them:

    Conv(x, w)            y  = W · im2col(x)
    ConvTranspose(g, w)   dx = col2im(Wᵀ · g)        (= ∂⟨g, conv(x, w)⟩/∂x; also the public conv_transpose)
    ConvWeightGrad(x, g)  dw = g · im2col(x)ᵀ       (= ∂⟨g, conv(x, w)⟩/∂w)

1-D convolutions are the 2-D ones on a height-1 image. All work on float32 stays float32.
The window geometry and the im2col columns are in `windows.py`. The forward (and so the stride-1 input
gradient, itself a convolution) runs by one of three algorithms chosen per shape (`algorithm`): im2col as
above, the same columns of many images folded into one GEMM (small output maps), or Winograd's F(2×2, 3×3)
(`winograd.py`: 3×3, stride-1 layers over many channels); the weight gradient follows its forward.
"""
from __future__ import annotations

import math
import time

import numpy as np

from .. import _dtype as dt
from .. import _runtime, backend
from ..backends import cudnn
from .._tensor import Tensor
from ..autograd.function import Op
from ..autograd.grad_mode import MODE
from .arithmetic import ones_vector
from .nn_args import ntuple, tensor_arg
from .shape import View, broadcast_to
from . import winograd
from .windows import Win, cols_chunks, pad_hw, wide_rows, windows

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"]


# ---------------------------------------------------------------------- array kernels
# Winograd F(2×2, 3×3) (winograd.py) where it was measured faster than im2col: both channel counts at least this.
# Its transforms cost O((C + O)·pixels) against the GEMMs' O(O·C·pixels), so the saving grows with the channels,
# and they are NumPy copies, one thread, where the GEMMs use every core. Forward + input gradient + weight gradient,
# batch 32, 2 threads: 64 channels on 32² 68 ms against im2col's 56 (one thread: 91 against 94); 128 on 16²
# 48 against 53; 256 on 8² 36 against 54 (docs/performance.md has the per-shape table)
WINOGRAD_MIN_CHANNELS = 128
# ... and Winograd only over this many 2×2 output tiles in the batch at least: its 16 GEMMs have one column per tile
# (one image of 512 channels on 4²: 23 ms against the folded GEMM's 6; 64 channels on 32², 256 tiles: level)
WINOGRAD_MIN_TILES = 128
# Output maps of at most this many pixels take the batch-folded GEMM ("folded"): per image, an (O, K) @ (K, OH·OW)
# product with so few columns runs far below the GEMM rate (ResNet-18's 4×4 maps: 16 columns)
FOLDED_MAX_PIXELS = 64
_FOLD_CHUNK_BYTES = 8 << 20  # columns per chunk of images in the folded GEMM


def candidates(x, w_shape: tuple, win: Win, groups: int, ohw: tuple | None = None) -> list[str]:
    """The algorithms that can compute conv(x, w) for these shapes: "im2col" always; "folded" with one group;
    "winograd" for 3×3, stride-1, undilated, ungrouped convolutions over all their windows, on the CPU, in
    float32 or float64."""
    out = ["im2col"]
    if groups == 1:
        out.append("folded")
        if (win.k == (3, 3) and win.s == (1, 1) and win.d == (1, 1) and x.__class__ is np.ndarray
                and x.dtype in (np.float32, np.float64)
                and (ohw is None or tuple(ohw) == winograd.tiles(x.shape[2:], win.p)[0])):
            out.append("winograd")
    return out


def algorithm(x, w_shape: tuple, win: Win, groups: int, ohw: tuple | None = None) -> str:
    """The forward algorithm of conv(x, w) for these shapes, by the measured rule: "winograd" where it can run
    over enough channels and tiles; "folded" (one GEMM over many images' columns) onto small maps; else
    "im2col" (a GEMM per image). With `ember.backends.cudnn.benchmark` on, the fastest measured (see `_tune`)."""
    tuned = _tuned_choice(x.shape, w_shape, win, groups, ohw, x.dtype)
    if tuned is not None:
        return tuned
    can = candidates(x, w_shape, win, groups, ohw)
    if ("winograd" in can and min(x.shape[1], w_shape[0]) >= WINOGRAD_MIN_CHANNELS
            and x.shape[0] * math.prod(winograd.tiles(x.shape[2:], win.p)[1]) >= WINOGRAD_MIN_TILES):
        return "winograd"
    oh, ow = ohw or win.out(x.shape[2:])
    if "folded" in can and oh * ow <= FOLDED_MAX_PIXELS:
        return "folded"
    return "im2col"


# ---------------------------------------------------------------------- choosing by measurement (opt-in)
_TUNED: dict = {}  # (shapes, window, groups, dtype) -> the algorithm measured fastest in this process


def _benchmarking() -> bool:
    """Whether convolutions choose their algorithm by timing: `ember.backends.cudnn.benchmark` set, as in PyTorch,
    and neither `cudnn.deterministic` nor `ember.use_deterministic_algorithms(True)` (the algorithms round
    differently, and which one wins a timing can differ from run to run)."""
    return bool(cudnn.benchmark) and not cudnn.deterministic and not _runtime.are_deterministic_algorithms_enabled()


def _key(x_shape: tuple, w_shape: tuple, win: Win, groups: int, ohw, dtype) -> tuple:
    return tuple(x_shape), tuple(w_shape), win, groups, tuple(ohw or win.out(x_shape[2:])), np.dtype(dtype).str


def _tuned_choice(x_shape, w_shape, win, groups, ohw, dtype) -> str | None:
    """The cached measured choice for these shapes, if convolutions are benchmarking and one was measured."""
    return _TUNED.get(_key(x_shape, w_shape, win, groups, ohw, dtype)) if _TUNED and _benchmarking() else None


def _tune(x, w, b, win: Win, groups: int, ohw) -> None:
    """With benchmarking on (PyTorch's `cudnn.benchmark` idea, applied to ember's CPU convolutions): at the first
    forward of each set of shapes, time every algorithm that can run (the better of two forwards each) on the
    actual arrays and cache the fastest for the process. The input gradient, itself a convolution, is tuned at
    its own first use; the weight gradient follows its forward's choice."""
    if x.__class__ is not np.ndarray or not _benchmarking():
        return
    key = _key(x.shape, w.shape, win, groups, ohw, x.dtype)
    if key in _TUNED:
        return
    can = candidates(x, w.shape, win, groups, ohw)
    if len(can) > 1:
        best, choice = math.inf, can[0]
        for algo in can:
            for _ in range(2):
                t0 = time.perf_counter()
                _conv_by(algo, x, w, b, win, groups, False, ohw)
                t = time.perf_counter() - t0
                if t < best:
                    best, choice = t, algo
        _TUNED[key] = choice
    else:
        _TUNED[key] = can[0]


def _finite(*arrays) -> bool:
    """Whether the arrays hold no inf or NaN (a sum is one pass and allocates nothing; an overflowing sum of
    finite values only sends the caller to im2col). Winograd's transforms mix a tile's entries, so an inf
    or NaN would reach outputs whose windows do not contain it (inf - inf): those inputs go to im2col,
    which gives PyTorch's values."""
    return all(np.isfinite(a.sum()) for a in arrays)


def _conv(x, w, b, win: Win, groups: int, keep: bool = False, ohw: tuple | None = None):
    """y = conv(x, w) + b by the algorithm `algorithm` picks for these shapes (timed at first use under
    `cudnn.benchmark`: `_tune`). Returns (y, (the algorithm, what its weight gradient reuses) if `keep` else None)."""
    _tune(x, w, b, win, groups, ohw)
    return _conv_by(algorithm(x, w.shape, win, groups, ohw), x, w, b, win, groups, keep, ohw)


def _conv_by(algo: str, x, w, b, win: Win, groups: int, keep: bool, ohw: tuple | None):
    """conv(x, w) + b by `algo`: "winograd" (winograd.py; inputs holding inf or NaN take im2col), "folded"
    (`_conv_folded`) or "im2col" (`_conv_im2col`)."""
    if algo == "winograd" and _finite(x, w):
        y, kept = winograd.conv3x3(x, w, b, win.p, keep)
        return y, (algo, kept) if keep else None
    if algo == "folded":
        y, kept = _conv_folded(x, w, b, win, ohw or win.out(x.shape[2:]), keep)
        return y, (algo, kept) if keep else None
    return _conv_im2col(x, w, b, win, groups, keep, ohw)


def _conv_im2col(x, w, b, win: Win, groups: int, keep: bool = False, ohw: tuple | None = None):
    """y = conv(x, w) + b by im2col, chunk by chunk over the images: per image and group one (O, K) @ (K, OH·RW)
    GEMM (RW = OW, or Wp with wide rows) into the (N, O, OH, OW) result; `ohw` limits (OH, OW) to the
    first windows. With one group the bias is a column of the weight times a row of ones in the
    columns (no pass of its own over the output: W3's conv1 ~0.2 ms). Returns (y, ("im2col", the whole
    batch's (N, K (+1), OH·OW) columns) if `keep` else None)."""
    n, c, hw = x.shape[0], x.shape[1], x.shape[2:]
    o = w.shape[0]
    oh, ow = ohw or win.out(hw)
    k = c * win.k[0] * win.k[1]
    wide = not keep and wide_rows(x.shape, win, (oh, ow), o)  # dw's GEMMs want the plain columns
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
    for n0, n1, part in cols_chunks(x, win, (oh, ow), fill=cols, wide=wide, ones=fold):
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
    return out, ("im2col", cols) if keep else None


def _folded_cols(x, win: Win, ohw: tuple, cols=None):
    """Yield (n0, n1, the (K, m·OH·OW) columns of images n0:n1), K = C·kh·kw in (c, a, b) order: the images'
    windows side by side, so that one GEMM covers them all. `cols`: the whole batch's, already built (K, N·OH·OW)."""
    n, c = x.shape[:2]
    p = ohw[0] * ohw[1]
    k = c * win.k[0] * win.k[1]
    step = max(1, min(n, _FOLD_CHUNK_BYTES // (k * p * x.itemsize)))
    am = backend.array_module(x)
    for n0 in range(0, n, step):
        n1 = min(n0 + step, n)
        if cols is not None:
            yield n0, n1, cols[:, n0 * p:n1 * p]
            continue
        v = windows(pad_hw(x[n0:n1], win.p), win, ohw)  # (m, C, OH, OW, kh, kw)
        part = am.empty((k, (n1 - n0) * p), x.dtype)
        part.reshape(c, win.k[0], win.k[1], n1 - n0, ohw[0], ohw[1])[...] = v.transpose(1, 4, 5, 0, 2, 3)
        yield n0, n1, part


def _conv_folded(x, w, b, win: Win, ohw: tuple, keep: bool):
    """y = conv(x, w) + b for one group as (O, K) @ (K, m·OH·OW) GEMMs over chunks of images (see algorithm),
    each result moved to (m, O, OH, OW). Returns (y, the whole batch's (K, N·OH·OW) columns if `keep`)."""
    am = backend.array_module(x)
    n, o = x.shape[0], w.shape[0]
    oh, ow = ohw
    wm = w.reshape(o, -1)
    y = am.empty((n, o, oh, ow), np.result_type(x.dtype, w.dtype))
    parts = []
    for n0, n1, part in _folded_cols(x, win, ohw):
        r = (wm @ part).reshape(o, n1 - n0, oh, ow).transpose(1, 0, 2, 3)
        if b is None:
            y[n0:n1] = r
        else:
            am.add(r, b.reshape(o, 1, 1), out=y[n0:n1])
        if keep:
            parts.append(part)
    return y, (am.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]) if keep else None


def _weight_grad_folded(x, g, win: Win, wshape: tuple, cols=None):
    """dw = g · im2col(x)ᵀ as GEMMs over chunks of images (the folded forward's adjoint in w), over the
    forward's kept (K, N·OH·OW) columns when given."""
    am = backend.array_module(g)
    n, o, oh, ow = g.shape
    dw = None
    for n0, n1, part in _folded_cols(x, win, (oh, ow), cols):
        gm = am.ascontiguousarray(g[n0:n1].reshape(n1 - n0, o, oh * ow).transpose(1, 0, 2)).reshape(o, -1)
        d = (part @ gm.T).T  # (K, m·P) @ (m·P, O): OpenBLAS runs this orientation ~2x faster than gm @ part.T
        dw = d if dw is None else dw + d
    return dw.reshape(wshape)


def _flipped_transpose(w, groups: int):
    """The kernel of the adjoint convolution: wt[g·C/G + c, o, a, b] = w[g·O/G + o, c, kh-1-a, kw-1-b]."""
    o, cg, kh, kw = w.shape
    wt = w.reshape(groups, o // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1]
    return backend.array_module(w).ascontiguousarray(wt).reshape(groups * cg, o // groups, kh, kw)


def conv_transpose_array(g, w, win: Win, groups: int, hw: tuple):
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
    over the forward's kept columns `cols` when given (Winograd's transformed inputs where the forward used it)."""
    kept, cols = (cols if isinstance(cols, tuple) else (None, None))  # (the forward's algorithm, what it kept)
    algo = kept or algorithm(x, wshape, win, groups, g.shape[2:])  # the forward's choice, where it kept its data
    if algo == "winograd" and _finite(x, g):
        return winograd.conv3x3_weight_grad(x, g, win.p, cols if kept == algo else None)
    if algo == "folded":
        return _weight_grad_folded(x, g, win, wshape, cols if kept == algo else None)
    if kept != "im2col":
        cols = None
    n, o, oh, ow = g.shape
    k = wshape[1] * wshape[2] * wshape[3]
    gm = g.reshape(n, groups, o // groups, oh * ow)
    dwt = backend.array_module(g).zeros((groups, k, o // groups), np.result_type(x.dtype, g.dtype))  # dwᵀ per group
    for n0, n1, part in cols_chunks(x, win, (oh, ow), cols):
        cm = part[:, :k * groups].reshape(n1 - n0, groups, k, oh * ow)  # without the forward's row of ones
        # cols · gᵀ, not g · colsᵀ: OpenBLAS runs this orientation faster (one thread: W3's conv2 6.4 -> 5.4 ms)
        dwt += np.matmul(cm, gm[n0:n1].transpose(0, 1, 3, 2)).sum(0)
    return dwt.transpose(0, 2, 1).reshape(wshape)


# ---------------------------------------------------------------------- the three convolution ops
class Conv(Op):
    """z = conv(x, w) + b (cross-correlation, as PyTorch), over the first `ohw` windows when given;
    dz/dx: ConvTranspose(gz, w), dz/dw: ConvWeightGrad(x, gz), dz/db: Σ gz over (N, OH, OW)."""

    def forward(self, x, w, b, win, groups, keep_cols=False, ohw=None):
        out, cols = _conv(x, w, b, win, groups, keep_cols, ohw)
        if keep_cols:  # im2col(x), for dw: recomputing it would cost about as much as dw's GEMM
            self.cols = cols
        self.ohw = ohw
        return out

    def jvp(self, t, x, w, b, win, groups):
        """z' = conv(x', w) + conv(x, w') + b' (bilinear in x and w)."""
        tx, tw, tb = t[:3]
        z = Conv.apply(tx, w, None, win, groups, ohw=self.ohw) if isinstance(tx, Tensor) else 0
        if isinstance(tw, Tensor):
            z = z + Conv.apply(x, tw, None, win, groups, ohw=self.ohw)
        return z + View.apply(tb, (1, tb.shape[0], 1, 1)) if isinstance(tb, Tensor) else z

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

    jvp = Op.linear_jvp  # linear in g

    def backward(self, gz):
        return broadcast_to(View.apply(gz, (1, self.shape[1], 1, 1)), self.shape)


class ConvTranspose(Op):
    """z = convᵀ(g, w), the adjoint of x ↦ conv(x, w) (an x-shaped result);  dz/dg: Conv(gz, w),
    dz/dw: ConvWeightGrad(gz, g)  (since ⟨gz, convᵀ(g, w)⟩ = ⟨conv(gz, w), g⟩)."""

    def forward(self, g, w, win, groups, hw):
        return conv_transpose_array(g, w, win, groups, hw)

    def jvp(self, t, g, w, win, groups, hw):
        """z' = convᵀ(g', w) + convᵀ(g, w') (bilinear in g and w)."""
        tg, tw = t[:2]
        z = ConvTranspose.apply(tg, w, win, groups, hw) if isinstance(tg, Tensor) else 0
        return z + ConvTranspose.apply(g, tw, win, groups, hw) if isinstance(tw, Tensor) else z

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

    def jvp(self, t, x, g, win, groups, wshape):
        """z' = dw(x', g) + dw(x, g') (bilinear in x and g; not over the forward's columns, which are x's)."""
        tx, tg = t[:2]
        z = ConvWeightGrad.apply(tx, g, win, groups, wshape) if isinstance(tx, Tensor) else 0
        return z + ConvWeightGrad.apply(x, tg, win, groups, wshape) if isinstance(tg, Tensor) else z

    def backward(self, gz, x, g, win, groups, wshape):
        gx = ConvTranspose.apply(g, gz, win, groups, x.shape[2:]) if self.needs(0) else None
        gg = Conv.apply(x, gz, None, win, groups, ohw=g.shape[2:]) if self.needs(1) else None
        return gx, gg, None, None, None


# ---------------------------------------------------------------------- argument checks
def _batched(x: Tensor, n: int, op: str, what: str = "input") -> bool:
    """Whether x is batched ((N, C, *spatial) with n spatial dims) rather than unbatched (C, *spatial)."""
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) {what} to {op}, but got {what} of size: "
                           f"{list(x.shape)}")
    return x.ndim == n + 2


def _same_dtype(op: str, **named) -> None:
    ref_name, ref = next(iter(named.items()))
    for name, t in named.items():
        if t is not None and t._data.dtype != ref._data.dtype:
            raise RuntimeError(f"{op}(): {ref_name} ({ref.dtype}) and {name} ({t.dtype}) must have the same dtype; "
                               f"convert one with .to(...)")
    if ref._data.dtype.kind not in "iu" and not dt.is_float(ref._data.dtype):
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
        tensor_arg(b, op, "bias", 3)
        c_out = w.shape[1] * groups if transposed else w.shape[0]
        if b.shape != (c_out,):
            raise RuntimeError(f"{op}(): Given weight of size {list(w.shape)}, expected bias to be 1-dimensional with "
                               f"{c_out} elements, but got bias of size {list(b.shape)} instead")
    _same_dtype(op, input=x, weight=w, bias=b)
    return groups


def conv_win(op: str, hw: tuple, k: tuple, stride, padding, dilation) -> Win:
    """The checked Win of the nd-D convolution `op` (nd = len(k)) over spatial size hw, as a 2-D Win (height-1
    kernel for nd = 1); padding an int, a tuple of nd ints, 'valid' or 'same'."""
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
def conv_inputs(op: str, nd: int, input, weight, bias, groups, transposed: bool) -> tuple:
    """Checked (x, w, batched, x as (N, C, H, W), groups) for the nd-D convolution `op`."""
    if MODE.autocast is not None:  # autocast casts before the dtype checks, as in PyTorch
        from ..amp.autocast_mode import cast_args
        input, weight, bias = cast_args(ConvTranspose if transposed else Conv, input, weight, bias)
    x = tensor_arg(input, op, "input", 1)
    w = tensor_arg(weight, op, "weight", 2)
    if w.ndim != nd + 2:
        channels = "in_channels, out_channels/groups" if transposed else "out_channels, in_channels/groups"
        raise RuntimeError(f"{op}(): expected a {nd + 2}-D weight ({channels}, "
                           f"{', '.join('kH kW'.split()[-nd:])}), got weight of size {list(w.shape)}")
    batched = _batched(x, nd, op)
    x2 = _as_2d(x, batched, nd == 1)
    return x, w, batched, x2, _conv_checks(op, x2, w, bias, groups, transposed)


def _convnd(op: str, nd: int, input, weight, bias, stride, padding, dilation, groups) -> Tensor:
    x, w, batched, x2, groups = conv_inputs(op, nd, input, weight, bias, groups, False)
    win = conv_win(op, x.shape[-nd:], tuple(w.shape[2:]), stride, padding, dilation)
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
    x, w, batched, x2, groups = conv_inputs(op, nd, input, weight, bias, groups, True)
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
