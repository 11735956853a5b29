"""Sequence-model training steps: ember against PyTorch CPU (no hand-written NumPy reference).

* `lstm`: nn.LSTM(128, 256, num_layers=2, batch_first=True) over a (32, 64, 128) float32 input,
  a Linear(256, 64) head at every step, cross-entropy against fixed random targets, Adam.
* `transformer`: 4 × nn.TransformerEncoderLayer(d_model=128, nhead=4, batch_first=True) with
  PyTorch's defaults (dim_feedforward 2048, dropout 0.1, ReLU, post-norm) under a causal mask,
  over a (32, 64, 128) input, the same head, loss and optimizer.

Both frameworks start from the same weights (copied through `state_dict`). Run through the
suite: `python -m ember bench --only lstm,transformer`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import ember

from . import nets
from ._harness import IMPLS, Skipped, import_torch, in_order, train_step

BATCH, SEQ, D_IN, HIDDEN, LAYERS, CLASSES = 32, 64, 128, 256, 2, 64
D_MODEL, NHEAD, T_LAYERS = 128, 4, 4
LR = 1e-3


def _args(kind: str) -> list:
    """benchmarks/nets.py `seq`'s arguments after `nn`."""
    return [kind, D_IN, HIDDEN, LAYERS, D_MODEL, NHEAD, T_LAYERS, SEQ, CLASSES]


def torch_spec(kind: str, batch: int = BATCH) -> dict:
    """The PyTorch step of `kind` for benchmarks/nets.py (`torch_step`)."""
    return {"net": "seq", "args": _args(kind), "x": [batch, SEQ, D_IN], "y": [batch * SEQ], "classes": CLASSES,
            "optim": "Adam", "optim_kw": {"lr": LR}}


def cases(kind: str, batch: int = BATCH, impls=IMPLS,
          seed: int = 0) -> dict[str, Callable[[], object] | Skipped]:
    """{implementation: one training step} for `kind` in ("lstm", "transformer"), from the same weights
    ("compiled": PyTorch with torch.compile, compiled here, or Skipped saying why not)."""
    rng = np.random.default_rng(seed)
    x_np = rng.standard_normal((batch, SEQ, D_IN)).astype(np.float32)
    y_np = rng.integers(0, CLASSES, batch * SEQ)
    ember.manual_seed(seed)
    model = nets.seq(ember.nn, *_args(kind))
    out: dict[str, Callable[[], object] | Skipped] = {}
    torch = import_torch(impls)
    if torch is not None:  # built before ember trains, from the same initial weights
        out.update(nets.torch_cases(torch, torch_spec(kind, batch), impls, model, x_np, y_np))
    if "ember" in impls:
        model.train()
        out["ember"] = train_step(model, ember.optim.Adam(model.parameters(), lr=LR), ember.nn.functional.cross_entropy,
                                  ember.from_numpy(x_np), ember.from_numpy(y_np))
    return in_order(out)
