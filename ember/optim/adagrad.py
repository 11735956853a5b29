"""Adagrad (Duchi et al.)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import bump_version, make
from .optimizer import Optimizer, _check_nonneg, _grad, _scalar, _tick

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad with PyTorch's update rule, at step t:

    g ← ±grad + weight_decay·p;  s ← s + g²;  p ← p - lr/(1 + (t-1)·lr_decay) · g / (√s + eps).

    State ('step', 'sum' = initial_accumulator_value) is created for every parameter at
    construction, as in PyTorch.
    """

    def __init__(self, params: Iterable, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach: bool | None = None, *,
                 maximize: bool = False, differentiable: bool = False, fused: bool | None = None) -> None:
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p, group)

    def _validate(self, o: dict[str, Any]) -> None:
        super()._validate(o)
        _check_nonneg("Adagrad", o, "lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def _init_state(self, p, group: dict[str, Any]) -> dict:
        state = self.state[p]
        state["step"] = _scalar(0.0)
        state["sum"] = make(np.full_like(p.data, group["initial_accumulator_value"]))
        return state

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, lr_decay, eps, wd, maximize = float(group["lr"]), group["lr_decay"], group["eps"], group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            a = p.data
            state = self.state[p] or self._init_state(p, group)  # a group added after construction
            G, T = self._scratch(a)
            step = _tick(state)
            d = _grad(p.grad.data, a, maximize, wd, 0.0, G, T)
            clr = lr / (1 + (step - 1) * lr_decay)
            s = state["sum"].data
            np.multiply(d, d, out=T)
            s += T
            np.sqrt(s, out=T)
            T += eps
            np.divide(d, T, out=T)
            T *= -clr
            a += T
            bump_version(p)
