"""Thread-local grad mode: `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`.

Each op reads one flag, `MODE.grad`, to decide whether to record a graph node; the flag
lives on a `threading.local`, so grad mode is per thread as in PyTorch. The same object
carries the anomaly-detection flag so that recording an op reads a single object.
"""
from __future__ import annotations

import functools
import threading


class _Mode(threading.local):
    # True once a float16/bfloat16 dtype is in use (all threads): `dispatch` then computes their ops in float32
    lowp = False
    # `dispatch`'s one test for the rare modes: 16-bit floats in use, forward-mode AD levels, vmap or autocast.
    # A class attribute while only `lowp` (global) asks for it; a thread in forward AD or autocast sets its own
    # (`refresh`), so the hot path reads one attribute whatever is on.
    extra = False

    def __init__(self) -> None:  # runs once per thread: every thread starts with grad on
        self.grad = True
        self.anomaly = False
        self.fw = ()  # the forward-AD levels open in this thread, outermost first (ember.autograd.forward_ad)
        self.autocast = None  # this thread's autocast state while a region is open (ember.amp)
        self.vmap = 0  # how many vmap levels are open in this thread (ember.func.vmap)

    def refresh(self) -> None:
        """Recompute `extra` after a mode changed: this thread's own flag while it has forward-AD levels or
        autocast open, else the class's (which `lowp` sets for every thread)."""
        if self.fw or self.autocast is not None or self.vmap:
            self.extra = True
        else:
            self.__dict__.pop("extra", None)


MODE = _Mode()


def is_grad_enabled() -> bool:
    return MODE.grad


class _Switch:
    """Sets grad mode to `_enabled` inside a `with` block and restores it after;
    used as a decorator, it does so around every call of the function."""

    _enabled: bool

    def __enter__(self) -> None:
        self._prev = MODE.grad
        MODE.grad = self._enabled

    def __exit__(self, *exc) -> None:
        MODE.grad = self._prev

    def __call__(self, fn):
        enabled = self._enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = MODE.grad
            MODE.grad = enabled
            try:
                return fn(*args, **kwargs)
            finally:
                MODE.grad = prev
        return wrapper


class no_grad(_Switch):
    """Disable graph recording: results of ops do not require grad. `@no_grad` and `@no_grad()` both decorate."""

    _enabled = False

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        return self(orig_func) if callable(orig_func) else self


class enable_grad(no_grad):
    """Enable graph recording (e.g. inside a `no_grad` block)."""

    _enabled = True


class set_grad_enabled(_Switch):
    """Set grad mode to `mode`: at once when called, and restored at the end of a `with` block."""

    def __init__(self, mode: bool) -> None:
        self._enabled = bool(mode)
        self._prev = MODE.grad
        MODE.grad = self._enabled

    def __enter__(self) -> None:
        pass  # already set by __init__, so that a bare call works as in PyTorch

    def __call__(self, fn):
        MODE.grad = self._prev  # as a decorator it must not change the mode at definition time
        return super().__call__(fn)


class inference_mode(_Switch):
    """Like `no_grad` (ember keeps no separate inference tensors); `inference_mode(False)` changes nothing."""

    def __new__(cls, mode=True):
        self = super().__new__(cls)
        if callable(mode):
            self._enabled = False
            return self(mode)
        self._enabled = False if mode else MODE.grad
        return self

    def __init__(self, mode=True) -> None:
        pass

    def __enter__(self) -> None:
        self._prev = MODE.grad
        MODE.grad = self._enabled and MODE.grad
