"""Devices and the array module behind a tensor.

A tensor's device is a function of its array's type: `numpy.ndarray` lives on the CPU.
Other array types (CuPy's, on CUDA) register themselves with `register_array_type`, so
the rest of ember asks this module rather than testing types itself.
"""
from __future__ import annotations

import contextlib
import os

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
                raise RuntimeError(f"device(): index given twice in {type!r} and index={index}")
            type, _, idx = type.partition(":")
            if not idx.isdigit():
                raise RuntimeError(f"device(): invalid device string {type + ':' + idx!r}; expected e.g. 'cuda:0'")
            index = int(idx)
        if type not in ("cpu", "cuda"):
            raise RuntimeError(f"device(): unknown device type {type!r}; expected 'cpu' or 'cuda'")
        if index is not None and index < 0:
            raise RuntimeError(f"device(): device index must be non-negative, got {index}")
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

    def __enter__(self) -> "device":
        """`with ember.device("cuda"):` makes this the default device of factory functions inside the block."""
        _DEVICE_STACK.append(DEFAULT[0])
        DEFAULT[0] = self
        return self

    def __exit__(self, *exc) -> None:
        DEFAULT[0] = _DEVICE_STACK.pop()


# the device that factory functions (zeros, tensor, randn, ...) use when given none: None means the CPU
# (`ember.set_default_device`, or a `with ember.device(...)` block)
DEFAULT: list = [None]
_DEVICE_STACK: list = []


def set_default_device(dev) -> None:
    """Make `dev` ("cpu", "cuda", "cuda:1", a device, or None for the CPU) the device of tensors made by factory
    functions without a `device` argument, as PyTorch's `torch.set_default_device`. Tensors made from other
    tensors (`zeros_like`, ops) stay on their input's device."""
    DEFAULT[0] = None if dev is None else device(dev) if not isinstance(dev, device) else dev


def get_default_device() -> device:
    """The device factory functions use when given none (`set_default_device`); `device(type='cpu')` by default."""
    d = DEFAULT[0]
    if d is None:
        return CPU
    return resolve(d) if d.type == "cuda" else d


CPU = device("cpu")
# array type -> (device of such an array or a callable giving it, array module)
_ARRAY_TYPES: dict = {np.ndarray: (CPU, np)}
_NULL = contextlib.nullcontext()
UNSET = object()
CUDA = UNSET  # the CudaBackend once looked for (None when there is no usable GPU); see cuda_backend()
_cuda_why = ""  # why there is no CUDA backend, for the error message
RESET_HOOKS: list = []  # called when the CUDA backend is installed or forgotten (per-device caches drop)


def register_array_type(array_type: type, device_of, module) -> None:
    """Teach ember a new array type: `device_of(array) -> device` (or a fixed device) and its array module."""
    _ARRAY_TYPES[array_type] = (device_of, module)


def device_of(array) -> device:
    try:
        dev, _ = _ARRAY_TYPES[type(array)]
    except KeyError:
        if hasattr(array, "__cuda_array_interface__") and cuda_backend() is not None:
            dev, _ = _ARRAY_TYPES[type(array)]
        else:
            raise TypeError(f"ember cannot hold an array of type {type(array).__module__}.{type(array).__name__}") from None
    return dev if isinstance(dev, device) else dev(array)


def check_same_device(op: str, arrays) -> None:
    """Raise PyTorch's error when the arrays of one op live on different devices."""
    devs = {device_of(a) for a in arrays if type(a) in _ARRAY_TYPES}
    if len(devs) > 1:
        names = sorted(str(d) for d in devs)
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{names[0]} and {names[1]}! (when checking arguments for {op}); move them with .to(device)")


def array_module(array):
    """The NumPy-compatible module (numpy or cupy) that owns `array`: ops call `xp = array_module(x)`
    and then `xp.zeros(...)`, `xp.matmul(...)`, so one implementation serves both devices."""
    try:
        return _ARRAY_TYPES[type(array)][1]
    except KeyError:
        device_of(array)  # registers CuPy's type, or raises the clear error
        return _ARRAY_TYPES[type(array)][1]


def all_values(a):
    """The array to check the values of `a` on, for the ops' range checks: `a` itself, or inside vmap, where `a`
    may be a batched stand-in (ember/func/_batching.py), the array of every example's values (its `phys`, down
    to the real array), which are checked all at once."""
    while a.__class__ is not np.ndarray and hasattr(a, "phys"):
        a = a.phys
    return a


def index_bounds(a) -> tuple[int, int]:
    """The smallest and largest value of a non-empty integer index array (of every example inside vmap)."""
    a = all_values(a)
    return int(a.min()), int(a.max())


def cuda_backend():
    """The CUDA backend (CuPy with at least one GPU), imported on first use; None without one."""
    global CUDA, _cuda_why
    if CUDA is UNSET:
        CUDA = None
        if os.environ.get("EMBER_DISABLE_CUDA", "").strip() not in ("", "0"):
            _cuda_why = "CUDA is disabled by EMBER_DISABLE_CUDA"
            return None
        try:
            import cupy
            import cupyx
        except ImportError as e:
            _cuda_why = (f"CuPy is not installed ({e}); install the 'gpu' extra: pip install 'ember[gpu]' "
                         "plus the cupy-cuda12x or cupy-cuda13x wheel matching your CUDA driver")
            return None
        try:
            install_cuda(cupy, cupyx)
        except Exception as e:  # CuPy imports without a driver or a GPU; the first CUDA call says why
            CUDA = None
            _cuda_why = f"CuPy {cupy.__version__} is installed but no CUDA GPU can be used ({type(e).__name__}: {e})"
    return CUDA


def install_cuda(cp, cpx):
    """Make `cp` (CuPy, or a module with its interface) the CUDA array module; returns the backend.
    Raises when it reports no device."""
    global CUDA, _cuda_why
    from .cuda import CudaBackend
    old = CUDA if CUDA is not UNSET else None
    if old is not None:
        _ARRAY_TYPES.pop(old.ndarray, None)
    be = CudaBackend(cp, cpx)
    CUDA = be
    register_array_type(cp.ndarray, CUDA.device_of, cp)
    _cuda_why = ""
    for hook in RESET_HOOKS:
        hook()
    return be


def uninstall_cuda() -> None:
    """Forget the CUDA backend (tests); the next query looks for CuPy again."""
    global CUDA
    if CUDA is not UNSET and CUDA is not None:
        _ARRAY_TYPES.pop(CUDA.ndarray, None)
    CUDA = UNSET
    for hook in RESET_HOOKS:
        hook()


def require_cuda(dev: device | None = None):
    """The CUDA backend, or one clear RuntimeError saying why there is none (and the index checked)."""
    be = cuda_backend()
    if be is None:
        where = f"device {dev}" if dev is not None else "CUDA"
        raise RuntimeError(f"{where} is not available: {_cuda_why}. ember runs on the CPU without it "
                           "(ember.cuda.is_available() is False)")
    if dev is not None and dev.index is not None and not 0 <= dev.index < be.count:
        raise RuntimeError(f"CUDA error: invalid device ordinal: {dev} requested, but this machine has "
                           f"{be.count} CUDA device(s) (cuda:0{'' if be.count == 1 else f'..cuda:{be.count - 1}'})")
    return be


def resolve(dev) -> device:
    """A device with its index filled in: 'cuda' means the current CUDA device (checked to exist)."""
    dev = dev if isinstance(dev, device) else device(dev)
    if dev.type == "cpu":
        return CPU
    be = require_cuda(dev)
    return be.devices[be.current() if dev.index is None else dev.index]


def module_for(dev: device):
    """The array module that allocates on `dev`; a clear error for a device ember cannot use."""
    if dev.type == "cpu":
        return np
    return require_cuda(dev).cp


def on(dev: device):
    """A context manager under which the array module allocates on `dev` (CuPy's current device)."""
    if dev.type == "cpu":
        return _NULL
    return require_cuda(dev).use(dev.index)


def on_device_of(a):
    """A context making `a`'s device current, for allocations (CuPy allocates on the current device, not on
    the device of the arrays at hand); nothing to do for a NumPy array (or None)."""
    return _NULL if a.__class__ is np.ndarray or a is None else on(device_of(a))


def writable(a) -> bool:
    """Whether an op may write into array `a`. NumPy marks broadcast views read-only; CuPy has no such flag,
    so there a view in which several elements share one memory location (a zero stride) counts as read-only."""
    w = getattr(a.flags, "writeable", None)
    if w is not None:
        return w
    return all(st != 0 or n <= 1 for n, st in zip(a.shape, a.strides))


def transfer(array, dev: device, non_blocking: bool = False):
    """`array` copied to `dev` (the same array when it is already there)."""
    src = device_of(array)
    if src == dev:
        return array
    if dev.type == "cpu":
        return CUDA.download(array, non_blocking)
    be = require_cuda(dev)
    if src.type == "cpu":
        return be.upload(array, dev.index, non_blocking)
    return be.copy_between(array, dev.index)


def to_host(array) -> np.ndarray:
    """A NumPy array with `array`'s values: itself on the CPU, a copy from a device."""
    return array if type(array) is np.ndarray else transfer(array, CPU)
