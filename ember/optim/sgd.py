"""Stochastic gradient descent, optionally with (Nesterov) momentum."""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from .._tensor import make
from ..autograd.grad_mode import no_grad
from ..backend import device_of, on
from ..backend.kernels import sgd_momentum_
from ..ops.sparse_ops import SparseTensor
from .optimizer import Optimizer, ParamUpdate

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD with PyTorch's update rule.

    g ← ±grad + weight_decay·p (+ l1_weight_decay·sign(p));
    with momentum μ: b ← g on the first step, else b ← μ·b + (1 - dampening)·g, and
    g ← g + μ·b (nesterov) or g ← b;  then p ← p - lr·g.

    `l1_weight_decay` is ember's extension (not in PyTorch): L1 regularisation, adding
    l1_weight_decay·sign(p) to the gradient (the subgradient of l1_weight_decay·‖p‖₁).

    Sparse COO gradients (an `Embedding(sparse=True)`'s) update only the rows they hold; with momentum
    the buffer is a sparse tensor too (PyTorch's rule; ember keeps it coalesced). Weight decay cannot be
    added to a sparse gradient: PyTorch's error.
    `foreach` and `fused` are accepted for compatibility and ignored (ember has one in-place
    implementation; `differentiable=True` is rejected).
    """

    _checked = ("lr", "momentum", "weight_decay", "l1_weight_decay")
    _sparse_grads = True

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
        sparse = SparseTensor.seen  # (no test per parameter until a sparse tensor exists)
        for r in records:
            if sparse and r.param._grad.__class__ is SparseTensor:
                self._sparse_update(group, r.param, lr, momentum, dampening, nesterov)
                continue
            a, d, T = r.array, r.grad, r.scratch[1]
            if momentum != 0:
                state = states[r.param]
                buf = state.get("momentum_buffer")
                if buf.__class__ is SparseTensor:  # (earlier steps had sparse gradients, this one a dense one)
                    buf = state["momentum_buffer"] = buf.to_dense()
                first = buf is None
                if first:
                    with on(device_of(d)):  # CuPy copies to the current device
                        state["momentum_buffer"] = buf = make(d.copy())
                # one fused kernel on CUDA, the same chain of in-place ufuncs on the CPU (backend/kernels.py)
                sgd_momentum_(a, d, buf._data, momentum, dampening, -lr, first, nesterov, T)
            else:
                np.multiply(d, -lr, out=T)
                a += T

    def _sparse_update(self, group: dict[str, Any], p, lr: float, momentum: float, dampening: float,
                       nesterov: bool) -> None:
        """p ← p - lr·g for a sparse gradient g (momentum: b ← g on the first step, else μ·b + (1 - dampening)·g,
        then g ← g + μ·b or b), touching only the rows g holds."""
        if group["weight_decay"] or group["l1_weight_decay"]:
            raise RuntimeError("add(sparse, dense) is not supported. Use add(dense, sparse) instead. (SGD: weight "
                               "decay cannot be added to a sparse gradient; use weight_decay=0 with sparse=True)")
        with no_grad():
            g = -p._grad if group["maximize"] else p._grad
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                buf = g.clone() if buf is None else buf * momentum + (g * (1 - dampening) if dampening else g)
                if buf.__class__ is SparseTensor:
                    buf = buf.coalesce()  # (the same values; its entries would otherwise grow every step)
                state["momentum_buffer"] = buf
                g = g + buf * momentum if nesterov else buf
            if g.__class__ is SparseTensor:
                g = g.coalesce()._data
                p._data[tuple(g.indices)] -= lr * g.values  # (coalesced: each position once)
            else:
                p._data -= lr * g._data
