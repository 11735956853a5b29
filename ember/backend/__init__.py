"""Devices and the array module behind a tensor.

A tensor's device is a function of its array's type: `numpy.ndarray` lives on the CPU.
Other array types (CuPy's, on CUDA) register themselves with `register_array_type`, so
the rest of ember asks this module rather than testing types itself.
"""
from __future__ import annotations

import numpy as np


class device:
    """A device, as in PyTorch: `device("cpu")`, `device("cuda")`, `device("cuda:1")`, `device("cuda", 1)`."""

    __slots__ = ("type", "index")

    def __init__(self, type: "str | device", index: int | None = None) -> None:
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        if not isinstance(type, str):
            raise TypeError(f"device(): expected a string such as 'cpu' or 'cuda:0', got {type!r}")
        if ":" in type:
            if index is not None:
                raise ValueError(f"device(): index given twice in {type!r} and index={index}")
            type, _, idx = type.partition(":")
            if not idx.isdigit():
                raise ValueError(f"device(): invalid device string {type + ':' + idx!r}; expected e.g. 'cuda:0'")
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise ValueError(f"device(): unknown device type {type!r}; expected 'cpu' or 'cuda'")
        if index is not None and index < 0:
            raise ValueError(f"device(): device index must be non-negative, got {index}")
        self.type, self.index = type, index

    def __repr__(self) -> str:
        return f"device(type='{self.type}')" if self.index is None else f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            other = device(other)
        return isinstance(other, device) and self.type == other.type and self.index == other.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))


CPU = device("cpu")
# array type -> (device of such an array or a callable giving it, array module)
_ARRAY_TYPES: dict = {np.ndarray: (CPU, np)}


def register_array_type(array_type: type, device_of, module) -> None:
    """Teach ember a new array type: `device_of(array) -> device` (or a fixed device) and its array module."""
    _ARRAY_TYPES[array_type] = (device_of, module)


def device_of(array) -> device:
    dev, _ = _ARRAY_TYPES[type(array)]
    return dev if isinstance(dev, device) else dev(array)


def check_same_device(op: str, arrays) -> None:
    """Raise PyTorch's error when the arrays of one op live on different devices."""
    devs = {device_of(a) for a in arrays if type(a) in _ARRAY_TYPES}
    if len(devs) > 1:
        names = sorted(str(d) for d in devs)
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{names[0]} and {names[1]}! (when checking arguments for {op}); move them with .to(device)")


def array_module(array):
    """The NumPy-compatible module (numpy or cupy) that owns `array`."""
    return _ARRAY_TYPES[type(array)][1]


def module_for(dev: device):
    """The array module that allocates on `dev`; a clear error for a device ember cannot use."""
    if dev.type == "cpu":
        return np
    for dev_of, mod in _ARRAY_TYPES.values():
        if mod is not np and getattr(mod, "_ember_device_type", None) == dev.type:
            return mod
    raise RuntimeError(
        f"device {dev} is not available: this ember install has no {dev.type} backend "
        "(install the 'gpu' extra with a CuPy build for your CUDA and run on a machine with an NVIDIA GPU)")
