"""Adadelta (Zeiler)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..backend.kernels import ema_sq_ as _ema_sq_
from .optimizer import Optimizer, _check_nonneg

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta with PyTorch's update rule:

    g ← ±grad + weight_decay·p;  v ← ρ·v + (1-ρ)·g²;  Δ = √(u + eps) / √(v + eps) · g;
    u ← ρ·u + (1-ρ)·Δ²;  p ← p - lr·Δ.   State: 'step', 'square_avg' (v), 'acc_delta' (u).
    """

    _n_scratch = 3

    def __init__(self, params: Iterable, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach: bool | None = None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False) -> None:
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize, capturable=capturable,
                        foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _validate(self, o: dict[str, Any]) -> None:
        super()._validate(o)
        _check_nonneg("Adadelta", o, "lr")
        if "rho" in o and not 0.0 <= o["rho"] <= 1.0:
            raise ValueError(f"Invalid rho value: {o['rho']}")
        _check_nonneg("Adadelta", o, "eps", "weight_decay")

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, rho, eps = float(group["lr"]), group["rho"], group["eps"]
        for p, a, d, state, (_, T, D), _ in self._params_with_grad(group, ("square_avg", "acc_delta")):
            v, u = state["square_avg"].data, state["acc_delta"].data
            _ema_sq_(v, d, rho, T)
            np.add(v, eps, out=T)
            np.sqrt(T, out=T)
            np.add(u, eps, out=D)
            np.sqrt(D, out=D)
            D /= T
            D *= d
            _ema_sq_(u, D, rho, T)
            D *= -lr
            a += D
