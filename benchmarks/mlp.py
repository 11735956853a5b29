"""W1: MLP 784-w-w-10 (w = 512), ReLU, cross-entropy, SGD lr 0.01 momentum 0.9 — a full training step.

Three implementations of the same step from the same weights: ember, a hand-written NumPy step
(explicit forward and backward into preallocated buffers, in-place momentum update: the practical
limit of a NumPy framework; `tests/test_bench_mlp.py` checks it against ember's gradients) and
PyTorch CPU. `cases()` returns them as zero-argument steps for the harness; `step_flops` counts
the multiply-adds of one step, for the fraction of the machine's matmul rate it reaches.
Run it through the suite: `python -m ember bench --only w1`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import ember
import ember.nn as enn

from . import ember_compile, nets
from ._harness import EMBER_COMPILED, IMPLS, Skipped, import_torch, in_order, synced, train_step

D_IN, N_CLASSES, LR, MOMENTUM = 784, 10, 0.01, 0.9


def ember_model(width: int = 512) -> enn.Module:
    return nets.mlp(enn, D_IN, width, N_CLASSES)


def torch_spec(batch: int = 128, width: int = 512) -> dict:
    """The PyTorch step of W1 for benchmarks/nets.py (`torch_step`)."""
    return {"net": "mlp", "args": [D_IN, width, N_CLASSES], "x": [batch, D_IN], "y": [batch], "classes": N_CLASSES,
            "optim": "SGD", "optim_kw": {"lr": LR, "momentum": MOMENTUM}}


def step_flops(batch: int, width: int = 512) -> int:
    """Floating-point operations in one training step's matmuls, 2 per multiply-add: the forward product
    and the weight gradient of all three layers, and the input gradient of the last two (the input
    needs none, and no implementation computes it)."""
    macs = D_IN * width + width * width + width * N_CLASSES
    return 2 * batch * (2 * macs + width * width + width * N_CLASSES)


class NumpyMLP:
    """The W1 step by hand: forward, backward and SGD-momentum, every large array a reused buffer.

    Parameters are in ember's `model.parameters()` order: W1, b1, W2, b2, W3, b3."""

    def __init__(self, params: list[np.ndarray], lr: float = LR, momentum: float = MOMENTUM) -> None:
        self.p = [np.array(a, dtype=np.float32) for a in params]
        self.g = [np.zeros_like(a) for a in self.p]
        self.buf: list[np.ndarray] | None = None  # momentum buffers: the first gradient, as PyTorch
        self.lr, self.momentum = np.float32(lr), np.float32(momentum)
        self._acts: dict = {}

    @classmethod
    def from_ember(cls, model: enn.Module, **kw) -> "NumpyMLP":
        return cls([p.detach().numpy() for p in model.parameters()], **kw)

    def _buffers(self, n: int) -> tuple:
        if n not in self._acts:
            w = self.p[0].shape[0]
            f = np.float32
            self._acts[n] = (np.empty((n, w), f), np.empty((n, w), f), np.empty((n, N_CLASSES), f),
                             np.empty((n, w), f), np.empty((n, w), f), np.arange(n))
        return self._acts[n]

    def gradients(self, x: np.ndarray, y: np.ndarray) -> float:
        """Forward and backward for mean cross-entropy; fills self.g and returns the loss."""
        W1, b1, W2, b2, W3, b3 = self.p
        gW1, gb1, gW2, gb2, gW3, gb3 = self.g
        n = len(x)
        h1, h2, z, gh2, gh1, rows = self._buffers(n)
        np.matmul(x, W1.T, out=h1)
        h1 += b1
        np.maximum(h1, 0, out=h1)
        np.matmul(h1, W2.T, out=h2)
        h2 += b2
        np.maximum(h2, 0, out=h2)
        np.matmul(h2, W3.T, out=z)
        z += b3
        # softmax cross-entropy: loss = mean(logsumexp(z) - z_y); dz = (softmax(z) - onehot(y)) / n
        z -= z.max(1, keepdims=True)
        zy = z[rows, y]
        np.exp(z, out=z)
        s = z.sum(1, keepdims=True)
        loss = float(np.log(s).mean() - zy.mean())
        z *= np.float32(1 / n) / s
        z[rows, y] -= np.float32(1 / n)
        np.matmul(z.T, h2, out=gW3)
        z.sum(0, out=gb3)
        np.matmul(z, W3, out=gh2)
        gh2 *= h2 > 0
        np.matmul(gh2.T, h1, out=gW2)
        gh2.sum(0, out=gb2)
        np.matmul(gh2, W2, out=gh1)
        gh1 *= h1 > 0
        np.matmul(gh1.T, x, out=gW1)
        gh1.sum(0, out=gb1)
        return loss

    def sgd(self) -> None:
        """b ← μ·b + g (b ← g on the first step); p ← p − lr·b."""
        if self.buf is None:
            self.buf = [g.copy() for g in self.g]
        else:
            for b, g in zip(self.buf, self.g):
                b *= self.momentum
                b += g
        for p, b, g in zip(self.p, self.buf, self.g):
            np.multiply(b, self.lr, out=g)  # the gradient is spent: its buffer is the scratch
            p -= g

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        loss = self.gradients(x, y)
        self.sgd()
        return loss


def cases(batch: int = 128, width: int = 512, impls=IMPLS, seed: int = 0, device: str = "cpu",
          check: bool = True) -> dict[str, Callable[[], object] | Skipped]:
    """{implementation: one training step} for each of `impls` (PyTorch where installed; "compiled": PyTorch
    with torch.compile, compiled here, or Skipped saying why not; the ember.compile columns, captured here and
    checked against eager unless `check` is False: benchmarks/ember_compile.py) on fixed random data, every
    implementation from ember's initial weights. On a CUDA `device` ember and PyTorch run there (steps end
    with a synchronize) and the NumPy step and the ember.compile columns are left out."""
    rng = np.random.default_rng(seed)
    x_np = rng.standard_normal((batch, D_IN)).astype(np.float32)
    y_np = rng.integers(0, N_CLASSES, batch)
    ember.manual_seed(seed)
    model = ember_model(width)
    out: dict[str, Callable[[], object] | Skipped] = {}
    torch = import_torch(impls)
    if torch is not None:  # built before ember trains, from the same initial weights
        out.update(nets.torch_cases(torch, torch_spec(batch, width), impls, model, x_np, y_np, device))
    if device == "cpu" and any(k in impls for k in EMBER_COMPILED):  # copies of the initial weights
        out.update(ember_compile.train_cases(
            model, lambda m: ember.optim.SGD(m.parameters(), lr=LR, momentum=MOMENTUM), enn.functional.cross_entropy,
            ember.from_numpy(x_np), ember.from_numpy(y_np), impls, check))
    if "ember" in impls:
        model.to(device)
        out["ember"] = synced(train_step(model, ember.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM),
                                         enn.functional.cross_entropy, ember.from_numpy(x_np).to(device),
                                         ember.from_numpy(y_np).to(device)), device, ember)
    if "numpy" in impls and device == "cpu":
        ref = NumpyMLP.from_ember(model)
        out["numpy"] = lambda: ref.step(x_np, y_np)
    if "matmuls" in impls:
        out["matmuls"] = matmuls_only(batch, width, seed)
    return in_order(out)


def matmuls_only(batch: int, width: int = 512, seed: int = 0) -> Callable[[], None]:
    """The step's eight matrix products alone (`step_flops` of them), into preallocated outputs: the
    ceiling any implementation of W1 can reach at this shape, since the rest of a step only adds time."""
    rng = np.random.default_rng(seed)
    f = np.float32
    x = rng.standard_normal((batch, D_IN), dtype=f)
    w1, w2, w3 = (rng.standard_normal(s, dtype=f) for s in ((width, D_IN), (width, width), (N_CLASSES, width)))
    h1, h2, z = np.empty((batch, width), f), np.empty((batch, width), f), np.empty((batch, N_CLASSES), f)
    g1, g2 = np.empty((batch, width), f), np.empty((batch, width), f)
    d1, d2, d3 = np.empty_like(w1), np.empty_like(w2), np.empty_like(w3)

    def step() -> None:
        np.matmul(x, w1.T, out=h1)
        np.matmul(h1, w2.T, out=h2)
        np.matmul(h2, w3.T, out=z)
        np.matmul(z.T, h2, out=d3)
        np.matmul(z, w3, out=g2)
        np.matmul(g2.T, h1, out=d2)
        np.matmul(g2, w2, out=g1)
        np.matmul(g1.T, x, out=d1)
    return step
