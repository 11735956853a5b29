"""Gradient scaling (`ember.amp.GradScaler`, as `torch.amp.GradScaler`): loss scaling for float16 training.

Small gradients underflow in float16. `scale(loss)` multiplies the loss by a scale S (2¹⁶ at first), so backward
produces S·g; `step(optimizer)` divides the gradients by S (`unscale_`) and runs the optimizer step only if every
gradient is finite; `update()` then halves S after a step with inf/NaN gradients (×backoff_factor) and doubles it
after growth_interval consecutive clean steps (×growth_factor), so S settles near the largest scale that does not
overflow. S and the count of clean steps live in 0-d tensors on the loss's device (float32 and int32, as in
PyTorch); the inf/NaN test of a device's gradients is one 0-d tensor, read once per step.
"""
from __future__ import annotations

import warnings
from collections import abc, defaultdict
from enum import Enum
from typing import Any

import numpy as np

from .. import _capture
from .. import _dtype as dt
from .. import backend
from .._creation import full
from .._tensor import Tensor, bump_version, make
from ..ops.sparse_ops import SparseTensor

__all__ = ["OptState", "GradScaler"]


class OptState(Enum):
    """Where an optimizer is in the iteration: gradients as backward left them, unscaled, or stepped."""
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_state() -> dict[str, Any]:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scales the loss, unscales the gradients, skips steps whose gradients hold inf/NaN, and adapts the scale.

        scaler = ember.amp.GradScaler("cuda")
        for x, y in data:
            optimizer.zero_grad()
            with ember.autocast("cuda"):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)      # unscale_, then optimizer.step() unless a gradient is inf/NaN
            scaler.update()

    device: 'cuda' (default) or 'cpu'; a 'cuda' scaler without CUDA warns and disables itself. enabled=False makes
    every method a no-op except `step`, which just calls `optimizer.step()`."""

    def __init__(self, device: str = "cuda", init_scale: float = 2.0 ** 16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("ember.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", UserWarning,
                              stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: Tensor | None = None  # made on the device of the first scaled output
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: Tensor | None = None
            self._per_optimizer_states: dict[int, dict[str, Any]] = defaultdict(_fresh_state)

    def _check_scale_growth_tracker(self, funcname: str) -> tuple[Tensor, Tensor]:
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, dev) -> None:
        self._scale = full((), self._init_scale, dtype=dt.float32, device=dev)
        self._growth_tracker = full((), self._init_growth_tracker, dtype=dt.int32, device=dev)

    # ------------------------------------------------------------------ the iteration
    def scale(self, outputs):
        """outputs × the scale: a Tensor, or the tensors of a (nested) list/tuple/iterable, in the same structure.
        The outputs themselves when the scaler is disabled."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)
        per_device: dict = {}  # the scale on each device met (copied there once)

        def apply_scale(val):
            if isinstance(val, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(val.device)
                s = per_device.get(val.device)
                if s is None:
                    s = per_device[val.device] = self._scale.to(device=val.device)
                return val * s
            if isinstance(val, abc.Iterable):
                scaled = map(apply_scale, val)
                return type(val)(scaled) if isinstance(val, (list, tuple)) else scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")
        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: float) -> dict:
        """Multiply the optimizer's gradients by inv_scale in place; per device, a 0-d float32 tensor that is 1
        where some gradient held an inf or NaN (before scaling), else 0."""
        per_device: dict = defaultdict(list)
        for group in optimizer.param_groups:
            for p in group["params"]:
                if not isinstance(p, Tensor):
                    raise AssertionError(f"expected param to be a Tensor, got {type(p).__name__}")
                g = p.grad
                if g is None:
                    continue
                if g.dtype is dt.float16:
                    raise ValueError("Attempting to unscale FP16 gradients.")
                if g.__class__ is SparseTensor:
                    if g.dtype is dt.float16:  # duplicates are summed first: their sum may overflow where they did not
                        p.grad = g = g.coalesce()
                    per_device[g.device].append((g, g._data.values))
                else:
                    per_device[g.device].append((g, g._data))
        return {dev: _check_and_unscale_(grads, inv_scale) for dev, grads in per_device.items()}

    def unscale_(self, optimizer) -> None:
        """Divide the optimizer's gradients by the scale, in place (and note whether any holds inf/NaN). Optional:
        `step` unscales by itself; call it first to inspect or clip the true gradients. Once per optimizer per
        iteration (before `step`)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # 1/S in float64, rounded to float32 once (as PyTorch does)
        inv_scale = float(np.float32(1.0 / np.float64(self._scale.item())))
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale the optimizer's gradients (unless `unscale_` did) and run `optimizer.step(*args, **kwargs)` if
        they are all finite; returns what that step returns (None when skipped). A closure is not supported."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(v.item() for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapt the scale at the end of the iteration: ×backoff_factor if any optimizer met inf/NaN gradients
        (and the count of clean steps restarts), else count one more clean step and ×growth_factor when the count
        reaches growth_interval (not past float32's range). new_scale: set the scale to this float or 1-element
        tensor instead."""
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, (float, int)) and not isinstance(new_scale, bool):
                _fill_(scale, new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element ember.cuda.FloatTensor or ember.FloatTensor with "
                          "requires_grad=False.")
                if not isinstance(new_scale, Tensor) or new_scale.device.type != self._device:
                    raise AssertionError(reason)
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                _fill_(scale, backend.transfer(new_scale._data.reshape(()), scale.device))
        else:
            found = [f.item() for st in self._per_optimizer_states.values()
                     for f in st["found_inf_per_device"].values()]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            s = float(scale.item())
            if sum(found):
                s, count = s * self._backoff_factor, 0
            else:
                count = int(tracker.item()) + 1
                if count == self._growth_interval:
                    grown = np.float32(s * self._growth_factor)
                    if np.isfinite(grown):  # (never grow the scale to inf)
                        s = grown
                    count = 0
            _fill_(scale, np.float32(s))
            _fill_(tracker, count)
        self._per_optimizer_states = defaultdict(_fresh_state)

    # ------------------------------------------------------------------ settings and state
    def get_scale(self) -> float:
        """The current scale as a Python float (init_scale before the first `scale`; 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else float(self._scale.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict[str, Any]:
        """{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"} as Python numbers
        ({} when disabled). Take it after `update()`."""
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a `state_dict()` (a no-op when this scaler is disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._scale is not None:
            _fill_(self._scale, np.float32(self._init_scale))
        if self._growth_tracker is not None:
            _fill_(self._growth_tracker, self._init_growth_tracker)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle between iterations only: the scale and the count travel as numbers (tensors are made again on
        the next `scale`)."""
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning of an iteration, or "
                                     "at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def _fill_(t: Tensor, value) -> None:
    """Set the scaler's own 0-d tensor t to value, in place (ember.lazy first computes what reads it)."""
    if _capture.ACTIVE is not None:
        _capture.writing(t)
    t._data[...] = value
    bump_version(t)


def _check_and_unscale_(grads: list, inv_scale: float) -> Tensor:
    """grads: (tensor, array to scale) pairs on one device. Multiply each array by inv_scale in place (in float32
    for 16-bit floats, rounded once) and return a 0-d float32 tensor: 1 if some value was inf or NaN, else 0. One
    result per device, computed there: reading it is the only synchronisation."""
    xp = backend.array_module(grads[0][1])
    bad = None
    for t, a in grads:
        if _capture.ACTIVE is not None:
            _capture.writing(t)
        nonfinite = ~xp.isfinite(a).all()
        bad = nonfinite if bad is None else bad | nonfinite
        if inv_scale != 1.0:
            if a.dtype in dt.LOW_FLOATS:
                a[...] = (a.astype(np.float32) * np.float32(inv_scale)).astype(a.dtype)
            else:
                a *= a.dtype.type(inv_scale)  # (a NumPy scalar: CuPy takes it as it is)
            bump_version(t)
    return make(xp.asarray(bad, dtype=np.float32))
