"""Stochastic gradient descent, optionally with (Nesterov) momentum."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import make
from ..backend import device_of, on
from ..backend.kernels import sgd_momentum_
from .optimizer import Optimizer, ParamUpdate

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD with PyTorch's update rule.

    g ← ±grad + weight_decay·p (+ l1_weight_decay·sign(p));
    with momentum μ: b ← g on the first step, else b ← μ·b + (1 - dampening)·g, and
    g ← g + μ·b (nesterov) or g ← b;  then p ← p - lr·g.

    `l1_weight_decay` is ember's extension (not in PyTorch): L1 regularisation, adding
    l1_weight_decay·sign(p) to the gradient (the subgradient of l1_weight_decay·‖p‖₁).
    `foreach` and `fused` are accepted for compatibility and ignored (ember has one in-place
    implementation; `differentiable=True` is rejected).
    """

    _checked = ("lr", "momentum", "weight_decay", "l1_weight_decay")

    def __init__(self, params: Iterable, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach: bool | None = None, differentiable: bool = False, fused: bool | None = None,
                 l1_weight_decay: float = 0.0) -> None:
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, differentiable=differentiable,
                        fused=fused, l1_weight_decay=l1_weight_decay)
        super().__init__(params, defaults)

    def _validate(self, o: dict[str, Any]) -> None:
        super()._validate(o)
        if o.get("nesterov") and (o.get("momentum", 0) <= 0 or o.get("dampening", 0) != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")

    def _buffers(self, group: dict[str, Any]) -> None:
        # no counted state: SGD's only state, the momentum buffer, starts as a copy of the first gradient
        # (made in `_update`), and a step without momentum keeps no state at all, as in PyTorch
        return None

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        lr, momentum, dampening, nesterov = float(group["lr"]), group["momentum"], group["dampening"], group["nesterov"]
        states = self.state
        for r in records:
            a, d, T = r.array, r.grad, r.scratch[1]
            if momentum != 0:
                state = states[r.param]
                buf = state.get("momentum_buffer")
                first = buf is None
                if first:
                    with on(device_of(d)):  # CuPy copies to the current device
                        state["momentum_buffer"] = buf = make(d.copy())
                # one fused kernel on CUDA, the same chain of in-place ufuncs on the CPU (backend/kernels.py)
                sgd_momentum_(a, d, buf._data, momentum, dampening, -lr, first, nesterov, T)
            else:
                np.multiply(d, -lr, out=T)
                a += T
