"""ResMLP training step: ember against a hand-written NumPy step and PyTorch CPU.

The model (MNIST-sized, float32, batch 128): Linear(784,100); three residual blocks
h ← relu(h + LN(Linear(50,100)(Dropout(0.1)(relu(LN(Linear(100,50)(h))))))); Linear(100,10);
cross-entropy; Adam(lr=1e-3). The NumPy step is the same computation with its forward and
backward written out by hand and an in-place Adam: the practical limit for a NumPy framework.

`cases()` returns the three as zero-argument steps for the harness; `tests/test_bench_resmlp.py`
checks the NumPy step against ember's gradients. Run it through the suite:
`python -m ember bench --only w2`.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import ember
import ember.nn as enn

from . import ember_compile, nets
from ._harness import EMBER_COMPILED, IMPLS, Skipped, import_torch, in_order, synced, train_step

BATCH, D_IN, D_HID, D_BOT, N_CLASSES, N_BLOCKS = 128, 784, 100, 50, 10, 3
P_DROP, LR, EPS_LN = 0.1, 1e-3, 1e-5


# ---------------------------------------------------------------------- ember
def ember_model(p_drop: float = P_DROP) -> enn.Module:
    """The ResMLP as an ember nn.Sequential (PyTorch's parameter names: '1.0.fn.0.weight', ...)."""
    def block():
        return enn.Sequential(
            enn.Residual(enn.Sequential(enn.Linear(D_HID, D_BOT), enn.LayerNorm(D_BOT), enn.ReLU(),
                                        enn.Dropout(p_drop), enn.Linear(D_BOT, D_HID), enn.LayerNorm(D_HID))),
            enn.ReLU())
    return enn.Sequential(enn.Linear(D_IN, D_HID), *[block() for _ in range(N_BLOCKS)], enn.Linear(D_HID, N_CLASSES))


# ---------------------------------------------------------------------- hand-written NumPy
class NumpyResMLP:
    """The same step written out in NumPy: explicit forward, backward and in-place Adam.

    Parameters are a flat list in the order of ember's `model.parameters()`, so the two can
    start from identical weights (`from_ember`) and be compared gradient by gradient."""

    def __init__(self, params: list[np.ndarray], p_drop: float = P_DROP, seed: int = 0) -> None:
        self.p = [np.array(a, dtype=np.float32) for a in params]
        self.m = [np.zeros_like(a) for a in self.p]
        self.v = [np.zeros_like(a) for a in self.p]
        self.g = [np.zeros_like(a) for a in self.p]
        self.t = 0
        self.p_drop = p_drop
        self.rng = np.random.default_rng(seed)

    @classmethod
    def from_ember(cls, model: enn.Module, **kw) -> "NumpyResMLP":
        return cls([p.detach().numpy() for p in model.parameters()], **kw)

    @staticmethod
    def _ln_fwd(a, gamma, beta):
        mu = a.mean(1, keepdims=True)
        xc = a - mu
        var = (xc * xc).mean(1, keepdims=True)
        rstd = 1.0 / np.sqrt(var + np.float32(EPS_LN))
        xhat = xc * rstd
        return xhat * gamma + beta, (xhat, rstd)

    @staticmethod
    def _ln_bwd(g, gamma, cache, g_gamma, g_beta):
        xhat, rstd = cache
        np.einsum("ij,ij->j", g, xhat, out=g_gamma)
        g.sum(0, out=g_beta)
        gx = g * gamma
        return rstd * (gx - gx.mean(1, keepdims=True) - xhat * (gx * xhat).mean(1, keepdims=True))

    def gradients(self, x: np.ndarray, y: np.ndarray, masks: list | None = None) -> float:
        """Forward and backward; fills self.g; returns the loss. `masks` fixes the dropout masks."""
        p, g = self.p, self.g
        W0, b0 = p[0], p[1]
        h = x @ W0.T
        h += b0
        caches = []
        for k in range(N_BLOCKS):
            W1, b1, g1, be1, W2, b2, g2, be2 = p[2 + 8 * k: 10 + 8 * k]
            a = h @ W1.T
            a += b1
            n1, c1 = self._ln_fwd(a, g1, be1)
            r = np.maximum(n1, 0)
            if self.p_drop > 0:
                mask = masks[k] if masks is not None else (self.rng.random(r.shape, np.float32) >= self.p_drop)
                scale = np.float32(1.0 / (1.0 - self.p_drop))
                d = r * mask * scale
            else:
                mask, scale, d = None, None, r
            c = d @ W2.T
            c += b2
            n2, c2 = self._ln_fwd(c, g2, be2)
            s = n2 + h
            h_in = h
            h = np.maximum(s, 0)
            caches.append((h_in, r, mask, scale, d, c1, c2, h))
        W3, b3 = p[-2], p[-1]
        logits = h @ W3.T
        logits += b3
        # cross-entropy (mean) and its gradient: (softmax - onehot)/N
        z = logits - logits.max(1, keepdims=True)
        e = np.exp(z)
        s_e = e.sum(1, keepdims=True)
        n = len(y)
        loss = float(np.log(s_e).mean() - z[np.arange(n), y].mean())
        gl = e / s_e
        gl[np.arange(n), y] -= 1
        gl *= np.float32(1.0 / n)
        np.matmul(gl.T, h, out=g[-2])
        gl.sum(0, out=g[-1])
        gh = gl @ W3
        for k in reversed(range(N_BLOCKS)):
            W1, b1, g1, be1, W2, b2, g2, be2 = p[2 + 8 * k: 10 + 8 * k]
            h_in, r, mask, scale, d, c1, c2, h_out = caches[k]
            gs = gh * (h_out > 0)
            gc_ = self._ln_bwd(gs, g2, c2, g[8 + 8 * k], g[9 + 8 * k])
            np.matmul(gc_.T, d, out=g[6 + 8 * k])
            gc_.sum(0, out=g[7 + 8 * k])
            gd = gc_ @ W2
            gr = gd * mask * scale if mask is not None else gd
            gn1 = gr * (r > 0)
            ga = self._ln_bwd(gn1, g1, c1, g[4 + 8 * k], g[5 + 8 * k])
            np.matmul(ga.T, h_in, out=g[2 + 8 * k])
            ga.sum(0, out=g[3 + 8 * k])
            gh = gs + ga @ W1
        np.matmul(gh.T, x, out=g[0])
        gh.sum(0, out=g[1])
        return loss

    def adam(self, lr: float = LR, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> None:
        self.t += 1
        c1 = 1 - b1 ** self.t
        c2 = 1 - b2 ** self.t
        step = np.float32(lr / c1)
        for p, g, m, v in zip(self.p, self.g, self.m, self.v):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            np.multiply(g, g, out=g)
            g *= 1 - b2
            v += g
            np.divide(v, c2, out=g)  # g is free now: reuse it as scratch
            np.sqrt(g, out=g)
            g += eps
            np.divide(m, g, out=g)
            g *= step
            p -= g

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        loss = self.gradients(x, y)
        self.adam()
        return loss


# ---------------------------------------------------------------------- PyTorch
def torch_spec(batch: int = BATCH) -> dict:
    """The PyTorch step of W2 for benchmarks/nets.py (`torch_step`)."""
    return {"net": "resmlp", "args": [D_IN, D_HID, D_BOT, N_CLASSES, N_BLOCKS, P_DROP], "x": [batch, D_IN],
            "y": [batch], "classes": N_CLASSES, "optim": "Adam", "optim_kw": {"lr": LR}}


def cases(batch: int = BATCH, impls=IMPLS, seed: int = 0, device: str = "cpu",
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
    model = ember_model()
    out: dict[str, Callable[[], object] | Skipped] = {}
    torch = import_torch(impls)
    if torch is not None:  # built before ember trains, from the same initial weights
        out.update(nets.torch_cases(torch, torch_spec(batch), impls, model, x_np, y_np, device))
    if device == "cpu" and any(k in impls for k in EMBER_COMPILED):  # copies of the initial weights
        out.update(ember_compile.train_cases(model, lambda m: ember.optim.Adam(m.parameters(), lr=LR),
                                             enn.functional.cross_entropy, ember.from_numpy(x_np),
                                             ember.from_numpy(y_np), impls, check))
    if "ember" in impls:
        model.to(device)
        out["ember"] = synced(train_step(model, ember.optim.Adam(model.parameters(), lr=LR),
                                         enn.functional.cross_entropy, ember.from_numpy(x_np).to(device),
                                         ember.from_numpy(y_np).to(device)), device, ember)
    if "numpy" in impls and device == "cpu":
        ref = NumpyResMLP.from_ember(model, seed=seed)
        out["numpy"] = lambda: ref.step(x_np, y_np)
    return in_order(out)
