"""RMSprop (Hinton), optionally centered and with momentum."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import bump_version, make
from .optimizer import Optimizer, _check_nonneg, _ema_sq_, _grad, _lerp_, _scalar, _tick

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop with PyTorch's update rule:

    g ← ±grad + weight_decay·p;  v ← α·v + (1-α)·g²;
    centered: ḡ ← α·ḡ + (1-α)·g and the denominator uses v - ḡ²;
    d = √(v or v - ḡ²) + eps;  momentum μ > 0: b ← μ·b + g/d, p ← p - lr·b;  else p ← p - lr·g/d.

    State: 'step', 'square_avg', 'momentum_buffer' (momentum > 0), 'grad_avg' (centered).
    """

    def __init__(self, params: Iterable, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _validate(self, o: dict[str, Any]) -> None:
        super()._validate(o)
        _check_nonneg("RMSprop", o, "lr", "eps", "momentum", "weight_decay", "alpha")

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, alpha, eps, wd = float(group["lr"]), group["alpha"], group["eps"], group["weight_decay"]
        momentum, centered, maximize = group["momentum"], group["centered"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            a = p.data
            state = self.state[p]
            if not state:
                state["step"] = _scalar(0.0)
                state["square_avg"] = make(np.zeros_like(a))
                if momentum > 0:
                    state["momentum_buffer"] = make(np.zeros_like(a))
                if centered:
                    state["grad_avg"] = make(np.zeros_like(a))
            G, T = self._scratch(a)
            _tick(state)
            d = _grad(p.grad.data, a, maximize, wd, 0.0, G, T)
            v = state["square_avg"].data
            _ema_sq_(v, d, alpha, T)
            if centered:
                ga = state["grad_avg"].data
                _lerp_(ga, d, 1 - alpha, T)
                np.multiply(ga, ga, out=T)
                np.subtract(v, T, out=T)
                np.sqrt(T, out=T)
            else:
                np.sqrt(v, out=T)
            T += eps
            np.divide(d, T, out=T)
            if momentum > 0:
                b = state["momentum_buffer"].data
                b *= momentum
                b += T
                np.multiply(b, -lr, out=T)
            else:
                T *= -lr
            a += T
            bump_version(p)
