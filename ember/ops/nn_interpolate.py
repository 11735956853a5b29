"""interpolate: resizing the spatial dims by nearest-neighbour or (bi)linear sampling.

Each resized axis is an index gather (nearest) or two gathers blended by the linear weights
(y = x[i0]·(1 - λ) + x[i1]·λ), so the gradient is the gathers' scatter-add; bilinear is linear
along H, then along W. Source coordinates follow PyTorch's (align_corners, scale_factor).
"""
from __future__ import annotations

import math

import numpy as np

from .. import backend
from .._tensor import Tensor, constant, make
from .indexing import IndexSelect
from .nn_args import ntuple, tensor_arg

__all__ = ["interpolate"]


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
    x = tensor_arg(input, "interpolate", "input", 1)
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
    if x._data.dtype.kind != "f" and linear:
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
    ftype = x._data.dtype if x._data.dtype.kind == "f" else np.dtype(np.float32)
    y = x
    am = backend.array_module(x._data)  # the source indices and weights are computed on the host, then moved
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
        w1 = constant(am.asarray(l1.reshape(shape)))
        w0 = constant(am.asarray((ftype.type(1) - l1).reshape(shape)))
        y = IndexSelect.apply(y, dim=ax, index=am.asarray(i0)) * w0 + IndexSelect.apply(y, dim=ax, index=am.asarray(i1)) * w1
    return y
