"""Rprop: resilient backpropagation (Riedmiller & Braun)."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from ..backend import array_module, device_of
from .optimizer import Optimizer, ParamUpdate, _check_number

__all__ = ["Rprop"]


def check_capturable(name: str, group: dict[str, Any], records: list[ParamUpdate], what: str) -> None:
    """PyTorch's AssertionError for `capturable=True` with a parameter in host memory: capture (CUDA graphs)
    needs the parameters and their counters on a device. On CUDA the flag is accepted and changes nothing
    (ember has one in-place implementation)."""
    if not group.get("capturable"):
        return
    for r in records:
        if device_of(r.array).type == "cpu":
            raise AssertionError(f"If capturable=True, {what} must be on supported devices: ['cuda'] "
                                 f"({name} got a parameter on the CPU; use capturable=False there)")


class Rprop(Optimizer):
    """Rprop with PyTorch's update rule, per element:

    s = sign(g·g_prev);  step_size ← clamp(step_size·(η₊ if s > 0, η₋ if s < 0, 1 if s = 0), *step_sizes);
    g ← 0 where s < 0 (the sign flipped: skip this step and forget the gradient);
    p ← p - sign(g)·step_size;  g_prev ← g.

    `g` is -grad with `maximize`. State per parameter: 'step', 'prev' (g_prev, zeros at first) and
    'step_size' (lr at first). `foreach` is accepted and ignored; `capturable=True` is accepted for CUDA
    parameters (ignored) and, as in PyTorch, fails at `step()` for CPU ones; `differentiable=True` is rejected.
    """

    _n_scratch = 3  # [0] is the direction's (maximize), [1] and [2] the update's

    def __init__(self, params: Iterable, lr: float = 1e-2, etas: tuple[float, float] = (0.5, 1.2),
                 step_sizes: tuple[float, float] = (1e-6, 50), *, capturable: bool = False,
                 foreach: bool | None = None, maximize: bool = False, differentiable: bool = False) -> None:
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach, maximize=maximize,
                        differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _validate(self, o: dict[str, Any]) -> None:
        super()._validate(o)
        if "lr" in o:
            _check_number("Rprop", "lr", o["lr"])
            if not 0.0 <= o["lr"]:
                raise ValueError(f"Invalid learning rate: {o['lr']}")
        if "etas" in o:
            etas = o["etas"]
            if not isinstance(etas, (tuple, list)) or len(etas) != 2:
                raise ValueError(f"Rprop: etas must be a pair (etaminus, etaplus), got {etas!r}")
            if not 0.0 < etas[0] < 1.0 < etas[1]:
                raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        if "step_sizes" in o and (not isinstance(o["step_sizes"], (tuple, list)) or len(o["step_sizes"]) != 2):
            raise ValueError(f"Rprop: step_sizes must be a pair (min, max), got {o['step_sizes']!r}")

    def _buffers(self, group: dict[str, Any]) -> tuple[str, ...]:
        return ("prev", "step_size")

    def _init_state(self, state: dict, a, group: dict[str, Any], buffers: tuple[str, ...]) -> None:
        super()._init_state(state, a, group, buffers)
        state["step_size"]._data.fill(float(group["lr"]))  # every step size starts at lr

    def _update(self, group: dict[str, Any], records: list[ParamUpdate]) -> None:
        check_capturable("Rprop", group, records, "params and state_steps")
        etaminus, etaplus = group["etas"]
        lo, hi = group["step_sizes"]
        for r in records:
            a, d, (_, S, F) = r.array, r.grad, r.scratch
            prev, size = r.state["prev"]._data, r.state["step_size"]._data
            xp = array_module(a)
            np.multiply(d, prev, out=S)
            np.sign(S, out=S)
            grew, flipped = S > 0, S < 0
            F.fill(1)
            xp.copyto(F, etaplus, where=grew)
            xp.copyto(F, etaminus, where=flipped)
            size *= F
            np.maximum(size, lo, out=size)  # clamp(lo, hi), in PyTorch's order
            np.minimum(size, hi, out=size)
            prev[...] = d
            xp.copyto(prev, 0, where=flipped)
            np.sign(prev, out=S)
            S *= size
            a -= S
