"""SparseAdam: Adam for sparse gradients, with moments updated lazily (only on the rows a gradient holds)."""
from __future__ import annotations

import math
from typing import Any, Iterable

import numpy as np

from .._tensor import bump_version, make
from ..ops.sparse_ops import SparseTensor
from .optimizer import Optimizer, _check_betas, check_nonneg

__all__ = ["SparseAdam"]


class SparseAdam(Optimizer):
    """PyTorch's SparseAdam: the Adam update applied only at the positions P of a sparse gradient g (coalesced),
    leaving the moments and the parameter elsewhere untouched. At step t (counted per parameter):

    m[P] ← m[P] + (1-β₁)·(g - m[P]);   v[P] ← v[P] + (1-β₂)·(g² - v[P]);
    p[P] ← p[P] - lr·√(1-β₂ᵗ)/(1-β₁ᵗ) · m[P] / (√v[P] + eps)        (maximize: g ← -g).

    State per parameter: 'step' (an int, as PyTorch), 'exp_avg', 'exp_avg_sq' (dense, the parameter's shape).
    Only sparse gradients are accepted (`nn.Embedding(..., sparse=True)`); a dense one raises PyTorch's error.
    """

    _sparse_grads = True

    def __init__(self, params: Iterable, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, maximize: bool = False) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))
        sparse = [i for g in self.param_groups for i, p in enumerate(g["params"]) if p.__class__ is SparseTensor]
        if sparse:
            raise ValueError(f"Sparse params at indices {sparse}: SparseAdam requires dense parameter tensors")

    def _validate(self, o: dict[str, Any]) -> None:
        check_nonneg("SparseAdam", o, "lr")  # (PyTorch's order: lr, eps, betas)
        if not 0.0 < o["eps"]:
            raise ValueError(f"Invalid epsilon value: {o['eps']}")
        _check_betas("SparseAdam", o["betas"])

    def _step_group(self, group: dict[str, Any]) -> None:
        lr, (beta1, beta2), eps, maximize = float(group["lr"]), group["betas"], group["eps"], group["maximize"]
        for p in group["params"]:
            g = p._grad
            if g is None:
                continue
            if g.__class__ is not SparseTensor:
                raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = make(np.zeros_like(p._data))
                state["exp_avg_sq"] = make(np.zeros_like(p._data))
            state["step"] = step = int(state["step"]) + 1
            s = g.coalesce()._data
            if s.nnz == 0:
                continue
            at = tuple(s.indices)  # (coalesced: every position once, so `+=` at them is exact)
            v = -s.values if maximize else s.values
            m, sq = state["exp_avg"]._data, state["exp_avg_sq"]._data
            old_m, old_sq = m[at], sq[at]
            dm = (v - old_m) * (1 - beta1)
            dsq = (v * v - old_sq) * (1 - beta2)
            m[at] += dm
            sq[at] += dsq
            step_size = lr * math.sqrt(1 - beta2 ** step) / (1 - beta1 ** step)
            p._data[at] += -step_size * (dm + old_m) / (np.sqrt(dsq + old_sq) + eps)
            bump_version(p)
