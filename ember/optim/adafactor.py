"""Adafactor (Shazeer & Stern): Adam-like steps with a factored second moment, as PyTorch 2.13's."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import bump_version, make
from ..backend import array_module, device_of, on
from .lbfgs import load_unshaped
from .optimizer import Optimizer, _check_number, scalar_state

__all__ = ["Adafactor"]


class Adafactor(Optimizer):
    """Adafactor with PyTorch's update rule (`torch.optim.Adafactor`), at step t, for a parameter p of
    n elements with gradient G (-G with maximize):

    β̂ = t^beta2_decay (the weight of the new square);  ρ = min(lr, 1/√t);
    α = max(eps2, ‖p‖/√n)·ρ  (from p before the weight decay);  p ← p·(1 - lr·weight_decay);
    p of 2 or more dims, factored over its last two (r: rows, c: columns):
        R ← lerp(R, mean_c(G²), β̂);  C ← lerp(C, mean_r(G²), β̂);  V = R·C / max(mean_r(R), eps1);
    p of 0 or 1 dims:  V ← lerp(V, G², β̂);
    U = G / √max(V, eps1²);  p ← p - α/max(1, ‖U‖/(√n·d)) · U.

    eps1 = None takes the machine epsilon of the group's first parameter's dtype. State per parameter:
    'step', then 'row_var' (shape [..., m, 1]) and 'col_var' ([..., 1, k]) for matrices, else 'variance'.
    `foreach` is accepted and ignored.
    """

    def __init__(self, params: Iterable, lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps: tuple[float | None, float] = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0, *,
                 foreach: bool | None = None, maximize: bool = False) -> None:
        defaults = dict(lr=lr, beta2_decay=beta2_decay, eps=eps, d=d, weight_decay=weight_decay, foreach=foreach,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _validate(self, o: dict[str, Any]) -> None:
        for key in ("lr", "beta2_decay", "d", "weight_decay"):
            if key in o:
                _check_number("Adafactor", key, o[key])
        if "lr" in o and not 0.0 <= o["lr"]:
            raise ValueError(f"Learning rate should be >= 0 but is: {o['lr']}")
        if "beta2_decay" in o and not 0.0 >= o["beta2_decay"]:
            raise ValueError(f"beta2_decay should be <= 0 but is: {o['beta2_decay']}")
        if "eps" in o:
            eps = o["eps"]
            if not isinstance(eps, (tuple, list)) or len(eps) != 2:
                raise ValueError(f"Adafactor: eps must be a pair (eps1 or None, eps2), got {eps!r}")
            if eps[0] is not None and not 0.0 <= eps[0]:
                raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
            if not 0.0 <= eps[1]:
                raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if "d" in o and not 1.0 <= o["d"]:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {o['d']}")
        if "weight_decay" in o and not 0.0 <= o["weight_decay"]:
            raise ValueError(f"weight_decay should be >= 0 but is: {o['weight_decay']}")

    def _step_group(self, group: dict[str, Any]) -> None:
        # Its own loop rather than `_gather`: the weight decay is decoupled but applied after α reads p,
        # and the state buffers are not shaped like the parameter.
        lr, beta2_decay, wd, clip = float(group["lr"]), group["beta2_decay"], group["weight_decay"], group["d"]
        eps1, eps2 = group["eps"]
        params = [p for p in group["params"] if p.grad is not None]
        for p in params:  # all checked before any is updated, as PyTorch
            if p.grad.is_sparse:
                raise RuntimeError("Adafactor does not support sparse gradients")
            if p._data.dtype.kind == "c":
                raise RuntimeError("Adafactor does not support complex parameters")
        for p in params:
            a, g = p._data, p.grad._data
            if group["maximize"]:
                g = -g
            if eps1 is None:  # once per group, from its first parameter with a gradient, as PyTorch
                eps1 = float(np.finfo(a.dtype).eps)
            state = self.state[p]
            if not state:
                self._init_adafactor_state(state, g)
            counter = state["step"]._data
            counter[()] = counter.item() + 1
            t = counter.item()
            beta = t ** beta2_decay
            rho = min(lr, 1 / t ** 0.5)
            n = a.size
            xp = array_module(a)
            alpha = max(eps2, float(xp.linalg.norm(a.reshape(-1))) / n ** 0.5) * rho
            if wd != 0:
                a *= 1 - lr * wd
            sq = g * g
            if g.ndim > 1:
                row, col = state["row_var"]._data, state["col_var"]._data
                _lerp(row, sq.mean(axis=-1, keepdims=True), beta)
                _lerp(col, sq.mean(axis=-2, keepdims=True), beta)
                v = xp.matmul(row, col)
                v /= np.maximum(row.mean(axis=-2, keepdims=True), eps1)
            else:
                var = state["variance"]._data
                _lerp(var, sq, beta)
                v = var.copy()
            np.maximum(v, eps1 * eps1, out=v)
            np.sqrt(v, out=v)
            np.divide(g, v, out=v)  # U = G / √V, in V's buffer
            denom = max(1.0, float(xp.linalg.norm(v.reshape(-1))) / (n ** 0.5 * clip))
            v *= -alpha / denom
            a += v
            bump_version(p)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """As `Optimizer.load_state_dict`; the factors ('row_var', 'col_var') are not shaped like their parameter."""
        load_unshaped(self, Optimizer.load_state_dict, state_dict, ("row_var", "col_var"))

    def _init_adafactor_state(self, state: dict, g) -> None:
        """'step', then the second-moment factors: zeros of the gradient's shape with its last dim (rows)
        or its second-to-last (columns) reduced to 1 for a matrix, of its full shape otherwise."""
        state["step"] = scalar_state(0.0)
        xp = array_module(g)
        with on(device_of(g)):
            if g.ndim > 1:
                state["row_var"] = make(xp.zeros(g.shape[:-1] + (1,), g.dtype))
                state["col_var"] = make(xp.zeros(g.shape[:-2] + (1, g.shape[-1]), g.dtype))
            else:
                state["variance"] = make(xp.zeros_like(g))


def _lerp(a, b, w: float) -> None:
    """a ← a + w·(b - a) in place, rounded as PyTorch's `lerp_` (its form depends on |w| < 0.5)."""
    if abs(w) < 0.5:
        a += w * (b - a)
    else:
        a[...] = b - (b - a) * (1 - w)
