"""Dropout layers (PyTorch's `torch.nn.Dropout`, `Dropout2d`): active in training mode, the identity in eval mode."""
from __future__ import annotations

from ..._tensor import Tensor
from ...ops import nn_activation as F
from .module import Module

__all__ = ["Dropout", "Dropout2d"]


class _DropoutNd(Module):
    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}(): dropout probability p has to be between 0 and 1, but got p={p!r}")
        self.p = p
        self.inplace = inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) while training."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout(input, self.p, self.training, self.inplace)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels (input[n, c]) with probability p and scales the rest by 1/(1-p) while training.
    Input (N, C, H, W); a 3-d input is read as (N, C, L), as in PyTorch."""

    def forward(self, input: Tensor) -> Tensor:
        return F.dropout2d(input, self.p, self.training, self.inplace)
