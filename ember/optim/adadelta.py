"""Adadelta (Zeiler)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import bump_version, make
from .optimizer import Optimizer, _check_nonneg, _ema_sq_, _grad, _scalar, _tick

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
        lr, rho, eps, wd, maximize = float(group["lr"]), group["rho"], group["eps"], group["weight_decay"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            a = p.data
            state = self.state[p]
            if not state:
                state["step"] = _scalar(0.0)
                state["square_avg"] = make(np.zeros_like(a))
                state["acc_delta"] = make(np.zeros_like(a))
            G, T, D = self._scratch(a)
            _tick(state)
            d = _grad(p.grad.data, a, maximize, wd, 0.0, G, T)
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
            bump_version(p)
