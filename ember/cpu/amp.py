"""`ember.cpu.amp`: PyTorch's deprecated `torch.cpu.amp` names, each `ember.amp`'s with device 'cpu' (and a
FutureWarning saying so)."""
from __future__ import annotations

import warnings

from .. import _dtype as dt
from ..amp import autocast_mode, grad_scaler

__all__ = ["autocast", "GradScaler"]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`ember.cpu.amp.{old}(args...)` is deprecated. Please use `{new}` instead.", FutureWarning,
                  stacklevel=3)


class autocast(autocast_mode.autocast):
    """`ember.amp.autocast('cpu', ...)` (deprecated spelling; bfloat16 by default)."""

    def __init__(self, enabled: bool = True, dtype=dt.bfloat16, cache_enabled: bool = True) -> None:
        _deprecated("autocast", "ember.amp.autocast('cpu', args...)")
        super().__init__("cpu", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """`ember.amp.GradScaler('cpu', ...)` (deprecated spelling)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        _deprecated("GradScaler", "ember.amp.GradScaler('cpu', args...)")
        super().__init__("cpu", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
