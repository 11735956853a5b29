"""Pooling layers: MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, AdaptiveMaxPool2d (PyTorch's names, attributes and repr)."""
from __future__ import annotations

from ..._tensor import Tensor
from ...ops.nn_pool import adaptive_avg_pool2d, adaptive_max_pool2d, avg_pool2d, max_pool2d
from .module import Module

__all__ = ["MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d"]


class _Pool2d(Module):
    def _window(self, kernel_size, stride, padding) -> None:
        """The window attributes of MaxPool2d and AvgPool2d; stride defaults to kernel_size."""
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding

    def _shape_error(self, input) -> None:
        """Called when the functional op failed: name this layer if the input's rank is what is wrong."""
        if isinstance(input, Tensor) and input.ndim not in (3, 4):
            raise RuntimeError(f"{self._get_name()}({self.extra_repr()}): expected input of shape (N, C, H, W) or "
                               f"(C, H, W), got input of shape {list(input.shape)}") from None

    def forward(self, input: Tensor):
        try:
            return self._pool(input)
        except RuntimeError:
            self._shape_error(input)
            raise


class MaxPool2d(_Pool2d):
    """Maximum over kernel_size windows (see ember.nn.functional.max_pool2d); stride defaults to kernel_size."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self._window(kernel_size, stride, padding)
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def _pool(self, input: Tensor):
        return max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation, ceil_mode=self.ceil_mode,
                          return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class AvgPool2d(_Pool2d):
    """Mean over kernel_size windows (see ember.nn.functional.avg_pool2d); stride defaults to kernel_size."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True,
                 divisor_override: int | None = None) -> None:
        super().__init__()
        self._window(kernel_size, stride, padding)
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad
        self.divisor_override = divisor_override

    def _pool(self, input: Tensor) -> Tensor:
        return avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad,
                          self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(_Pool2d):
    """Average over adaptive bins giving output_size (int, pair; None keeps that input size)."""

    def __init__(self, output_size) -> None:
        super().__init__()
        self.output_size = output_size

    def _pool(self, input: Tensor) -> Tensor:
        return adaptive_avg_pool2d(input, self.output_size)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveMaxPool2d(_Pool2d):
    """Maximum over adaptive bins giving output_size; with return_indices also the flat in-plane indices."""

    def __init__(self, output_size, return_indices: bool = False) -> None:
        super().__init__()
        self.output_size = output_size
        self.return_indices = return_indices

    def _pool(self, input: Tensor):
        return adaptive_max_pool2d(input, self.output_size, self.return_indices)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"
