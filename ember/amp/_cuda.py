"""`ember.cuda.amp`: PyTorch's deprecated `torch.cuda.amp` names, each `ember.amp`'s with device 'cuda' (and a
FutureWarning saying so). `ember/cuda.py` makes this module its `amp` attribute and `ember.cuda.amp` in
`sys.modules`, so that `from ember.cuda.amp import GradScaler` works as it does with torch."""
from __future__ import annotations

from typing import Callable

from .. import _dtype as dt
from . import autocast_mode
from ._aliases import deprecated, device_classes

__all__ = ["autocast", "custom_fwd", "custom_bwd", "GradScaler"]


autocast, GradScaler = device_classes("cuda", dt.float16)


def custom_fwd(fwd: Callable | None = None, *, cast_inputs=None) -> Callable:
    """`ember.amp.custom_fwd(..., device_type='cuda')` (deprecated spelling)."""
    deprecated("ember.cuda.amp", "custom_fwd", "ember.amp.custom_fwd(args..., device_type='cuda')")
    return autocast_mode.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable) -> Callable:
    """`ember.amp.custom_bwd(..., device_type='cuda')` (deprecated spelling)."""
    deprecated("ember.cuda.amp", "custom_bwd", "ember.amp.custom_bwd(args..., device_type='cuda')")
    return autocast_mode.custom_bwd(bwd, device_type="cuda")
