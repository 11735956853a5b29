"""Flatten and Unflatten: reshape a range of dimensions (PyTorch's `torch.nn.Flatten` / `Unflatten`)."""
from __future__ import annotations

from ..._tensor import Tensor
from ...ops.shape import flatten, unflatten
from .module import Module

__all__ = ["Flatten", "Unflatten"]


def _named(m: Module, e: Exception, input) -> Exception:
    """e, of the same type, with the layer and the input's shape named."""
    shape = list(input.shape) if isinstance(input, Tensor) else type(input).__name__
    return type(e)(f"{m._get_name()}({m.extra_repr()}): {e} (input of shape {shape})")


class Flatten(Module):
    """Flattens dims start_dim..end_dim into one (by default everything but the batch dimension)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input: Tensor) -> Tensor:
        try:
            return flatten(input, self.start_dim, self.end_dim)
        except (RuntimeError, IndexError) as e:
            raise _named(self, e, input) from None

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Expands dimension `dim` into `unflattened_size` (a tuple or list of ints; one may be -1)."""

    def __init__(self, dim: int, unflattened_size) -> None:
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError(f"unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for i, s in enumerate(unflattened_size):
            if not isinstance(s, int) or isinstance(s, bool):
                raise TypeError(f"unflattened_size must be tuple of ints, but found element of type {type(s).__name__} "
                                f"at pos {i}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input: Tensor) -> Tensor:
        try:
            return unflatten(input, self.dim, self.unflattened_size)
        except (RuntimeError, IndexError) as e:
            raise _named(self, e, input) from None

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
