"""NAdam: Adam with Nesterov momentum (Dozat)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..backend.kernels import ema_sq_ as _ema_sq_, lerp_ as _lerp_
from .optimizer import Optimizer, ParamUpdate

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam with PyTorch's update rule, at step t:

    μₜ = β₁·(1 - ½·0.96^(t·momentum_decay));  Πₜ = μ₁···μₜ (state 'mu_product');
    g ← ±grad + weight_decay·p (or p ← p·(1 - lr·weight_decay) when decoupled_weight_decay);
    m ← β₁·m + (1-β₁)·g;  v ← β₂·v + (1-β₂)·g²;  d = √(v/(1-β₂ᵗ)) + eps;
    p ← p - lr·(1-μₜ)/(1-Πₜ) · g/d - lr·μₜ₊₁/(1-Πₜ·μₜ₊₁) · m/d.

    `foreach` and `capturable` are accepted for compatibility and ignored (ember has one in-place
    implementation; `differentiable=True` is rejected).
    """

    _checked = ("lr", "eps", "betas", "weight_decay", "momentum_decay")
    _counters = {"step": 0.0, "mu_product": 1.0}

    def __init__(self, params: Iterable, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq")

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        lr, (beta1, beta2), eps = float(group["lr"]), group["betas"], group["eps"]
        momentum_decay = group["momentum_decay"]
        for r in records:
            a, d, (G, T), state, step = r.array, r.grad, r.scratch, r.state, r.step
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mp = state["mu_product"]._data
            mp *= mu  # in the counter's own dtype (float32), as PyTorch
            mu_product = mp.item()
            m, v = state["exp_avg"]._data, state["exp_avg_sq"]._data
            _lerp_(m, d, 1 - beta1, T)
            _ema_sq_(v, d, beta2, T)
            np.divide(v, 1 - beta2 ** step, out=T)
            np.sqrt(T, out=T)
            T += eps
            np.divide(d, T, out=G)  # G is free: d (which may be G) is read here for the last time
            G *= -lr * (1.0 - mu) / (1.0 - mu_product)
            a += G
            np.divide(m, T, out=G)
            G *= (-lr * mu_next) / (1.0 - mu_product * mu_next)
            a += G
