"""Normalisation layers: BatchNorm1d, BatchNorm2d, LayerNorm, GroupNorm (PyTorch's names, buffers and defaults)."""
from __future__ import annotations

import numbers

from ..._creation import empty, ones, tensor, zeros
from ..._dtype import long
from ..._tensor import Tensor, bump_version
from ...autograd.grad_mode import no_grad
from ...ops.nn_norm import batch_norm, group_norm, layer_norm
from .. import init
from ..parameter import Parameter
from .module import Module

__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm"]


def _register_affine(m: Module, affine: bool, bias: bool, shape, dtype, device) -> None:
    """Register m.weight (γ) and m.bias (β) of `shape`, or None for those that are off (affine=False: both)."""
    m.register_parameter("weight", Parameter(empty(shape, dtype=dtype, device=device)) if affine else None)
    m.register_parameter("bias", Parameter(empty(shape, dtype=dtype, device=device)) if affine and bias else None)


def _reset_affine(m: Module, affine: bool) -> None:
    """γ = 1, β = 0: the normalisation starts as the identity on the normalised values."""
    if affine:
        init.ones_(m.weight)
        if m.bias is not None:
            init.zeros_(m.bias)


class _BatchNorm(Module):
    """Batch normalisation over dim 1 (channels) with learnable γ (weight), β (bias) and running statistics.

    Training: normalise with the batch's mean and biased variance and update the buffers running_mean and
    running_var (unbiased variance) with `momentum` (None: a cumulative average over the batches seen, counted
    in num_batches_tracked). Eval: normalise with the running statistics (with track_running_stats=False,
    always the batch's)."""

    _optional_state_keys = ("num_batches_tracked",)  # absent from old PyTorch checkpoints
    _dims: tuple = ()
    _dims_text = ""

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _register_affine(self, affine, bias, num_features, dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, dtype=dtype, device=device))
            self.register_buffer("running_var", ones(num_features, dtype=dtype, device=device))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=long, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self, self.affine)

    def _check_input_dim(self, input: Tensor) -> None:
        if not isinstance(input, Tensor):
            raise TypeError(f"{self._get_name()}: expected a Tensor input, got {type(input).__name__}")
        if input.dim() not in self._dims:
            raise ValueError(f"{self._get_name()}({self.num_features}): expected {self._dims_text} input "
                             f"(got {input.dim()}D input of shape {list(input.shape)})")
        if input.shape[1] != self.num_features:
            raise RuntimeError(f"{self._get_name()}({self.num_features}): expected input with {self.num_features} "
                               f"channels (num_features) in dimension 1, got input of shape {list(input.shape)}")

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            n = self.num_batches_tracked
            with no_grad():
                n.add_(1)
            factor = 1.0 / n.item() if self.momentum is None else self.momentum  # (a value read: a compile break)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        track = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if track else None, self.running_var if track else None,
                          self.weight, self.bias, use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) input over N (and L), per channel C."""

    _dims, _dims_text = (2, 3), "2D or 3D"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) input over N, H and W, per channel C."""

    _dims, _dims_text = (4,), "4D"


class LayerNorm(Module):
    """Normalises each sample over its last dims (normalized_shape), then applies per-element γ (weight, ones)
    and β (bias, zeros) when elementwise_affine."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _register_affine(self, elementwise_affine, bias, self.normalized_shape, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self, self.elementwise_affine)

    def forward(self, input: Tensor) -> Tensor:
        ns = self.normalized_shape
        if isinstance(input, Tensor) and tuple(input._data.shape[input._data.ndim - len(ns):]) != ns:
            raise RuntimeError(f"{self._get_name()}({self.extra_repr()}): expected input of shape "
                               f"[*, {', '.join(map(str, ns))}] (its last dims = normalized_shape), got input of shape "
                               f"{list(input.shape)}")
        return layer_norm(input, ns, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Splits the channels (dim 1) into num_groups groups and normalises each sample's group, then applies
    per-channel γ (weight, ones) and β (bias, zeros) when affine."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _register_affine(self, affine, bias, num_channels, dtype, device)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        _reset_affine(self, self.affine)

    def forward(self, input: Tensor) -> Tensor:
        if isinstance(input, Tensor) and (input.dim() < 2 or input.shape[1] != self.num_channels):
            raise RuntimeError(f"{self._get_name()}({self.extra_repr()}): expected input of shape (N, "
                               f"{self.num_channels}, *) (num_channels in dimension 1), got input of shape "
                               f"{list(input.shape)}")
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
