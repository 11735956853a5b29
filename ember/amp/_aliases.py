"""PyTorch's deprecated per-device spellings of `ember.amp` (`torch.cpu.amp`, `torch.cuda.amp`): the same classes
with the device fixed, each use warning with PyTorch's FutureWarning."""
from __future__ import annotations

import warnings

from . import autocast_mode, grad_scaler


def deprecated(namespace: str, old: str, new: str) -> None:
    warnings.warn(f"`{namespace}.{old}(args...)` is deprecated. Please use `{new}` instead.", FutureWarning,
                  stacklevel=3)


def device_classes(device: str, default_dtype) -> tuple[type, type]:
    """`(autocast, GradScaler)` of `ember.<device>.amp`: ember.amp's with `device` fixed (and its default dtype)."""
    namespace = f"ember.{device}.amp"

    class autocast(autocast_mode.autocast):
        __doc__ = f"`ember.amp.autocast('{device}', ...)` (deprecated spelling; {default_dtype} by default)."

        def __init__(self, enabled: bool = True, dtype=default_dtype, cache_enabled: bool = True) -> None:
            deprecated(namespace, "autocast", f"ember.amp.autocast('{device}', args...)")
            super().__init__(device, enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)

    class GradScaler(grad_scaler.GradScaler):
        __doc__ = f"`ember.amp.GradScaler('{device}', ...)` (deprecated spelling)."

        def __init__(self, init_scale: float = 2.0 ** 16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                     growth_interval: int = 2000, enabled: bool = True) -> None:
            deprecated(namespace, "GradScaler", f"ember.amp.GradScaler('{device}', args...)")
            super().__init__(device, init_scale=init_scale, growth_factor=growth_factor,
                             backoff_factor=backoff_factor, growth_interval=growth_interval, enabled=enabled)

    for cls in (autocast, GradScaler):
        cls.__module__ = namespace
    return autocast, GradScaler
