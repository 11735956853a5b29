"""Image transforms with torchvision's names and semantics, on NumPy arrays and ember Tensors.

There is no PIL here: a NumPy array plays the part of a PIL image (H×W or H×W×C, usually uint8),
a Tensor is a C×H×W image or a batch (..., C, H, W) that is transformed as a whole. Geometric
transforms return the kind of image they were given; `ToTensor` turns an array into a Tensor.

Every random draw comes from ember's default generator, so `ember.manual_seed(s)` reproduces a
pipeline. Transforms never record autograd history: they work on the raw CPU arrays and return new
tensors that do not require grad, in the dtype they were given.
"""
from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any, Union

import numpy as np

from .. import _capture, _creation
from .. import _dtype as dt
from .. import backend
from .._tensor import Tensor, bump_version, make

__all__ = ["Compose", "ToTensor", "Normalize", "RandomCrop", "RandomHorizontalFlip", "RandomRotation", "Lambda",
           "InterpolationMode"]

Image = Union[np.ndarray, Tensor]


def _rng() -> np.random.Generator:
    # looked up at each draw: manual_seed replaces the default generator's NumPy generator
    return _creation.default_generator.np


def _as_planes(img: Image, who: str) -> tuple[np.ndarray, Callable[[np.ndarray], Image]]:
    """`img` as an array of shape (..., H, W), and a function turning such an array back into a
    new image of img's kind (a Tensor, or an H×W / H×W×C array) that shares no memory with `img`."""
    if isinstance(img, Tensor):
        if backend.device_of(img._data) != backend.CPU:
            raise TypeError(f"{who}: transforms run on CPU tensors, got one on {backend.device_of(img._data)}; "
                            f"move it with .cpu() first")
        if img._data.ndim < 2:
            raise ValueError(f"{who}: expected a tensor image of shape (..., H, W), got shape {tuple(img.shape)}")
        return img._data, lambda a: make(a.copy())
    if isinstance(img, np.ndarray):
        if img.ndim == 2:
            return img, np.copy
        if img.ndim == 3:  # H×W×C: channels first while transforming, last again after
            return np.moveaxis(img, -1, 0), lambda a: np.moveaxis(a, 0, -1).copy()
        raise ValueError(f"{who}: expected an image array of shape (H, W) or (H, W, C), got shape {img.shape}")
    raise TypeError(f"{who}: expected an ember Tensor (..., C, H, W) or a NumPy image array (H, W[, C]), "
                    f"got {type(img).__name__}")


def _fill_for(fill, planes: np.ndarray, who: str):
    """`fill` (a number, or one value per channel) broadcastable against `planes` (..., C, H, W)."""
    if isinstance(fill, numbers.Number):
        return fill
    values = np.asarray(fill, dtype=np.float64).reshape(-1)
    channels = planes.shape[-3] if planes.ndim >= 3 else 1
    if values.size not in (1, channels):
        raise ValueError(f"{who}: fill has {values.size} values but the image has {channels} channel(s); "
                         f"give one number or one value per channel")
    return values.reshape(-1, 1, 1) if values.size > 1 else values[0]


def _cast_like(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """Float results of resampling in `like`'s dtype: rounded and clipped for integer images."""
    if like.dtype.kind in "ui":
        info = np.iinfo(like.dtype)
        values = np.clip(np.rint(values), info.min, info.max)
    return values.astype(like.dtype, copy=False)


class Compose:
    """Apply `transforms` one after the other."""

    def __init__(self, transforms: Sequence[Callable[[Any], Any]]) -> None:
        self.transforms = transforms

    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

    def __repr__(self) -> str:
        return self.__class__.__name__ + "(" + "".join(f"\n    {t}" for t in self.transforms) + "\n)"


class ToTensor:
    """An image array (H×W×C or H×W) → a Tensor C×H×W. uint8 arrays are scaled to [0, 1] in the
    default float dtype; floating arrays keep their values and dtype (as torchvision)."""

    def __call__(self, pic: np.ndarray) -> Tensor:
        if not isinstance(pic, np.ndarray):
            raise TypeError(f"ToTensor: pic should be a NumPy ndarray of shape (H, W) or (H, W, C), "
                            f"got {type(pic).__name__}")
        if pic.ndim not in (2, 3):
            raise ValueError(f"ToTensor: pic should be 2/3 dimensional, got {pic.ndim} dimensions (shape {pic.shape})")
        chw = pic[None] if pic.ndim == 2 else pic.transpose(2, 0, 1)
        if pic.dtype == np.uint8:
            out = chw.astype(dt.NP_DEFAULT_FLOAT, order="C")
            np.divide(out, 255, out=out)  # division, not multiplication by 1/255: torchvision's exact values
            return make(out)
        if dt.is_float(pic.dtype):
            return make(np.array(chw, order="C"))
        raise TypeError(f"ToTensor: unsupported array dtype {pic.dtype}; give uint8 (scaled to [0, 1]) "
                        f"or a floating dtype (kept as is)")

    def __repr__(self) -> str:
        return "ToTensor()"


class Normalize:
    """`output[c] = (input[c] - mean[c]) / std[c]` on a float Tensor (..., C, H, W); `mean` and `std`
    hold one value per channel (or one for all). `inplace=True` overwrites the input."""

    def __init__(self, mean: Sequence[float], std: Sequence[float], inplace: bool = False) -> None:
        self.mean = mean
        self.std = std
        self.inplace = inplace

    def _stat(self, values, name: str, dtype: np.dtype, channels: int) -> np.ndarray:
        arr = np.asarray(values, dtype=dtype)
        if arr.ndim > 1 or arr.size not in (1, channels):
            raise ValueError(f"Normalize: {name} has {arr.size} values (shape {arr.shape}) but the tensor has "
                             f"{channels} channel(s) (dim -3); give one value per channel")
        return arr.reshape(-1, 1, 1)

    def __call__(self, tensor: Tensor) -> Tensor:
        if not isinstance(tensor, Tensor):
            raise TypeError(f"Normalize: img should be a Tensor image, got {type(tensor).__name__} "
                            f"(apply ToTensor first)")
        arr = tensor._data
        if not dt.is_float(arr.dtype):
            raise TypeError(f"Normalize: input tensor should be a float tensor, got {tensor.dtype}")
        if arr.ndim < 3:
            raise ValueError(f"Normalize: expected a tensor image of size (..., C, H, W), "
                             f"got size {tuple(tensor.shape)}")
        channels = arr.shape[-3]
        mean = self._stat(self.mean, "mean", arr.dtype, channels)
        std = self._stat(self.std, "std", arr.dtype, channels)
        if (std == 0).any():
            raise ValueError(f"Normalize: std {self.std} evaluated to zero after conversion to {tensor.dtype}, "
                             f"leading to division by zero")
        if not self.inplace:
            return make((arr - mean) / std)
        if tensor.requires_grad:
            raise RuntimeError("Normalize(inplace=True): the input requires grad; transforms do not record "
                               "autograd history, so normalize it out of place (inplace=False) or detach it")
        if _capture.ACTIVE is not None:
            _capture.writing(tensor)
            arr = tensor._data
        np.subtract(arr, mean, out=arr)
        np.divide(arr, std, out=arr)
        bump_version(tensor)
        return tensor

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(mean={self.mean}, std={self.std})"


def _setup_size(size, who: str) -> tuple[int, int]:
    if isinstance(size, numbers.Number):
        return int(size), int(size)
    if isinstance(size, Sequence) and len(size) == 1:
        return int(size[0]), int(size[0])
    if not isinstance(size, Sequence) or len(size) != 2:
        raise ValueError(f"{who}: size should be an int or a sequence (h, w), got {size!r}")
    return int(size[0]), int(size[1])


def _pad_planes(planes: np.ndarray, left: int, top: int, right: int, bottom: int, fill, mode: str) -> np.ndarray:
    if mode != "constant":
        widths = [(0, 0)] * (planes.ndim - 2) + [(top, bottom), (left, right)]
        return np.pad(planes, widths, mode=mode)
    h, w = planes.shape[-2:]
    out = np.empty(planes.shape[:-2] + (top + h + bottom, left + w + right), planes.dtype)
    out[...] = _fill_for(fill, planes, "RandomCrop")
    out[..., top:top + h, left:left + w] = planes
    return out


def _crop_params(image_size: tuple[int, int], output_size: tuple[int, int]) -> tuple[int, int, int, int]:
    h, w = image_size
    th, tw = output_size
    if h < th or w < tw:
        raise ValueError(f"RandomCrop: required crop size {(th, tw)} is larger than the input image size {(h, w)}; "
                         f"pass padding= or pad_if_needed=True")
    if (h, w) == (th, tw):
        return 0, 0, h, w
    g = _rng()
    i = int(g.integers(0, h - th + 1))
    j = int(g.integers(0, w - tw + 1))
    return i, j, th, tw


class RandomCrop:
    """Crop a random `size` (h, w) window, after optional `padding` (int; (left/right, top/bottom); or
    (left, top, right, bottom)) with `padding_mode` constant (value `fill`), edge, reflect or symmetric.
    `pad_if_needed` pads an image smaller than `size` first. The window's top row is drawn before its
    left column, each uniformly from ember's default generator."""

    def __init__(self, size, padding=None, pad_if_needed: bool = False, fill=0, padding_mode: str = "constant") -> None:
        self.size = _setup_size(size, "RandomCrop")
        if min(self.size) <= 0:
            raise ValueError(f"RandomCrop: size must be positive, got {self.size}")
        if padding is not None:
            if not isinstance(padding, (numbers.Number, tuple, list)):
                raise TypeError(f"RandomCrop: got inappropriate padding arg {padding!r} "
                                f"(an int or a tuple of 1, 2 or 4 ints)")
            pads = [padding] if isinstance(padding, numbers.Number) else list(padding)
            if len(pads) not in (1, 2, 4):
                raise ValueError(f"RandomCrop: padding must be an int or a 1, 2, or 4 element tuple, "
                                 f"not a {len(pads)} element tuple")
            if any(int(p) != p or p < 0 for p in pads):
                raise ValueError(f"RandomCrop: padding must hold non-negative ints, got {padding!r}")
        if not isinstance(fill, (numbers.Number, tuple, list)):
            raise TypeError(f"RandomCrop: got inappropriate fill arg {fill!r} (a number or one per channel)")
        if padding_mode not in ("constant", "edge", "reflect", "symmetric"):
            raise ValueError(f"RandomCrop: padding mode should be either constant, edge, reflect or symmetric, "
                             f"got {padding_mode!r}")
        self.padding = padding
        self.pad_if_needed = pad_if_needed
        self.fill = fill
        self.padding_mode = padding_mode

    @staticmethod
    def get_params(img: Image, output_size: tuple[int, int]) -> tuple[int, int, int, int]:
        """(top, left, height, width) of a random crop of `output_size` from `img`."""
        return _crop_params(_as_planes(img, "RandomCrop")[0].shape[-2:], output_size)

    def _pad(self, planes: np.ndarray, padding) -> np.ndarray:
        pads = [int(p) for p in ([padding] if isinstance(padding, numbers.Number) else padding)]
        if len(pads) == 1:
            pads *= 4
        elif len(pads) == 2:  # (left/right, top/bottom)
            pads *= 2
        left, top, right, bottom = pads
        return _pad_planes(planes, left, top, right, bottom, self.fill, self.padding_mode)

    def __call__(self, img: Image) -> Image:
        planes, back = _as_planes(img, "RandomCrop")
        if self.padding is not None:
            planes = self._pad(planes, self.padding)
        th, tw = self.size
        h, w = planes.shape[-2:]
        # torchvision pads both sides by the whole shortfall
        if self.pad_if_needed and w < tw:
            planes = self._pad(planes, (tw - w, 0))
        if self.pad_if_needed and h < th:
            planes = self._pad(planes, (0, th - h))
        i, j, th, tw = _crop_params(planes.shape[-2:], self.size)
        return back(planes[..., i:i + th, j:j + tw])

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(size={self.size}, padding={self.padding})"


class RandomHorizontalFlip:
    """Mirror the image left-right with probability `p` (one uniform draw per call)."""

    def __init__(self, p: float = 0.5) -> None:
        self.p = p

    def __call__(self, img: Image) -> Image:
        planes, back = _as_planes(img, "RandomHorizontalFlip")
        if _rng().random() < self.p:
            return back(planes[..., ::-1])
        return img

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(p={self.p})"


class InterpolationMode(enum.Enum):
    """Resampling of `RandomRotation` (torchvision's enum, with the modes ember implements)."""
    NEAREST = "nearest"
    BILINEAR = "bilinear"


def _rotate(planes: np.ndarray, angle: float, center, interpolation: InterpolationMode, fill) -> np.ndarray:
    """Rotate (..., H, W) counter-clockwise by `angle` degrees about `center` (x, y), where pixel (i, j)
    covers [j, j+1) × [i, i+1); points that fall outside the input take `fill`.

    Each output pixel centre is mapped back into the input by the inverse rotation and sampled there
    (as torchvision's tensor path with align_corners=False): in index coordinates around the pivot p,
    x_in = p_x + cos·dx − sin·dy and y_in = p_y + sin·dx + cos·dy, with y pointing down."""
    h, w = planes.shape[-2:]
    cx, cy = (w / 2, h / 2) if center is None else (float(center[0]), float(center[1]))
    px, py = cx - 0.5, cy - 0.5  # the pivot in pixel-index coordinates (pixel centres at integers)
    rad = math.radians(angle)
    cos, sin = math.cos(rad), math.sin(rad)
    dy, dx = np.mgrid[0:h, 0:w].astype(np.float64)
    dx -= px
    dy -= py
    xs = px + cos * dx - sin * dy
    ys = py + sin * dx + cos * dy
    fill = _fill_for(fill, planes, "RandomRotation")

    def sample(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
        inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
        values = planes[..., np.clip(yi, 0, h - 1), np.clip(xi, 0, w - 1)]
        return np.where(inside, values, fill)

    if interpolation is InterpolationMode.NEAREST:
        # rint rounds halves to even, as grid_sample's nearest mode does
        return _cast_like(sample(np.rint(ys).astype(np.intp), np.rint(xs).astype(np.intp)), planes)
    x0, y0 = np.floor(xs), np.floor(ys)
    wx, wy = xs - x0, ys - y0
    x0, y0 = x0.astype(np.intp), y0.astype(np.intp)
    out = ((1 - wy) * ((1 - wx) * sample(y0, x0) + wx * sample(y0, x0 + 1))
           + wy * ((1 - wx) * sample(y0 + 1, x0) + wx * sample(y0 + 1, x0 + 1)))
    return _cast_like(out, planes)


class RandomRotation:
    """Rotate by an angle drawn uniformly from `degrees` ((-d, d) for a number d, or (min, max));
    positive angles turn counter-clockwise, about `center` (x, y) or the image centre, resampling
    with `interpolation` (nearest or bilinear); uncovered pixels take `fill` (a number or one per channel)."""

    def __init__(self, degrees, interpolation: InterpolationMode | str = InterpolationMode.NEAREST,
                 expand: bool = False, center: Sequence[float] | None = None, fill=0) -> None:
        if isinstance(degrees, numbers.Number):
            if degrees < 0:
                raise ValueError(f"RandomRotation: if degrees is a single number, it must be positive, got {degrees}")
            degrees = [-degrees, degrees]
        elif not isinstance(degrees, Sequence) or len(degrees) != 2:
            raise ValueError(f"RandomRotation: degrees should be a number or a sequence of length 2, got {degrees!r}")
        self.degrees = [float(d) for d in degrees]
        try:
            self.interpolation = InterpolationMode(interpolation)
        except ValueError:
            raise ValueError(f"RandomRotation: interpolation {interpolation!r} is not supported; "
                             f"use {', '.join(repr(m.value) for m in InterpolationMode)}") from None
        if expand:
            raise NotImplementedError("RandomRotation: expand=True is not implemented; the output keeps the input size")
        if center is not None and (not isinstance(center, Sequence) or len(center) != 2):
            raise ValueError(f"RandomRotation: center should be a sequence of length 2 (x, y), got {center!r}")
        if not isinstance(fill, (numbers.Number, tuple, list)):
            raise TypeError(f"RandomRotation: fill should be a number or a sequence (one per channel), got {fill!r}")
        self.expand = expand
        self.center = center
        self.fill = fill

    @staticmethod
    def get_params(degrees: Sequence[float]) -> float:
        """An angle drawn uniformly from [degrees[0], degrees[1]]."""
        return float(_rng().uniform(degrees[0], degrees[1]))

    def __call__(self, img: Image) -> Image:
        planes, back = _as_planes(img, "RandomRotation")
        angle = self.get_params(self.degrees)
        return back(_rotate(planes, angle, self.center, self.interpolation, self.fill))

    def __repr__(self) -> str:
        s = (f"{self.__class__.__name__}(degrees={self.degrees}, interpolation={self.interpolation.value}, "
             f"expand={self.expand}")
        if self.center is not None:
            s += f", center={self.center}"
        return s + f", fill={self.fill})"


class Lambda:
    """Apply a user function as a transform."""

    def __init__(self, lambd: Callable[[Any], Any]) -> None:
        if not callable(lambd):
            raise TypeError(f"Lambda: argument lambd should be callable, got {type(lambd).__name__!r}")
        self.lambd = lambd

    def __call__(self, img):
        return self.lambd(img)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"
