"""Pinned (page-locked) host memory for batches: what `DataLoader(pin_memory=True)` hands out."""
from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from ..._tensor import Tensor
from ... import backend

__all__ = ["pin_memory", "can_pin"]


def can_pin(device: str = "") -> bool:
    """Whether batches can be pinned (a CUDA device exists); warns as PyTorch does when not."""
    if backend.cuda_backend() is not None:
        return True
    warnings.warn("'pin_memory' argument is set as true but no accelerator is found, then device pinned memory "
                  "won't be used.", UserWarning, stacklevel=5)
    return False


def pin_memory(data: Any) -> Any:
    """`data` with every CPU tensor in it (also inside tuples, lists, dicts, namedtuples) copied to pinned
    host memory, from which `.to('cuda', non_blocking=True)` copies asynchronously; other values as they are."""
    if isinstance(data, Tensor):
        return data.pin_memory() if data.device.type == "cpu" else data
    if isinstance(data, str | bytes):
        return data
    if isinstance(data, Mapping):
        pinned = {k: pin_memory(v) for k, v in data.items()}
        try:
            return type(data)(pinned)
        except TypeError:  # a mapping type that cannot be built from a dict
            return pinned
    if isinstance(data, tuple):
        if hasattr(data, "_fields"):  # a namedtuple
            return type(data)(*(pin_memory(v) for v in data))
        return tuple(pin_memory(v) for v in data)
    if isinstance(data, list):
        return [pin_memory(v) for v in data]
    return data
