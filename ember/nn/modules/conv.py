"""Convolution layers: Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d (PyTorch's names, parameters, init and repr)."""
from __future__ import annotations

from ..._tensor import Tensor
from ...ops.nn_conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d
from ...ops.nn_pad import pad
from .. import init
from .linear import register_weight_and_bias
from .module import Module

__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ntuple(v, n: int) -> tuple:
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    """Shared constructor, init, repr and error naming of the convolution layers.

    weight: (out_channels, in_channels/groups, *kernel_size), or (in_channels, out_channels/groups, *kernel_size)
    when transposed; weight and bias ~ U(±1/√fan_in) (kaiming_uniform_ with a=√5), as PyTorch."""

    _nd = 2
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding, dilation, output_padding,
                 groups: int, bias: bool, padding_mode: str, device=None, dtype=None) -> None:
        super().__init__()
        n = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        stride, dilation = _ntuple(stride, n), _ntuple(dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'same', 'valid'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _ntuple(padding, n)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = _ntuple(kernel_size, n)
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = self._transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad's argument for the non-zero padding modes: last dim first, (before, after) each
        if padding == "valid":
            self._reversed_padding_repeated_twice = [0, 0] * n
        elif padding == "same":
            self._reversed_padding_repeated_twice = []
            for d, k in zip(reversed(dilation), reversed(self.kernel_size)):
                total = d * (k - 1)
                self._reversed_padding_repeated_twice += [total // 2, total - total // 2]
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(padding) for _ in range(2)]
        shape = ((in_channels, out_channels // groups) if self._transposed else
                 (out_channels, in_channels // groups)) + self.kernel_size
        register_weight_and_bias(self, shape, out_channels if bias else None, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        init._default_layer_init_(self.weight, self.bias)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * len(self.padding):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _shape_error(self, input) -> None:
        """Called when the functional op failed: name this layer if the input's shape is what is wrong."""
        n = self._nd
        if not isinstance(input, Tensor):
            return
        if input.ndim not in (n + 1, n + 2) or input.shape[-n - 1] != self.in_channels:
            spatial = "H, W" if n == 2 else "L"
            raise RuntimeError(f"{self._get_name()}({self.extra_repr()}): expected input of shape "
                               f"(N, {self.in_channels}, {spatial}) or ({self.in_channels}, {spatial}) "
                               f"(in_channels={self.in_channels}), got input of shape {list(input.shape)}") from None


class _Conv(_ConvNd):
    _fn = staticmethod(conv2d)

    def forward(self, input: Tensor) -> Tensor:
        try:
            if self.padding_mode != "zeros":
                return self._fn(pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), self.weight,
                                self.bias, self.stride, 0, self.dilation, self.groups)
            return self._fn(input, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
        except (RuntimeError, NotImplementedError):
            self._shape_error(input)
            raise


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L) or (C_in, L): see ember.nn.functional.conv1d."""

    _nd = 1
    _fn = staticmethod(conv1d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0, groups, bias,
                         padding_mode, device, dtype)


class Conv2d(_Conv):
    """2-D convolution over (N, C_in, H, W) or (C_in, H, W): see ember.nn.functional.conv2d. padding may be an int,
    a pair, 'valid' or 'same'; padding_mode 'zeros', 'reflect', 'replicate' or 'circular'."""

    _nd = 2
    _fn = staticmethod(conv2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, 0, groups, bias,
                         padding_mode, device, dtype)


class _ConvTranspose(_ConvNd):
    _transposed = True
    _fn = staticmethod(conv_transpose2d)

    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                 dilation, padding_mode, device, dtype) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple, got {padding!r}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, output_padding, groups,
                         bias, padding_mode, device, dtype)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        """output_padding that makes the result output_size (PyTorch's rule; None keeps self.output_padding)."""
        if output_size is None:
            return self.output_padding
        n = self._nd
        size = tuple(output_size)
        if len(size) == input.ndim:
            size = size[-n:]
        if len(size) != n:
            raise ValueError(f"{self._get_name()}: for {input.ndim}D input, output_size must have {n} or {input.ndim} "
                             f"elements (got {len(size)})")
        lo = [(input.shape[-n + i] - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] *
              (self.kernel_size[i] - 1) + 1 for i in range(n)]
        hi = [m + s - 1 for m, s in zip(lo, self.stride)]
        if any(not m <= s <= M for s, m, M in zip(size, lo, hi)):
            raise ValueError(f"requested an output size of {list(size)}, but valid sizes range from {lo} to {hi} "
                             f"(for an input of {list(input.shape[-n:])})")
        return tuple(s - m for s, m in zip(size, lo))

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        try:
            return self._fn(input, self.weight, self.bias, self.stride, self.padding,
                            self._output_padding(input, output_size), self.groups, self.dilation)
        except RuntimeError:
            self._shape_error(input)
            raise


class ConvTranspose1d(_ConvTranspose):
    """1-D transposed convolution over (N, C_in, L) or (C_in, L): see ember.nn.functional.conv_transpose1d."""

    _nd = 1
    _fn = staticmethod(conv_transpose1d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                         dilation, padding_mode, device, dtype)


class ConvTranspose2d(_ConvTranspose):
    """2-D transposed convolution over (N, C_in, H, W) or (C_in, H, W): see ember.nn.functional.conv_transpose2d;
    forward(input, output_size) picks the output_padding that gives output_size."""

    _nd = 2
    _fn = staticmethod(conv_transpose2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, groups, bias,
                         dilation, padding_mode, device, dtype)
