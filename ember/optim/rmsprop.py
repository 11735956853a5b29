"""RMSprop (Hinton), optionally centered and with momentum."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..backend.kernels import ema_sq_ as _ema_sq_, lerp_ as _lerp_
from .optimizer import Optimizer, ParamUpdate

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop with PyTorch's update rule:

    g ← ±grad + weight_decay·p;  v ← α·v + (1-α)·g²;
    centered: ḡ ← α·ḡ + (1-α)·g and the denominator uses v - ḡ²;
    d = √(v or v - ḡ²) + eps;  momentum μ > 0: b ← μ·b + g/d, p ← p - lr·b;  else p ← p - lr·g/d.

    State: 'step', 'square_avg', 'momentum_buffer' (momentum > 0), 'grad_avg' (centered).

    `foreach` and `capturable` are accepted for compatibility and ignored (ember has one in-place
    implementation; `differentiable=True` is rejected).
    """

    _checked = ("lr", "eps", "momentum", "weight_decay", "alpha")

    def __init__(self, params: Iterable, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered, weight_decay=weight_decay,
                        capturable=capturable, foreach=foreach, maximize=maximize, differentiable=differentiable)
        super().__init__(params, defaults)

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        momentum, centered = group["momentum"], group["centered"]
        return ("square_avg",) + (("momentum_buffer",) if momentum > 0 else ()) + (("grad_avg",) if centered else ())

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        lr, alpha, eps = float(group["lr"]), group["alpha"], group["eps"]
        momentum, centered = group["momentum"], group["centered"]
        for r in records:
            a, d, T, state = r.array, r.grad, r.scratch[1], r.state
            v = state["square_avg"]._data
            _ema_sq_(v, d, alpha, T)
            if centered:
                ga = state["grad_avg"]._data
                _lerp_(ga, d, 1 - alpha, T)
                np.multiply(ga, ga, out=T)
                np.subtract(v, T, out=T)
                np.sqrt(T, out=T)
            else:
                np.sqrt(v, out=T)
            T += eps
            np.divide(d, T, out=T)
            if momentum > 0:
                b = state["momentum_buffer"]._data
                b *= momentum
                b += T
                np.multiply(b, -lr, out=T)
            else:
                T *= -lr
            a += T
