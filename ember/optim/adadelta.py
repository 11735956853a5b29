"""Adadelta (Zeiler)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..backend.kernels import ema_sq_ as _ema_sq_
from .optimizer import Optimizer, ParamUpdate, check_nonneg

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta with PyTorch's update rule:

    g ← ±grad + weight_decay·p;  v ← ρ·v + (1-ρ)·g²;  Δ = √(u + eps) / √(v + eps) · g;
    u ← ρ·u + (1-ρ)·Δ²;  p ← p - lr·Δ.   State: 'step', 'square_avg' (v), 'acc_delta' (u).

    `foreach` and `capturable` are accepted for compatibility and ignored (ember has one in-place
    implementation; `differentiable=True` is rejected).
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
        check_nonneg("Adadelta", o, "lr")
        if "rho" in o and not 0.0 <= o["rho"] <= 1.0:
            raise ValueError(f"Invalid rho value: {o['rho']}")
        check_nonneg("Adadelta", o, "eps", "weight_decay")

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("square_avg", "acc_delta")

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        lr, rho, eps = float(group["lr"]), group["rho"], group["eps"]
        for r in records:
            a, d, (_, T, D) = r.array, r.grad, r.scratch
            v, u = r.state["square_avg"]._data, r.state["acc_delta"]._data
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
