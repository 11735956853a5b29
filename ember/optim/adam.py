"""Adam and AdamW (Adam with decoupled weight decay)."""
from __future__ import annotations

from typing import Any, Iterable

from ..backend.kernels import adam_
from .optimizer import Optimizer, ParamUpdate

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam (Kingma & Ba) with PyTorch's update rule, at step t:

    g ← ±grad + weight_decay·p (L2; or p ← p·(1 - lr·weight_decay) when decoupled_weight_decay)
    (+ l1_weight_decay·sign(p));
    m ← β₁·m + (1-β₁)·g;  v ← β₂·v + (1-β₂)·g²;  (amsgrad: v̂ ← max(v̂, v), used for v)
    p ← p - lr/(1-β₁ᵗ) · m / (√v / √(1-β₂ᵗ) + eps).

    State per parameter: 'step' (a 0-d float32 tensor, as PyTorch), 'exp_avg', 'exp_avg_sq'
    and, with amsgrad, 'max_exp_avg_sq'.

    `l1_weight_decay` is ember's extension (not in PyTorch): L1 regularisation, adding
    l1_weight_decay·sign(p) to the gradient (also with decoupled weight decay).
    `foreach`, `fused` and `capturable` are accepted for compatibility and ignored (ember has one
    in-place implementation; `differentiable=True` is rejected).
    """

    _checked = ("lr", "eps", "betas", "weight_decay", "l1_weight_decay")

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False, *, foreach: bool | None = None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, decoupled_weight_decay: bool = False,
                 l1_weight_decay: float = 0.0) -> None:
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay, l1_weight_decay=l1_weight_decay)
        super().__init__(params, defaults)

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("exp_avg", "exp_avg_sq", "max_exp_avg_sq") if group["amsgrad"] else ("exp_avg", "exp_avg_sq")

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        lr, (beta1, beta2), eps, amsgrad = float(group["lr"]), group["betas"], group["eps"], group["amsgrad"]
        for r in records:
            state, step = r.state, r.step
            # one fused kernel on CUDA, the same chain of in-place ufuncs on the CPU (backend/kernels.py)
            adam_(r.array, r.grad, state["exp_avg"]._data, state["exp_avg_sq"]._data,
                  state["max_exp_avg_sq"]._data if amsgrad else None, 1 - beta1, beta2, (1 - beta2 ** step) ** 0.5,
                  eps, -(lr / (1 - beta1 ** step)), r.scratch[1])


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): p ← p·(1 - lr·weight_decay) before the
    Adam update, instead of adding weight_decay·p to the gradient. Default weight_decay = 1e-2.

    `l1_weight_decay` (ember's extension) still adds l1_weight_decay·sign(p) to the gradient.
    """

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, capturable: bool = False, differentiable: bool = False,
                 fused: bool | None = None, l1_weight_decay: float = 0.0) -> None:
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True, l1_weight_decay=l1_weight_decay)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        super().load_state_dict(state_dict)
        for g in self.param_groups:  # AdamW is always decoupled, whatever the saved dict says
            g["decoupled_weight_decay"] = True
