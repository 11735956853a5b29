"""Adagrad (Duchi et al.)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import make
from ..backend import array_module, device_of, on
from .optimizer import Optimizer, ParamUpdate, scalar_state

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad with PyTorch's update rule, at step t:

    g ← ±grad + weight_decay·p;  s ← s + g²;  p ← p - lr/(1 + (t-1)·lr_decay) · g / (√s + eps).

    State ('step', 'sum' = initial_accumulator_value) is created for every parameter at
    construction, as in PyTorch. `foreach` and `fused` are accepted for compatibility and ignored
    (ember has one in-place implementation; `differentiable=True` is rejected).
    """

    _checked = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def __init__(self, params: Iterable, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(self.state[p], p._data, group, ("sum",))

    def _init_state(self, state: dict, a, group: dict[str, Any], buffers: tuple[str, ...]) -> None:
        """'step' = 0 and 'sum' = initial_accumulator_value (also for a group added later, at its first step)."""
        state["step"] = scalar_state(0.0)
        with on(device_of(a)):  # CuPy allocates on the current device, not on `a`'s
            state["sum"] = make(array_module(a).full_like(a, group["initial_accumulator_value"]))

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("sum",)

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        lr, lr_decay, eps = float(group["lr"]), group["lr_decay"], group["eps"]
        for r in records:
            a, d, T = r.array, r.grad, r.scratch[1]
            clr = lr / (1 + (r.step - 1) * lr_decay)
            s = r.state["sum"]._data
            np.multiply(d, d, out=T)
            s += T
            np.sqrt(s, out=T)
            T += eps
            np.divide(d, T, out=T)
            T *= -clr
            a += T
