"""RAdam: Adam with a rectified adaptive learning rate (Liu et al.)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..backend.kernels import ema_sq_ as _ema_sq_, lerp_ as _lerp_
from .optimizer import Optimizer, ParamUpdate

__all__ = ["RAdam"]


class RAdam(Optimizer):
    """RAdam with PyTorch's update rule, at step t:

    g ← ±grad + weight_decay·p (or p ← p·(1 - lr·weight_decay) when decoupled_weight_decay);
    m ← β₁·m + (1-β₁)·g;  v ← β₂·v + (1-β₂)·g²;  m̂ = m/(1-β₁ᵗ);
    ρ∞ = 2/(1-β₂) - 1;  ρₜ = ρ∞ - 2t·β₂ᵗ/(1-β₂ᵗ);
    ρₜ > 5: p ← p - lr·m̂·√(1-β₂ᵗ)/(√v + eps)·r, r = √((ρₜ-4)(ρₜ-2)ρ∞ / ((ρ∞-4)(ρ∞-2)ρₜ));
    otherwise p ← p - lr·m̂.

    `foreach` and `capturable` are accepted for compatibility and ignored (ember has one in-place
    implementation; `differentiable=True` is rejected).
    """

    _checked = ("lr", "eps", "betas", "weight_decay")

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, decoupled_weight_decay: bool = False, *,
                 foreach: bool | None = None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
        rho_inf = 2 / (1 - beta2) - 1
        for r in records:
            a, d, (G, T), step = r.array, r.grad, r.scratch, r.step
            m, v = r.state["exp_avg"]._data, r.state["exp_avg_sq"]._data
            _lerp_(m, d, 1 - beta1, T)
            _ema_sq_(v, d, beta2, T)
            bc2 = 1 - beta2 ** step
            rho_t = rho_inf - 2 * step * (beta2 ** step) / bc2
            np.divide(m, 1 - beta1 ** step, out=G)
            G *= lr
            if rho_t > 5.0:
                rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                np.sqrt(v, out=T)
                T += eps
                np.divide(bc2 ** 0.5, T, out=T)
                G *= T
                G *= rect
            a -= G
