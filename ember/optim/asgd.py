"""ASGD: averaged stochastic gradient descent (Polyak & Juditsky)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .optimizer import Optimizer, ParamUpdate
from .rprop import check_capturable

__all__ = ["ASGD"]


class ASGD(Optimizer):
    """ASGD with PyTorch's update rule, at step t (counted from 1):

    g ← ±grad + weight_decay·p;  p ← p·(1 - λ·η) - η·g;
    ax ← p if μ = 1, else ax + μ·(p - ax)   (the running average of the iterates);
    then η ← lr / (1 + λ·lr·t)^α and μ ← 1 / max(1, t - t0) for the next step.

    State per parameter: 'step', 'eta' (lr at first), 'mu' (1 at first) — 0-d float32 tensors, as
    PyTorch's, whose rounding the update reads back — and 'ax'. `foreach` is accepted and ignored;
    `capturable=True` is accepted for CUDA parameters (ignored) and, as in PyTorch, fails at `step()` for
    CPU ones; `differentiable=True` is rejected.
    """

    _checked = ("lr", "weight_decay")
    _counters = {"step": 0.0, "eta": 0.0, "mu": 1.0}  # 'eta' starts at the group's lr (`_init_state`)

    def __init__(self, params: Iterable, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach: bool | None = None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False) -> None:
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("ax",)

    def _init_state(self, state: dict, a, group: dict[str, Any], buffers: tuple[str, ...]) -> None:
        super()._init_state(state, a, group, buffers)
        state["eta"]._data[()] = float(group["lr"])

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        check_capturable("ASGD", group, records, "params, mus, etas, and state_steps")
        lr, lambd, alpha, t0 = float(group["lr"]), group["lambd"], group["alpha"], group["t0"]
        for r in records:
            d = r.grad  # read before `a` changes: the weight decay term is of the old p
            a, T, state, step = r.array, r.scratch[1], r.state, r.step
            eta_t, mu_t = state["eta"]._data, state["mu"]._data
            eta, mu = eta_t.item(), mu_t.item()
            a *= 1 - lambd * eta
            np.multiply(d, -eta, out=T)
            a += T
            ax = state["ax"]._data
            if mu != 1:
                np.subtract(a, ax, out=T)
                T *= mu
                ax += T
            else:
                ax[...] = a
            eta_t[()] = lr / ((1 + lambd * lr * step) ** alpha)
            mu_t[()] = 1 / max(1, step - t0)
