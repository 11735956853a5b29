"""Adamax: Adam with the infinity norm (Kingma & Ba)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..backend.kernels import lerp_ as _lerp_
from .optimizer import Optimizer, ParamUpdate

__all__ = ["Adamax"]


class Adamax(Optimizer):
    """Adamax with PyTorch's update rule, at step t:

    g ← ±grad + weight_decay·p;  m ← β₁·m + (1-β₁)·g;  u ← max(β₂·u, |g| + eps);
    p ← p - lr/(1-β₁ᵗ) · m / u.   State: 'step', 'exp_avg' (m), 'exp_inf' (u).

    `foreach` and `capturable` are accepted for compatibility and ignored (ember has one in-place
    implementation; `differentiable=True` is rejected).
    """

    _checked = ("lr", "eps", "betas", "weight_decay")

    def __init__(self, params: Iterable, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, foreach: bool | None = None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_inf")

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
        for r in records:
            a, d, T, step = r.array, r.grad, r.scratch[1], r.step
            m, u = r.state["exp_avg"]._data, r.state["exp_inf"]._data
            _lerp_(m, d, 1 - beta1, T)
            u *= beta2
            np.abs(d, out=T)
            T += eps
            np.maximum(u, T, out=u)
            np.divide(m, u, out=T)
            T *= -(lr / (1 - beta1 ** step))
            a += T
