"""`ember.cuda.amp`: PyTorch's deprecated `torch.cuda.amp` names, each `ember.amp`'s with device 'cuda' (and a
FutureWarning saying so). `ember/cuda.py` makes this module its `amp` attribute and `ember.cuda.amp` in
`sys.modules`, so that `from ember.cuda.amp import GradScaler` works as it does with torch."""
from __future__ import annotations

import warnings
from typing import Callable

from .. import _dtype as dt
from . import autocast_mode, grad_scaler

__all__ = ["autocast", "custom_fwd", "custom_bwd", "GradScaler"]


def _deprecated(old: str, new: str) -> None:
    warnings.warn(f"`ember.cuda.amp.{old}(args...)` is deprecated. Please use `{new}` instead.", FutureWarning,
                  stacklevel=3)


class autocast(autocast_mode.autocast):
    """`ember.amp.autocast('cuda', ...)` (deprecated spelling; float16 by default)."""

    def __init__(self, enabled: bool = True, dtype=dt.float16, cache_enabled: bool = True) -> None:
        _deprecated("autocast", "ember.amp.autocast('cuda', args...)")
        super().__init__("cuda", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """`ember.amp.GradScaler('cuda', ...)` (deprecated spelling)."""

    def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True) -> None:
        _deprecated("GradScaler", "ember.amp.GradScaler('cuda', args...)")
        super().__init__("cuda", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)


def custom_fwd(fwd: Callable | None = None, *, cast_inputs=None) -> Callable:
    """`ember.amp.custom_fwd(..., device_type='cuda')` (deprecated spelling)."""
    _deprecated("custom_fwd", "ember.amp.custom_fwd(args..., device_type='cuda')")
    return autocast_mode.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable) -> Callable:
    """`ember.amp.custom_bwd(..., device_type='cuda')` (deprecated spelling)."""
    _deprecated("custom_bwd", "ember.amp.custom_bwd(args..., device_type='cuda')")
    return autocast_mode.custom_bwd(bwd, device_type="cuda")
