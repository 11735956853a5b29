"""NAdam: Adam with Nesterov momentum (Dozat)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import bump_version, make
from .optimizer import Optimizer, _check_betas, _check_nonneg, _ema_sq_, _grad, _lerp_, _scalar, _tick

__all__ = ["NAdam"]


class NAdam(Optimizer):
    """NAdam with PyTorch's update rule, at step t:

    μₜ = β₁·(1 - ½·0.96^(t·momentum_decay));  Πₜ = μ₁···μₜ (state 'mu_product');
    g ← ±grad + weight_decay·p (or p ← p·(1 - lr·weight_decay) when decoupled_weight_decay);
    m ← β₁·m + (1-β₁)·g;  v ← β₂·v + (1-β₂)·g²;  d = √(v/(1-β₂ᵗ)) + eps;
    p ← p - lr·(1-μₜ)/(1-Πₜ) · g/d - lr·μₜ₊₁/(1-Πₜ·μₜ₊₁) · m/d.
    """

    def __init__(self, params: Iterable, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach: bool | None = None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize, foreach=foreach,
                        capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _validate(self, o: dict[str, Any]) -> None:
        super()._validate(o)
        _check_nonneg("NAdam", o, "lr", "eps")
        _check_betas("NAdam", o["betas"])
        _check_nonneg("NAdam", o, "weight_decay", "momentum_decay")

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps, wd = float(group["lr"]), group["betas"], group["eps"], group["weight_decay"]
        momentum_decay, decoupled, maximize = group["momentum_decay"], group["decoupled_weight_decay"], group["maximize"]
        for p in group["params"]:
            if p.grad is None:
                continue
            a = p.data
            state = self.state[p]
            if not state:
                state["step"] = _scalar(0.0)
                state["mu_product"] = _scalar(1.0)
                state["exp_avg"] = make(np.zeros_like(a))
                state["exp_avg_sq"] = make(np.zeros_like(a))
            G, T = self._scratch(a)
            step = _tick(state)
            if wd and decoupled:
                a *= 1 - lr * wd
            d = _grad(p.grad.data, a, maximize, 0 if decoupled else wd, 0.0, G, T)
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            mp = state["mu_product"].data
            mp *= mu  # in the counter's own dtype (float32), as PyTorch
            mu_product = mp.item()
            m, v = state["exp_avg"].data, state["exp_avg_sq"].data
            _lerp_(m, d, 1 - beta1, T)
            _ema_sq_(v, d, beta2, T)
            np.divide(v, 1 - beta2 ** step, out=T)
            np.sqrt(T, out=T)
            T += eps
            np.divide(d, T, out=G)  # G is free: d (G or the grad itself) is read here for the last time
            G *= -lr * (1.0 - mu) / (1.0 - mu_product)
            a += G
            np.divide(m, T, out=G)
            G *= (-lr * mu_next) / (1.0 - mu_product * mu_next)
            a += G
            bump_version(p)
