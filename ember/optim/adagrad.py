"""Adagrad (Duchi et al.)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import make
from ..backend import array_module, device_of, on
from .optimizer import Optimizer, _scalar

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad with PyTorch's update rule, at step t:

    g ← ±grad + weight_decay·p;  s ← s + g²;  p ← p - lr/(1 + (t-1)·lr_decay) · g / (√s + eps).

    State ('step', 'sum' = initial_accumulator_value) is created for every parameter at
    construction, as in PyTorch.
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
                self._init_state(self.state[p], p.data, group, ("sum",))

    def _init_state(self, state: dict, a, group: dict[str, Any], buffers: tuple[str, ...]) -> None:
        """'step' = 0 and 'sum' = initial_accumulator_value (also for a group added later, at its first step)."""
        state["step"] = _scalar(0.0)
        with on(device_of(a)):  # CuPy allocates on the current device, not on `a`'s
            state["sum"] = make(array_module(a).full_like(a, group["initial_accumulator_value"]))

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, lr_decay, eps = float(group["lr"]), group["lr_decay"], group["eps"]
        for p, a, d, state, (_, T), step in self._params_with_grad(group, ("sum",)):
            clr = lr / (1 + (step - 1) * lr_decay)
            s = state["sum"].data
            np.multiply(d, d, out=T)
            s += T
            np.sqrt(s, out=T)
            T += eps
            np.divide(d, T, out=T)
            T *= -clr
            a += T
