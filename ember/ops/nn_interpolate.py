"""Resampling: interpolate in every mode (with the deprecated upsample aliases), grid_sample and affine_grid.

interpolate is separable. Along each resized axis the output is a sparse linear map of the input,
y[.., i, ..] = Σ_t w[i, t] · x[.., idx[i, t], ..], with T taps per output: 1 for nearest (an index gather), 2 for
linear, 4 for bicubic, up to 2⌈support⌉ + 1 for the antialiased filters. `Resample` applies the taps (T gathers
and multiply-adds); its gradient is the same op with the transposed taps (Mᵀ, also a few taps per input
position), so every derivative is again a Resample. 'area' is adaptive average pooling. Indices and weights
depend on the sizes only, are computed on the host in the input's float type as PyTorch's kernels compute
them, and are cached.

grid_sample is written with ember ops on the sampling coordinates (unnormalise, pad by clipping or reflecting,
floor, corner weights) and one gather per corner (`PlaneGather`), so the gradients to the input (a scatter-add)
and to the grid (through the weights) come out of the chain rule. affine_grid is a base grid times θᵀ.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from .. import backend
from .. import _dtype as dt
from .._tensor import Tensor, constant
from ..autograd.function import Op
from .arithmetic import where
from .nn_args import tensor_arg
from .shape import View, stack

__all__ = ["interpolate", "upsample", "upsample_nearest", "upsample_bilinear", "grid_sample", "affine_grid"]


_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "area", "nearest-exact")
_NEEDS_NDIM = {"linear": 3, "bilinear": 4, "bicubic": 4, "trilinear": 5}
_CUBIC_A = -0.75  # PyTorch's bicubic (Keys' cubic convolution); its antialiased bicubic uses PIL's -0.5


# ---------------------------------------------------------------------- taps of one axis (host, cached)
def _frozen(*arrays) -> tuple:
    for a in arrays:
        a.flags.writeable = False  # shared through the cache
    return arrays


def _scale(n: int, o: int, align_corners: bool, scale, ft):
    """PyTorch's source-coordinate scale in float type ft: (n-1)/(o-1) with align_corners, else 1/scale_factor when
    one was given (and not recomputed), else n/o."""
    if align_corners:
        return ft(n - 1) / ft(o - 1) if o > 1 else ft(0)
    if scale is not None and scale > 0:
        return ft(1.0 / scale)
    return ft(n) / ft(o)


@functools.lru_cache(maxsize=512)
def _nearest_index(n: int, o: int, scale, exact: bool, shortcuts: bool) -> np.ndarray | None:
    """Source index of each output along an axis (None: the identity): ⌊i·s⌋ ('nearest') or ⌊(i + ½)·s⌋
    ('nearest-exact'), clipped to n - 1, with s in float32 as PyTorch's kernels. Its 2-D nearest kernel
    (`shortcuts`) copies an axis that keeps its size and halves the index of one that doubles, whatever the scale."""
    i = np.arange(o)
    if shortcuts and not exact and o == n:
        src = i
    elif shortcuts and not exact and o == 2 * n:
        src = i >> 1
    else:
        s = _scale(n, o, False, scale, np.float32)
        src = np.floor(((i + 0.5) * np.float64(s)).astype(np.float32) if exact else i.astype(np.float32) * s)
    src = np.minimum(src.astype(np.int64), n - 1)
    return None if o == n and np.array_equal(src, i) else _frozen(src)[0]


def _linear(n: int, o: int, scale, align_corners: bool, ft) -> tuple:
    """Two taps: x[i0]·(1 - λ) + x[i1]·λ at the source coordinate s·i (align_corners) or max(s·(i + ½) - ½, 0)."""
    s = _scale(n, o, align_corners, scale, ft)
    j = np.arange(o).astype(ft)
    src = s * j if align_corners else np.maximum(s * (j + ft(0.5)) - ft(0.5), ft(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    lam = np.clip(src - i0, 0, 1).astype(ft)
    return np.stack([i0, i0 + (i0 < n - 1)], 1), np.stack([ft(1) - lam, lam], 1)


def _cubic_weights(t, a: float, ft) -> np.ndarray:
    """Keys' cubic convolution weights of the four taps at offsets -1, 0, 1, 2 from ⌊src⌋, t = src - ⌊src⌋."""
    a = ft(a)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)], 1).astype(ft)


def _cubic(n: int, o: int, scale, align_corners: bool, ft) -> tuple:
    """Four taps ⌊src⌋ - 1 .. ⌊src⌋ + 2 (clamped into the axis) with Keys' weights (A = -0.75); src = s·i or
    s·(i + ½) - ½, not clamped at 0."""
    s = _scale(n, o, align_corners, scale, ft)
    j = np.arange(o).astype(ft)
    src = s * j if align_corners else s * (j + ft(0.5)) - ft(0.5)
    i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
    t = np.clip(src - i0, 0, 1).astype(ft)
    return np.clip(i0[:, None] + np.arange(-1, 3), 0, n - 1), _cubic_weights(t, _CUBIC_A, ft)


def _antialiased(n: int, o: int, scale, align_corners: bool, ft, cubic: bool) -> tuple:
    """PyTorch's antialiased taps (PIL's): the triangle (bilinear) or Keys' cubic with A = -0.5 (bicubic) filter,
    stretched by the scale s when downsampling (support = radius·max(s, 1)), centred at s·(i + ½), over the inputs
    within the support, normalised to sum to 1."""
    radius = 2.0 if cubic else 1.0
    s = _scale(n, o, align_corners, scale, ft)
    support = ft(radius * s) if s >= 1 else ft(radius)
    inv = ft(1 / s) if s >= 1 else ft(1)
    taps = int(math.ceil(support)) * 2 + 1
    center = s * (np.arange(o).astype(ft) + ft(0.5))
    lo = np.maximum((center - support + ft(0.5)).astype(np.int64), 0)  # (C++'s truncation toward zero)
    size = np.minimum((center + support + ft(0.5)).astype(np.int64), n) - lo
    k = np.arange(taps)
    x = np.abs(((k + lo[:, None]) - center[:, None] + 0.5) * inv).astype(ft)
    if cubic:
        a = ft(-0.5)
        w = np.where(x < 1, ((a + 2) * x - (a + 3)) * x * x + 1, np.where(x < 2, (((x - 5) * x + 8) * x - 4) * a, 0))
    else:
        w = np.maximum(1 - x, 0)
    w = np.where(k < size[:, None], w, 0).astype(ft)
    total = w.sum(1, keepdims=True)
    w = np.where(total != 0, w / np.where(total != 0, total, 1), w).astype(ft)
    return np.minimum(lo[:, None] + k, n - 1), w


def _transpose_taps(idx: np.ndarray, w: np.ndarray, n: int) -> tuple:
    """The taps of Mᵀ (n rows) from those of M (o rows): every nonzero (i, idx[i, t], w[i, t]) regrouped by its
    input position, rows padded with zero-weight taps to the longest."""
    rows, cols = np.nonzero(w)
    src, weight = idx[rows, cols], w[rows, cols]
    order = np.argsort(src, kind="stable")
    src, rows, weight = src[order], rows[order], weight[order]
    counts = np.bincount(src, minlength=n)
    width = max(int(counts.max()) if counts.size else 0, 1)
    slot = np.arange(src.size) - np.repeat(np.cumsum(counts) - counts, counts)
    idx_t = np.zeros((n, width), np.int64)
    w_t = np.zeros((n, width), w.dtype)
    idx_t[src, slot] = rows
    w_t[src, slot] = weight
    return idx_t, w_t


@functools.lru_cache(maxsize=512)
def _taps(kind: str, n: int, o: int, scale, align_corners: bool, dtype: str) -> tuple | None:
    """((idx, w), (idxᵀ, wᵀ)) of one axis for kind 'nearest', 'nearest-exact', 'nearest-2d' (with the 2-D kernel's
    shortcuts), 'linear', 'cubic', 'aa-linear' or 'aa-cubic', in float type dtype; the nearest kinds have w = None
    (a plain gather); None for an axis that a nearest mode leaves as it is."""
    ft = np.dtype(dtype).type
    if kind.startswith("nearest"):
        idx = _nearest_index(n, o, scale, kind == "nearest-exact", kind == "nearest-2d")
        if idx is None:
            return None
        idx = idx[:, None]
        return _frozen(idx), _frozen(*_transpose_taps(idx, np.ones(idx.shape, ft), n))
    if kind == "linear":
        idx, w = _linear(n, o, scale, align_corners, ft)
    elif kind == "cubic":
        idx, w = _cubic(n, o, scale, align_corners, ft)
    else:
        idx, w = _antialiased(n, o, scale, align_corners, ft, kind == "aa-cubic")
    return _frozen(idx, w), _frozen(*_transpose_taps(idx, w, n))


class Resample(Op):
    """z[.., i, ..] = Σ_t w[i, t] · x[.., idx[i, t], ..] along `axis`: the sparse (o x n) map M of taps = (idx, w)
    (taps = (idx,): one tap of weight 1, a gather);  dz/dx = Mᵀ·gz, the same op with the transposed taps."""

    saves_inputs = False

    def forward(self, x, axis, taps, taps_t):
        self.args = (axis, taps_t, taps)
        am = backend.array_module(x)
        if len(taps) == 1:
            idx = taps[0][:, 0]
            n, o = x.shape[axis], idx.shape[0]
            if o % n == 0 and np.array_equal(idx, np.arange(o) // (o // n)):  # each input k times: ~1.6x faster
                return am.repeat(x, o // n, axis=axis)
            return am.take(x, am.asarray(idx), axis=axis)
        idx, w = taps
        rows, k = idx.shape
        if x.shape[axis] == rows * k and np.array_equal(idx.ravel(), np.arange(rows * k)) and (w == 1).all():
            # each output the sum of its own k consecutive inputs (the adjoint of a repeat): k strided adds
            # (a sum over a reshaped axis of k is ~5x slower on the last axis)
            lead = (slice(None),) * axis
            out = x[lead + (slice(0, None, k),)].copy()
            for t in range(1, k):
                out += x[lead + (slice(t, None, k),)]
            return out
        shape = (-1,) + (1,) * (x.ndim - 1 - axis)
        out = am.take(x, am.asarray(idx[:, 0]), axis=axis)
        out *= am.asarray(w[:, 0]).reshape(shape)
        for t in range(1, idx.shape[1]):
            term = am.take(x, am.asarray(idx[:, t]), axis=axis)
            term *= am.asarray(w[:, t]).reshape(shape)
            out += term
        return out

    jvp = Op.linear_jvp  # linear in x

    def backward(self, gz):
        return Resample.apply(gz, *self.args)


# ---------------------------------------------------------------------- interpolate
def _is_int(v) -> bool:
    return not isinstance(v, bool) and hasattr(v, "__index__")


def _sizes(x: Tensor, nd: int, size, scale_factor, recompute_scale_factor, mode: str) -> tuple:
    """(output sizes, per-axis scale factors for the source coordinates or None) by PyTorch's rules."""
    spatial = list(x.shape[2:])
    if size is not None and scale_factor is not None:
        raise ValueError("interpolate(): only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("interpolate(): either size or scale_factor should be defined")
    if size is not None:
        if recompute_scale_factor:
            raise ValueError("interpolate(): recompute_scale_factor is not meaningful with an explicit size.")
        seq = tuple(size) if isinstance(size, (list, tuple)) else (size,) * nd
        if len(seq) != nd:
            raise ValueError(f"interpolate(): Input and output must have the same number of spatial dimensions, but "
                             f"got input with spatial dimensions of {spatial} and output size of {size}. Please "
                             f"provide input tensor in (N, C, d1, d2, ...,dK) format and output size in "
                             f"(o1, o2, ...,oK) format.")
        if not all(_is_int(v) for v in seq):
            raise TypeError(f"interpolate(): expected size to be one of int or Tuple[int] or Tuple[int, int] or "
                            f"Tuple[int, int, int], but got size with types {[type(v) for v in seq]}")
        return tuple(int(v.__index__()) for v in seq), (None,) * nd
    seq = tuple(scale_factor) if isinstance(scale_factor, (list, tuple)) else (scale_factor,) * nd
    if len(seq) != nd:
        raise ValueError(f"interpolate(): Input and scale_factor must have the same number of spatial dimensions, but "
                         f"got input with spatial dimensions of {spatial} and scale_factor of shape {scale_factor}. "
                         f"Please provide input tensor in (N, C, d1, d2, ...,dK) format and scale_factor in "
                         f"(s1, s2, ...,sK) format.")
    try:
        factors = tuple(float(f) for f in seq)
    except (TypeError, ValueError):
        raise TypeError(f"interpolate(): scale_factor must be a float or a sequence of floats, got {scale_factor!r}") \
            from None
    if recompute_scale_factor or mode == "area":  # the size from the factor, then the factor forgotten
        return tuple(int(n * f) for n, f in zip(spatial, factors)), (None,) * nd
    return tuple(math.floor(float(n) * f) for n, f in zip(spatial, factors)), factors


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """Resize the spatial dims of (N, C, L), (N, C, H, W) or (N, C, D, H, W) to `size`, or to ⌊size · scale_factor⌋.

    mode: 'nearest' (source ⌊i·s⌋), 'nearest-exact' (⌊(i + ½)·s⌋), 'linear' (3-D), 'bilinear' (4-D), 'bicubic'
    (4-D; Keys' cubic, A = -0.75), 'trilinear' (5-D), 'area' (adaptive average pooling). s = in/out, or
    1/scale_factor when scale_factor is given and recompute_scale_factor is not True; with align_corners the
    corner pixels' centres align: s = (in-1)/(out-1). antialias (bilinear/bicubic): a filter stretched over
    the input pixels each output covers when downsampling, as PIL."""
    x = tensor_arg(input, "interpolate", "input", 1)
    if mode in ("nearest", "area", "nearest-exact"):
        if align_corners is not None:
            raise ValueError("interpolate(): align_corners option can only be set with the interpolating modes: "
                             "linear | bilinear | bicubic | trilinear")
    else:
        align_corners = bool(align_corners)
    if x.ndim not in (3, 4, 5) or mode not in _MODES:
        raise NotImplementedError(f"interpolate(): Input Error: Only 3D, 4D and 5D input Tensors supported (got "
                                  f"{x.ndim}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | area "
                                  f"| nearest-exact (got {mode!r})")
    nd = x.ndim - 2
    out, scales = _sizes(x, nd, size, scale_factor, recompute_scale_factor, mode)
    if antialias and not (mode in ("bilinear", "bicubic") and x.ndim == 4):
        raise ValueError("interpolate(): Anti-alias option is restricted to bilinear and bicubic modes and requires "
                         f"a 4-D tensor as input (got mode {mode!r} and {x.ndim}-D input)")
    if mode in _NEEDS_NDIM and x.ndim != _NEEDS_NDIM[mode]:
        raise NotImplementedError(f"interpolate(): Got {x.ndim}D input, but {mode} mode needs "
                                  f"{_NEEDS_NDIM[mode]}D input")
    spatial = tuple(x.shape[2:])
    if any(v <= 0 for v in spatial + out) or x.shape[1] == 0:
        raise RuntimeError(f"interpolate(): Input and output sizes should be greater than 0: output size {list(out)} "
                           f"must be positive, and so must the input's channel and spatial sizes (input of size "
                           f"{list(x.shape)})")
    dtype = x._data.dtype
    if mode == "area":
        from .nn_pool import adaptive_avg_pool2d
        from .nn_spatial import adaptive_avg_pool1d, adaptive_avg_pool3d
        return (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[nd - 1](x, out)
    if mode.startswith("nearest"):
        if not (dt.is_float(dtype) or dtype == np.uint8):
            raise NotImplementedError(f"interpolate(): mode {mode!r} is not implemented for {x.dtype} input (only "
                                      f"floating-point and uint8); convert it with .float()")
        kind = "nearest-2d" if mode == "nearest" and nd == 2 else mode
        wtype = dtype.name if dt.is_float(dtype) and dtype not in dt.LOW_FLOATS else "float32"
        y = x
        for j, (n, o, s) in enumerate(zip(spatial, out, scales)):
            taps = _taps(kind, n, o, s, False, wtype)
            if taps is not None:
                y = Resample.apply(y, 2 + j, *taps)
        return y if y is not x else x.clone()
    if not dt.is_float(dtype):
        raise NotImplementedError(f"interpolate(): mode {mode!r} is not implemented for {x.dtype} input; convert it "
                                  f"with .float()")
    kind = "cubic" if mode == "bicubic" else "linear"
    if antialias:
        kind = "aa-" + kind
    wtype = "float32" if dtype in dt.LOW_FLOATS else dtype.name  # (16-bit floats compute in float32)
    y = x
    for j, (n, o, s) in enumerate(zip(spatial, out, scales)):
        if n == o and kind == "linear":  # PyTorch copies an axis that keeps its size
            continue
        taps, taps_t = _taps(kind, n, o, s, align_corners, wtype)
        y = Resample.apply(y, 2 + j, taps, taps_t)
    return y if y is not x else x.clone()


def upsample(input: Tensor, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None):
    """Deprecated alias of interpolate (PyTorch warns)."""
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: interpolate(input, size, scale_factor, mode='nearest')."""
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input: Tensor, size=None, scale_factor=None) -> Tensor:
    """Deprecated: interpolate(input, size, scale_factor, mode='bilinear', align_corners=True)."""
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------------- grid_sample
_ALIGN_WARNING = ("Default grid_sample and affine_grid behavior has changed to align_corners=False since 1.3.0. Please "
                  "specify align_corners=True if the old behavior is desired. See the documentation of grid_sample for "
                  "details.")


def _unnormalize(c: Tensor, size: int, align_corners: bool) -> Tensor:
    """Grid coordinate in [-1, 1] to pixel coordinate: -1 and 1 are the corner pixels' centres (align_corners) or
    their outer edges."""
    return (c + 1) / 2 * (size - 1) if align_corners else ((c + 1) * size - 1) / 2


def _clip(c: Tensor, size: int) -> Tensor:
    """c clipped into [0, size - 1]; its derivative 1 strictly inside and 0 on and beyond the borders (PyTorch's)."""
    return where((c > 0) & (c < size - 1), c, c.detach().clamp(0, size - 1))


def _reflect(c: Tensor, lo2: int, hi2: int) -> Tensor:
    """c reflected off the borders lo2/2 and hi2/2 until inside (derivative ±1, the sign of the last flip)."""
    if lo2 == hi2:
        return c * 0
    low, span = lo2 / 2, (hi2 - lo2) / 2
    d = c - low
    a = where(d < 0, -d, d)
    extra = a.fmod(span)
    even = ((a.detach() / span).floor().fmod(2) == 0)
    return where(even, extra + low, span - extra + low)


def _pad_coord(c: Tensor, size: int, padding_mode: str, align_corners: bool) -> Tensor:
    if padding_mode == "border":
        return _clip(c, size)
    if padding_mode == "reflection":
        c = _reflect(c, 0, 2 * (size - 1)) if align_corners else _reflect(c, -1, 2 * size - 1)
        return _clip(c, size)
    return c


def _sample(x: Tensor, taps: list, sizes: tuple) -> Tensor:
    """Σ_k w_k · x[.., c_k] over taps [(c_k, w_k)]: c_k the integer coordinates (one (N, *out) tensor per spatial
    axis), w_k the (N, *out) weights; a tap outside the input reads 0. All taps are one gather (and so their
    gradient one scatter-add): values (N, C, K, *out) weighted and summed over K."""
    from .nn_spatial import PlaneGather
    flats, weights = [], []
    for coords, w in taps:
        inside = flat = None
        for c, n in zip(coords, sizes):
            ok = (c >= 0) & (c <= n - 1)
            inside = ok if inside is None else inside & ok
            ci = c.clamp(0, n - 1).long()
            flat = ci if flat is None else flat * n + ci
        flats.append(flat)
        weights.append(w * inside.to(w.dtype))
    vals = PlaneGather.apply(x, stack(flats, 1).unsqueeze(1))
    return (vals * stack(weights, 1).unsqueeze(1)).sum(2)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool | None = None) -> Tensor:
    """Sample input (N, C, H, W) at the grid's points (N, H_out, W_out, 2) (or (N, C, D, H, W) with (N, D_out, H_out,
    W_out, 3)): grid[..., 0] is x (the width coordinate), [..., 1] y, [..., 2] z, each in [-1, 1] across the input.

    mode 'bilinear' (trilinear for 5-D), 'nearest' (ties round to even) or 'bicubic' (4-D; A = -0.75);
    padding_mode for points outside: 'zeros', 'border' (clip the coordinate) or 'reflection' (reflect it
    off the borders). Differentiable in input and grid (nearest: a zero gradient to the grid)."""
    x = tensor_arg(input, "grid_sample", "input", 1)
    grid = tensor_arg(grid, "grid_sample", "grid", 2)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', 'nearest' or 'bicubic', but "
                         f"got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', 'border', or "
                         f"'reflection', but got: '{padding_mode}'")
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if x.ndim not in (4, 5) or grid.ndim != x.ndim:
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number of dimensions, but got "
                           f"input with sizes {list(x.shape)} and grid with sizes {list(grid.shape)}")
    nd = x.ndim - 2
    if grid.shape[0] != x.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, but got input with sizes "
                           f"{list(x.shape)} and grid with sizes {list(grid.shape)}")
    if grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {nd} in last dimension, but got grid with "
                           f"sizes {list(grid.shape)}")
    if any(v == 0 for v in x.shape[2:]):
        raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial dimensions, but input has sizes "
                           f"{list(x.shape)}")
    if mode == "bicubic" and nd != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")
    if not dt.is_float(x._data.dtype):
        raise NotImplementedError(f"grid_sample(): not implemented for {x.dtype} input; convert it with .float()")
    if grid._data.dtype != x._data.dtype:
        raise RuntimeError(f"grid_sample(): expected input ({x.dtype}) and grid ({grid.dtype}) to have the same dtype")
    sizes = tuple(x.shape[2:])
    # the pixel coordinate along each spatial axis (D, H, W order; the grid lists x = W first)
    coords = [_unnormalize(grid[..., nd - 1 - j], n, align_corners) for j, n in enumerate(sizes)]
    if mode == "bicubic":
        return _bicubic(x, coords, sizes, padding_mode, align_corners)
    coords = [_pad_coord(c, n, padding_mode, align_corners) for c, n in zip(coords, sizes)]
    if mode == "nearest":
        # (a weight of 1 with derivative 0: the grid gets PyTorch's zero gradient)
        return _sample(x, [([c.detach().round() for c in coords], coords[0] * 0 + 1)], sizes)
    floors = [c.detach().floor() for c in coords]
    fracs = [c - f for c, f in zip(coords, floors)]
    taps = []
    for corner in range(1 << nd):  # the 2^nd corners around each point: bit j picks ⌊c_j⌋ + 1 over ⌊c_j⌋
        bits = [(corner >> (nd - 1 - j)) & 1 for j in range(nd)]
        w = None
        for t, b in zip(fracs, bits):
            wj = t if b else 1 - t
            w = wj if w is None else w * wj
        taps.append(([f + b for f, b in zip(floors, bits)], w))
    return _sample(x, taps, sizes)


def _bicubic(x: Tensor, coords: list, sizes: tuple, padding_mode: str, align_corners: bool) -> Tensor:
    """Bicubic grid sampling: Keys' weights of the fractional parts over the 4 x 4 taps around ⌊c⌋; each tap's
    integer coordinate goes through the padding (clip or reflect), zeros padding dropping taps outside."""
    floors = [c.detach().floor() for c in coords]
    weights = []
    for c, f in zip(coords, floors):
        t = c - f
        a = _CUBIC_A
        near = [((a + 2) * u - (a + 3)) * u * u + 1 for u in (t, 1 - t)]
        far = [((a * u - 5 * a) * u + 8 * a) * u - 4 * a for u in (t + 1, 2 - t)]
        weights.append([far[0], near[0], near[1], far[1]])
    taps = []
    for i in range(4):
        for j in range(4):
            coords = []
            for f, off, n in zip(floors, (i - 1, j - 1), sizes):
                p = _pad_coord(f + off, n, padding_mode, align_corners)
                coords.append(p if padding_mode == "zeros" else p.detach().trunc())
            taps.append((coords, weights[0][i] * weights[1][j]))
    return _sample(x, taps, sizes)


# ---------------------------------------------------------------------- affine_grid
def _base_coords(n: int, align_corners: bool) -> np.ndarray:
    """The n sampling coordinates in [-1, 1] along an axis: the pixel centres (align_corners: the corner
    pixels at ±1, else scaled by (n-1)/n); 0 for n = 1."""
    if n <= 1:
        return np.zeros(n)
    c = np.linspace(-1, 1, n)
    return c if align_corners else c * (n - 1) / n


def affine_grid(theta: Tensor, size, align_corners: bool | None = None) -> Tensor:
    """The sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of the affine maps θ (N, 2, 3) (or (N, 3, 4)) for an
    output of `size` (N, C, H, W) (or (N, C, D, H, W)): grid[n, .., :] = θ[n] · (x, y, [z,] 1) over the base
    grid of pixel coordinates in [-1, 1] (see grid_sample)."""
    t = tensor_arg(theta, "affine_grid", "theta", 1)
    if align_corners is None:
        warnings.warn(_ALIGN_WARNING, stacklevel=2)
        align_corners = False
    if not dt.is_float(t._data.dtype):
        raise ValueError(f"affine_grid(): Expected theta to have floating point type, but got {t.dtype}")
    size = tuple(int(v) for v in size)
    if len(size) == 4:
        if t.ndim != 3 or tuple(t.shape[-2:]) != (2, 3):
            raise ValueError(f"affine_grid(): Expected a batch of 2D affine matrices of shape Nx2x3 for size {size}. "
                             f"Got {list(t.shape)}.")
    elif len(size) == 5:
        if t.ndim != 3 or tuple(t.shape[-2:]) != (3, 4):
            raise ValueError(f"affine_grid(): Expected a batch of 3D affine matrices of shape Nx3x4 for size {size}. "
                             f"Got {list(t.shape)}.")
    else:
        raise NotImplementedError(f"affine_grid(): only supports 4D and 5D sizes, for 2D and 3D affine transforms, "
                                  f"respectively. Got size {size}.")
    if min(size) <= 0:
        raise ValueError(f"affine_grid(): Expected non-zero, positive output size. Got {size}")
    if t.shape[0] != size[0]:
        raise RuntimeError(f"affine_grid(): theta holds {t.shape[0]} affine matrices but size asks for a batch of "
                           f"{size[0]}; they must agree")
    spatial = size[2:]
    if align_corners and max(spatial) == 1:
        warnings.warn("Since version 1.3.0, affine_grid behavior has changed for unit-size grids when "
                      "align_corners=True. This is not an intended use case of affine_grid. See the documentation of "
                      "affine_grid for details.", stacklevel=2)
    nd = len(spatial)
    # base[..., :] = (x, y, [z,] 1): the width coordinate first, as grid_sample reads it
    axes = [_base_coords(n, align_corners) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")
    base = np.stack([mesh[nd - 1 - j] for j in range(nd)] + [np.ones(spatial)], -1).reshape(-1, nd + 1)
    am = backend.array_module(t._data)
    base_t = constant(am.asarray(base.astype(t._data.dtype)))
    grid = base_t.matmul(t.transpose(1, 2))
    return View.apply(grid, (size[0],) + tuple(spatial) + (nd,))
