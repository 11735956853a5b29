"""The spatial layers beyond the 2-D basics (PyTorch's names, attributes, defaults and repr): 1-D/3-D and power-average
pooling, max unpooling, fractional max pooling, Conv3d/ConvTranspose3d, BatchNorm3d, the padding layers, the
pixel/channel shuffles, Upsample and Fold/Unfold."""
from __future__ import annotations

from ..._tensor import Tensor
from ...ops.nn_fold import fold, unfold
from ...ops.nn_interpolate import interpolate
from ...ops.nn_pad import pad
from ...ops.nn_spatial import (adaptive_avg_pool1d, adaptive_avg_pool3d, adaptive_max_pool1d, adaptive_max_pool3d,
                               avg_pool1d, avg_pool3d, channel_shuffle, conv3d, conv_transpose3d, fractional_max_pool2d,
                               lp_pool1d, lp_pool2d, lp_pool3d, max_pool1d, max_pool3d, max_unpool1d, max_unpool2d,
                               max_unpool3d, pixel_shuffle, pixel_unshuffle)
from .conv import _Conv, _ConvTranspose
from .module import Module
from .normalization import _BatchNorm

__all__ = ["AvgPool1d", "AvgPool3d", "MaxPool1d", "MaxPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool3d",
           "AdaptiveMaxPool1d", "AdaptiveMaxPool3d", "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool1d", "MaxUnpool2d",
           "MaxUnpool3d", "FractionalMaxPool2d", "Conv3d", "ConvTranspose3d", "BatchNorm3d", "ConstantPad1d",
           "ConstantPad2d", "ConstantPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
           "CircularPad1d", "CircularPad2d", "CircularPad3d", "PixelShuffle", "PixelUnshuffle", "ChannelShuffle",
           "Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d", "Fold", "Unfold"]


def _ntuple(v, n: int) -> tuple:
    """PyTorch's _single/_pair/_triple: a sequence as a tuple, anything else repeated n times."""
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


# ---------------------------------------------------------------------- pooling
class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """Maximum over windows of (N, C, L) or (C, L): see ember.nn.functional.max_pool1d."""

    def forward(self, input: Tensor):
        return max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation, ceil_mode=self.ceil_mode,
                          return_indices=self.return_indices)


class MaxPool3d(_MaxPoolNd):
    """Maximum over windows of (N, C, D, H, W) or (C, D, H, W): see ember.nn.functional.max_pool3d."""

    def forward(self, input: Tensor):
        return max_pool3d(input, self.kernel_size, self.stride, self.padding, self.dilation, ceil_mode=self.ceil_mode,
                          return_indices=self.return_indices)


class AvgPool1d(Module):
    """Mean over windows of (N, C, L) or (C, L): see ember.nn.functional.avg_pool1d."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, input: Tensor) -> Tensor:
        return avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool3d(Module):
    """Mean over windows of (N, C, D, H, W) or (C, D, H, W): see ember.nn.functional.avg_pool3d."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return avg_pool3d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                          self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Average over adaptive bins giving output_size: see ember.nn.functional.adaptive_avg_pool1d."""

    def forward(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool1d(input, self.output_size)


class AdaptiveAvgPool3d(_AdaptivePool):
    """Average over adaptive bins giving output_size (an int or a triple; None keeps that input size)."""

    def forward(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool3d(input, self.output_size)


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    """Maximum over adaptive bins giving output_size; with return_indices also the indices."""

    def forward(self, input: Tensor):
        return adaptive_max_pool1d(input, self.output_size, self.return_indices)


class AdaptiveMaxPool3d(_AdaptiveMaxPool):
    """Maximum over adaptive bins giving output_size (an int or a triple; None keeps that input size)."""

    def forward(self, input: Tensor):
        return adaptive_max_pool3d(input, self.output_size, self.return_indices)


class _LPPoolNd(Module):
    _fn = None

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return type(self)._fn(input, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """Power-average pooling (Σ_window x^p)^(1/p) over windows of (N, C, L) or (C, L)."""

    _fn = staticmethod(lp_pool1d)


class LPPool2d(_LPPoolNd):
    """Power-average pooling (Σ_window x^p)^(1/p) over windows of (N, C, H, W) or (C, H, W)."""

    _fn = staticmethod(lp_pool2d)


class LPPool3d(_LPPoolNd):
    """Power-average pooling (Σ_window x^p)^(1/p) over windows of (N, C, D, H, W) or (C, D, H, W)."""

    _fn = staticmethod(lp_pool3d)


class _MaxUnpoolNd(Module):
    _nd = 2
    _fn = None

    def __init__(self, kernel_size, stride=None, padding=0) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, self._nd)
        self.stride = _ntuple(stride if stride is not None else kernel_size, self._nd)
        self.padding = _ntuple(padding, self._nd)

    def forward(self, input: Tensor, indices: Tensor, output_size=None) -> Tensor:
        return type(self)._fn(input, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The partial inverse of MaxPool1d: see ember.nn.functional.max_unpool1d."""

    _nd = 1
    _fn = staticmethod(max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """The partial inverse of MaxPool2d: see ember.nn.functional.max_unpool2d."""

    _nd = 2
    _fn = staticmethod(max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """The partial inverse of MaxPool3d: see ember.nn.functional.max_unpool3d."""

    _nd = 3
    _fn = staticmethod(max_unpool3d)


class FractionalMaxPool2d(Module):
    """Fractional max pooling over kernel_size windows at pseudo-random starts, giving output_size or
    ⌊input size · output_ratio⌋: see ember.nn.functional.fractional_max_pool2d. _random_samples (a buffer when
    given) fixes the window starts."""

    def __init__(self, kernel_size, output_size=None, output_ratio=None, return_indices: bool = False,
                 _random_samples=None) -> None:
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 2)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _ntuple(output_size, 2) if output_size is not None else None
        self.output_ratio = _ntuple(output_ratio, 2) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise ValueError("FractionalMaxPool2d requires specifying either an output size, or a pooling ratio")
        if output_size is not None and output_ratio is not None:
            raise ValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise ValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor):
        return fractional_max_pool2d(input, self.kernel_size, self.output_size, self.output_ratio, self.return_indices,
                                     _random_samples=self._random_samples)


# ---------------------------------------------------------------------- 3-D convolution and batch norm
def _shape_error_3d(layer, input) -> None:
    """Called when the functional op failed: name the layer if the input's shape is what is wrong."""
    if isinstance(input, Tensor) and (input.ndim not in (4, 5) or input.shape[-4] != layer.in_channels):
        raise RuntimeError(f"{layer._get_name()}({layer.extra_repr()}): expected input of shape "
                           f"(N, {layer.in_channels}, D, H, W) or ({layer.in_channels}, D, H, W) "
                           f"(in_channels={layer.in_channels}), got input of shape {list(input.shape)}") from None


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W) or (C_in, D, H, W): see ember.nn.functional.conv3d. padding may be an
    int, a triple, 'valid' or 'same'; padding_mode 'zeros', 'reflect', 'replicate' or 'circular'."""

    _nd = 3
    _fn = staticmethod(conv3d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0, groups, bias,
                         padding_mode, device, dtype)

    _shape_error = _shape_error_3d


class ConvTranspose3d(_ConvTranspose):
    """3-D transposed convolution over (N, C_in, D, H, W) or (C_in, D, H, W): see
    ember.nn.functional.conv_transpose3d; forward(input, output_size) picks the output_padding giving output_size."""

    _nd = 3
    _fn = staticmethod(conv_transpose3d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                         dilation, padding_mode, device, dtype)

    _shape_error = _shape_error_3d


class BatchNorm3d(_BatchNorm):
    """Batch normalisation of (N, C, D, H, W) input over N, D, H and W, per channel C."""

    _dims, _dims_text = (5,), "5D"


# ---------------------------------------------------------------------- padding
class _PadNd(Module):
    """Pads the last dims with F.pad in `_mode`; padding (an int for every side, or a tuple (last_before,
    last_after, ...)) is kept as a tuple."""

    _nd = 1
    _mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._nd)

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pads the last dim with `value`: padding an int or (left, right)."""

    _nd = 1


class ConstantPad2d(_ConstantPadNd):
    """Pads the last 2 dims with `value`: padding an int or (left, right, top, bottom)."""

    _nd = 2


class ConstantPad3d(_ConstantPadNd):
    """Pads the last 3 dims with `value`: padding an int or (left, right, top, bottom, front, back)."""

    _nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    """Pads the last dim with zeros: padding an int or (left, right)."""

    _nd = 1


class ZeroPad2d(_ZeroPadNd):
    """Pads the last 2 dims with zeros: padding an int or (left, right, top, bottom)."""

    _nd = 2


class ZeroPad3d(_ZeroPadNd):
    """Pads the last 3 dims with zeros: padding an int or (left, right, top, bottom, front, back)."""

    _nd = 3


class ReflectionPad1d(_PadNd):
    """Pads the last dim of (N, C, L) or (C, L) with its reflection (the edge not repeated)."""

    _nd, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pads the last 2 dims of (N, C, H, W) or (C, H, W) with their reflection (the edge not repeated)."""

    _nd, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pads the last 3 dims of (N, C, D, H, W) or (C, D, H, W) with their reflection (the edge not repeated)."""

    _nd, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pads the last dim of (N, C, L) or (C, L) by repeating its edge values."""

    _nd, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pads the last 2 dims of (N, C, H, W) or (C, H, W) by repeating their edge values."""

    _nd, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pads the last 3 dims of (N, C, D, H, W) or (C, D, H, W) by repeating their edge values."""

    _nd, _mode = 3, "replicate"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input: Tensor) -> Tensor:
        if isinstance(input, Tensor) and input.dim() not in (self._nd + 1, self._nd + 2):
            raise ValueError(f"{self._get_name()}: expected {self._nd + 1}D or {self._nd + 2}D input (got "
                             f"{input.dim()}D input of shape {list(input.shape)})")
        return pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pads the last dim of (N, C, L) or (C, L) by wrapping around (periodic padding)."""

    _nd = 1


class CircularPad2d(_CircularPadNd):
    """Pads the last 2 dims of (N, C, H, W) or (C, H, W) by wrapping around (periodic padding)."""

    _nd = 2


class CircularPad3d(_CircularPadNd):
    """Pads the last 3 dims of (N, C, D, H, W) or (C, D, H, W) by wrapping around (periodic padding)."""

    _nd = 3


# ---------------------------------------------------------------------- shuffles
class PixelShuffle(Module):
    """(*, C·r², H, W) -> (*, C, H·r, W·r): see ember.nn.functional.pixel_shuffle."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    """(*, C, H·r, W·r) -> (*, C·r², H, W): see ember.nn.functional.pixel_unshuffle."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input: Tensor) -> Tensor:
        return pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


class ChannelShuffle(Module):
    """Interleaves the channels of (N, C, *) across `groups` groups: see ember.nn.functional.channel_shuffle."""

    def __init__(self, groups: int) -> None:
        super().__init__()
        self.groups = groups

    def forward(self, input: Tensor) -> Tensor:
        return channel_shuffle(input, self.groups)

    def extra_repr(self) -> str:
        return f"groups={self.groups}"


# ---------------------------------------------------------------------- upsampling
class Upsample(Module):
    """Resizes (N, C, L), (N, C, H, W) or (N, C, D, H, W) to `size` or by `scale_factor` with `mode`: see
    ember.nn.functional.interpolate."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        if isinstance(scale_factor, tuple):
            self.scale_factor = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                           recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self) -> str:
        info = f"scale_factor={self.scale_factor!r}" if self.scale_factor is not None else f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of (N, C, H, W): Upsample with mode='nearest'."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of (N, C, H, W) with align_corners=True: Upsample with mode='bilinear'."""

    def __init__(self, size=None, scale_factor=None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------------- fold / unfold
class Fold(Module):
    """Sums sliding local blocks (N, C·∏kernel_size, L) into an (N, C, *output_size) image: see
    ember.nn.functional.fold."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(Module):
    """Extracts sliding local blocks of (N, C, H, W) as columns (N, C·∏kernel_size, L): see
    ember.nn.functional.unfold."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def forward(self, input: Tensor) -> Tensor:
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
                f"stride={self.stride}")
