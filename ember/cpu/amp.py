"""`ember.cpu.amp`: PyTorch's deprecated `torch.cpu.amp` names, each `ember.amp`'s with device 'cpu' (and a
FutureWarning saying so)."""
from __future__ import annotations

from .. import _dtype as dt
from ..amp._aliases import device_classes

__all__ = ["autocast", "GradScaler"]

autocast, GradScaler = device_classes("cpu", dt.bfloat16)
