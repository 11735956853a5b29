"""W3 CNN: one training step and batch-1000 inference, as ember, hand-written NumPy and PyTorch CPU.

The model (MNIST-sized, float32): Conv2d(1,16,3,p1)-ReLU-MaxPool2-Conv2d(16,32,3,p1)-ReLU-MaxPool2-
Flatten-Linear(1568,128)-ReLU-Linear(128,10), i.e. `ember.cli.models.build_model("cnn", (1, 28, 28), 10)`;
cross-entropy (mean) and plain SGD(lr=0.01). A training step is zero grads, forward, loss,
backward and the SGD update on fixed random data (batch 128); an inference step is the forward
pass under no_grad, returning the logits (batch 1000). `NumpyCNN` is the same computation with
its forward and backward written out by hand: the practical limit for a NumPy framework.

`train_cases()` / `infer_cases()` return the implementations as zero-argument steps from the same
weights; `tests/test_bench_cnn.py` checks the NumPy step against ember's gradients and logits.
Run them through the suite: `python -m ember bench --only w3` (and `w3i` for inference).
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np
from numpy.lib.stride_tricks import as_strided

import ember
import ember.nn as enn
import ember.nn.functional as F
from ember.cli.models import build_model

from . import ember_compile, nets
from ._harness import COMPILED, EMBER_COMPILED, IMPLS, Skipped, import_torch, in_order, synced, train_step

__all__ = ["NumpyCNN", "train_cases", "infer_cases", "ember_model", "torch_spec", "LR", "IN_SHAPE", "N_CLASSES"]

IN_SHAPE, N_CLASSES, LR = (1, 28, 28), 10, 0.01
C1, C2, HID = 16, 32, 128
H1, H2, H3 = 28, 14, 7  # spatial size entering conv1, conv2 and the flatten
# Images per im2col chunk: each chunk's columns are multiplied while they are still in cache
# (one thread, batch 128: conv2 forward 4.8 -> 3.5 ms, its input gradient 5.4 -> 3.7 ms;
# batch-1000 inference: conv1 9.6 -> 7.4 ms, and conv2's columns need no 113 MB buffer).
CHUNK, DCOLS_CHUNK = 64, 16


def ember_model(seed: int = 0) -> enn.Module:
    """The W3 model from ember's generator seeded with `seed`."""
    ember.manual_seed(seed)
    return build_model("cnn", IN_SHAPE, N_CLASSES)


def _data(batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((batch, *IN_SHAPE)).astype(np.float32), rng.integers(0, N_CLASSES, batch)


# ---------------------------------------------------------------------- hand-written NumPy
class _Buffers:
    """Every array a step needs at batch `n`, allocated once: reusing them keeps glibc from
    returning the big blocks to the OS and re-faulting their pages every step. With `train`,
    the im2col columns are kept whole for the weight gradients, and the backward buffers exist.

    Layouts, each chosen by measurement (one thread, batch 128):
    - Both convolutions are computed in the order of the 2x2 pool window that reads their output:
      rows (window row a, window col b, n, i, j), so each output splits into four contiguous
      blocks and the pool is three pairwise `np.maximum` on contiguous arrays (conv1's pool 0.14 ms
      against 0.56 ms on the strided (N, H, W) layout; conv2's pool backward 0.19 against 1.29 ms).
    - conv1 is channel-first: z1[a, b] = W1 (16, 9) @ cols1[a, b] (9, n*196).
    - conv2 reads its input channel-last and padded, (n, 16, 16, 16): im2col rows copy in runs of
      16 channels (0.55 ms against 1.3-2.5 ms channel-first), and W2 (32, 144) @ cols2.T still
      writes a channel-first (32, 4*n*49) output for the pool.
    - conv2's input gradient is the full convolution of the zero-padded channel-last output
      gradient with the flipped kernel: an im2col gather and a matmul (5.4 ms, 3.7 in chunks),
      against W2.T @ dz and col2im's shifted adds (7.4 ms; short rows make the adds slow)."""

    def __init__(self, n: int, train: bool) -> None:
        f = np.float32
        m1, m2 = n * H2 * H2, n * H3 * H3
        nc = n if train else min(n, CHUNK)
        self.xp = np.zeros((n, H1 + 2, H1 + 2), f)            # padded input; border stays 0
        self.cols1 = np.empty((2, 2, 9, nc, H2, H2), f)       # im2col of conv1: cols1[a, b, kh*3+kw, n, i, j]
        self.z1 = np.empty((2, 2, C1, m1), f)                 # conv1 output, one block per window slot
        self.t1, self.u1 = np.empty((C1, m1), f), np.empty((C1, m1), f)  # max of the top / bottom pair
        self.m1 = np.empty((C1, n, H2, H2), f)                # relu(pool1 + b1)
        self.p1 = np.zeros((n, H2 + 2, H2 + 2, C1), f)        # the same, channel-last and padded
        self.cols2 = np.empty((2, 2, nc, H3, H3, 3, 3, C1), f)  # im2col of conv2: cols2[a, b, n, i, j, kh, kw, c]
        self.w2 = np.empty((C2, 3, 3, C1), f)                 # W2 in that column order
        self.z2 = np.empty((2, 2, C2, m2), f)
        self.t2, self.u2 = np.empty((C2, m2), f), np.empty((C2, m2), f)
        self.m2 = np.empty((C2, n, H3, H3), f)
        self.a = np.empty((n, C2, H3, H3), f)                 # flattened in ember's (C, H, W) order
        self.h = np.empty((n, HID), f)
        self.logits = np.empty((n, N_CLASSES), f)
        if not train:
            return
        self.ones1, self.ones2 = np.ones(m1, f), np.ones(m2, f)
        self.ones_n = np.ones(n, f)
        self.top1, self.left1, self.lbot1 = (np.empty((C1, m1), bool) for _ in range(3))
        self.top2, self.left2, self.lbot2 = (np.empty((C2, m2), bool) for _ in range(3))
        self.mask_a = np.empty((n, C2, H3, H3), bool)
        self.mask_h = np.empty((n, HID), bool)
        self.mask_m1 = np.empty((C1, m1), bool)
        self.gh = np.empty((n, HID), f)
        self.ga = np.empty((n, C2 * H3 * H3), f)
        self.gm2 = np.empty((C2, n, H3, H3), f)
        self.dz2 = np.empty((2, 2, C2, n, H3, H3), f)
        self.gw2 = np.empty((2, 2, C2, 3 * 3 * C1), f)        # per window slot, summed after
        self.dzp = np.zeros((n, H2 + 2, H2 + 2, C2), f)       # dz2 channel-last, padded; border stays 0
        self.dcols = np.empty((min(n, DCOLS_CHUNK), H2, H2, 3, 3, C2), f)  # im2col of dzp, a chunk of images
        self.w2t = np.empty((C1, 3, 3, C2), f)                # W2 flipped: w2t[c, kh, kw, o] = W2[o, c, 2-kh, 2-kw]
        self.gm1 = np.empty((C1, m1), f)
        self.dz1 = np.empty((2, 2, C1, m1), f)
        self.gw1 = np.empty((2, 2, C1, 9), f)


def _slot_chunks(n: int, train: bool):
    """(wa, wb, n0, n1, at): each 2x2 pool-window slot (row wa, column wb) in chunks of images
    [n0, n1), whose im2col columns go to images `at` of the buffer: their own place when
    training keeps them all for the weight gradient, else the front of a one-chunk buffer."""
    for wa in (0, 1):
        for wb in (0, 1):
            for n0 in range(0, n, CHUNK):
                n1 = min(n0 + CHUNK, n)
                yield wa, wb, n0, n1, slice(n0, n1) if train else slice(0, n1 - n0)


def _pool_backward(g: np.ndarray, top: np.ndarray, left: np.ndarray, lbot: np.ndarray,
                   d00: np.ndarray, d01: np.ndarray, d10: np.ndarray, d11: np.ndarray) -> None:
    """Route the pooled gradient `g` to one element per 2x2 window, as ember and PyTorch do: the
    first maximum in row-major order. `top`: the top pair holds it (max(z00, z01) >= max(z10, z11));
    `left`/`lbot`: within the top/bottom pair the left one does (z00 >= z01, z10 >= z11).
    Writes every slot, so the outputs need no zeroing; subtraction keeps the split exact."""
    np.multiply(g, top, out=d01)        # gradient of the top pair
    np.subtract(g, d01, out=d11)        # ... and of the bottom pair
    np.multiply(d01, left, out=d00)
    np.subtract(d01, d00, out=d01)
    np.multiply(d11, lbot, out=d10)
    np.subtract(d11, d10, out=d11)


def _pool_bias_relu(z: np.ndarray, bias: np.ndarray, t: np.ndarray, u: np.ndarray, m: np.ndarray) -> None:
    """m = relu(max over the four pool-window slots of z + bias), in place (t, u: scratch). Pooling first is
    exact (max commutes with a per-channel shift and with ReLU) and leaves a quarter of the elements."""
    np.maximum(z[0, 0], z[0, 1], out=t)
    np.maximum(z[1, 0], z[1, 1], out=u)
    np.maximum(t, u, out=m)
    m += bias[:, None]
    np.maximum(m, 0, out=m)


class NumpyCNN:
    """The W3 step written out in NumPy: explicit forward and backward, in-place SGD, float32.

    `p` and `g` are lists in the order and shapes of ember's `model.parameters()` (0.weight,
    0.bias, 3.weight, 3.bias, 7.weight, 7.bias, 9.weight, 9.bias), so the two can start from the
    same weights (`from_ember`) and be compared gradient by gradient."""

    def __init__(self, params: list[np.ndarray], lr: float = LR) -> None:
        self.p = [np.array(a, dtype=np.float32) for a in params]
        self.g = [np.zeros_like(a) for a in self.p]
        self._scratch = [np.empty_like(a) for a in self.p]
        self.lr = np.float32(lr)
        self._bufs: dict[tuple[int, bool], _Buffers] = {}

    @classmethod
    def from_ember(cls, model: enn.Module, lr: float = LR) -> "NumpyCNN":
        return cls([p.detach().numpy() for p in model.parameters()], lr)

    def _buffers(self, n: int, train: bool) -> _Buffers:
        b = self._bufs.get((n, train))
        if b is None:
            b = self._bufs[(n, train)] = _Buffers(n, train)
        return b

    def _forward(self, x: np.ndarray, train: bool) -> _Buffers:
        """Forward pass of x (N, 1, 28, 28); the activations stay in the returned buffers.

        Bias and ReLU come after each pool: max(z + b) = max(z) + b and relu commutes with max,
        so both run on a quarter of the elements, and the pool's routing is unchanged."""
        W1, b1, W2, b2, W3, b3, W4, b4 = self.p
        n = len(x)
        b = self._buffers(n, train)
        b.xp[:, 1:-1, 1:-1] = x[:, 0]
        s0, s1, s2 = b.xp.strides
        w1 = W1.reshape(C1, 9)
        for wa, wb, n0, n1, at in _slot_chunks(n, train):
            # cols1[a, b, kh*3+kw, n, i, j] = xp[n, 2i + a + kh, 2j + b + kw]
            c = b.cols1[wa, wb, :, at]
            c.reshape(3, 3, *c.shape[1:])[...] = as_strided(b.xp[n0:, wa:, wb:], (3, 3, n1 - n0, H2, H2),
                                                            (s1, s2, s0, 2 * s1, 2 * s2))
            np.matmul(w1, c.reshape(9, -1), out=b.z1[wa, wb, :, n0 * H2 * H2:n1 * H2 * H2])
        _pool_bias_relu(b.z1, b1, b.t1, b.u1, b.m1.reshape(C1, -1))
        np.copyto(b.p1[:, 1:-1, 1:-1, :], b.m1.transpose(1, 2, 3, 0))
        s0, s1, s2, s3 = b.p1.strides
        np.copyto(b.w2, W2.transpose(0, 2, 3, 1))
        w2 = b.w2.reshape(C2, -1)
        for wa, wb, n0, n1, at in _slot_chunks(n, train):
            # cols2[a, b, n, i, j, kh, kw, c] = p1pad[n, 2i + a + kh, 2j + b + kw, c]
            c = b.cols2[wa, wb, at]
            c[...] = as_strided(b.p1[n0:, wa:, wb:], c.shape, (s0, 2 * s1, 2 * s2, s1, s2, s3))
            np.matmul(w2, c.reshape((n1 - n0) * H3 * H3, -1).T, out=b.z2[wa, wb, :, n0 * H3 * H3:n1 * H3 * H3])
        _pool_bias_relu(b.z2, b2, b.t2, b.u2, b.m2.reshape(C2, -1))
        np.copyto(b.a, b.m2.transpose(1, 0, 2, 3))  # (N, C, H, W) for the flatten
        a = b.a.reshape(n, -1)
        np.matmul(a, W3.T, out=b.h)
        b.h += b3
        np.maximum(b.h, 0, out=b.h)
        np.matmul(b.h, W4.T, out=b.logits)
        b.logits += b4
        return b

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Logits (N, 10) of x (N, 1, 28, 28)."""
        return self._forward(x, train=False).logits.copy()

    def gradients(self, x: np.ndarray, y: np.ndarray) -> float:
        """Forward and backward of the mean cross-entropy; fills self.g; returns the loss."""
        W1, b1, W2, b2, W3, b3, W4, b4 = self.p
        g = self.g
        b = self._forward(x, train=True)
        n = len(x)
        # fused softmax-cross-entropy: loss = mean(logsumexp - z_y), dlogits = (softmax - onehot) / n
        z = b.logits - b.logits.max(1, keepdims=True)
        e = np.exp(z)
        se = e.sum(1, keepdims=True)
        rows = np.arange(n)
        loss = float(np.log(se).mean() - z[rows, y].mean())
        gl = np.divide(e, se, out=e)
        gl[rows, y] -= 1
        gl *= np.float32(1.0 / n)
        # Linear(128, 10) and ReLU
        np.matmul(gl.T, b.h, out=g[6])
        np.matmul(b.ones_n, gl, out=g[7])
        np.matmul(gl, W4, out=b.gh)
        np.greater(b.h, 0, out=b.mask_h)
        np.multiply(b.gh, b.mask_h, out=b.gh)
        # Linear(1568, 128), ReLU, Flatten: back to channel-first
        a = b.a.reshape(n, -1)
        np.matmul(b.gh.T, a, out=g[4])
        np.matmul(b.ones_n, b.gh, out=g[5])
        np.matmul(b.gh, W3, out=b.ga)
        np.greater(b.a, 0, out=b.mask_a)
        np.multiply(b.ga.reshape(b.a.shape), b.mask_a, out=b.gm2.transpose(1, 0, 2, 3))
        np.matmul(b.gm2.reshape(C2, -1), b.ones2, out=g[3])
        # MaxPool2 of conv2 (contiguous window blocks)
        z = b.z2
        np.greater_equal(b.t2, b.u2, out=b.top2)
        np.greater_equal(z[0, 0], z[0, 1], out=b.left2)
        np.greater_equal(z[1, 0], z[1, 1], out=b.lbot2)
        d = b.dz2.reshape(2, 2, C2, -1)
        _pool_backward(b.gm2.reshape(C2, -1), b.top2, b.left2, b.lbot2, d[0, 0], d[0, 1], d[1, 0], d[1, 1])
        # Conv2d(16, 32): weight gradient, one matmul per window slot (columns in (kh, kw, c) order) ...
        np.matmul(d, b.cols2.reshape(2, 2, n * H3 * H3, -1), out=b.gw2)
        np.copyto(g[2], b.gw2.sum((0, 1)).reshape(C2, 3, 3, C1).transpose(0, 3, 1, 2))
        # ... and input gradient: dx[n, i, j, c] = sum dzpad[n, i + kh, j + kw, o] * W2[o, c, 2-kh, 2-kw]
        s0, s1, s2, s3 = b.dzp.strides
        # dzpad[n, 2i + a + 1, 2j + b + 1, o] = dz2[a, b, o, n, i, j]
        np.copyto(as_strided(b.dzp[:, 1:, 1:, :], b.dz2.shape, (s1, s2, s3, s0, 2 * s1, 2 * s2)), b.dz2)
        np.copyto(b.w2t, W2[:, :, ::-1, ::-1].transpose(1, 2, 3, 0))
        w2t, gm1 = b.w2t.reshape(C1, -1), b.gm1
        for n0 in range(0, n, DCOLS_CHUNK):
            c = b.dcols[:min(DCOLS_CHUNK, n - n0)]
            c[...] = as_strided(b.dzp[n0:], c.shape, (s0, s1, s2, s1, s2, s3))
            np.matmul(w2t, c.reshape(len(c) * H2 * H2, -1).T, out=gm1[:, n0 * H2 * H2:(n0 + len(c)) * H2 * H2])
        # ReLU and bias of conv1 (after the pool), then MaxPool2 of conv1
        np.greater(b.m1.reshape(C1, -1), 0, out=b.mask_m1)
        np.multiply(gm1, b.mask_m1, out=gm1)
        np.matmul(gm1, b.ones1, out=g[1])
        z = b.z1
        np.greater_equal(b.t1, b.u1, out=b.top1)
        np.greater_equal(z[0, 0], z[0, 1], out=b.left1)
        np.greater_equal(z[1, 0], z[1, 1], out=b.lbot1)
        d = b.dz1
        _pool_backward(gm1, b.top1, b.left1, b.lbot1, d[0, 0], d[0, 1], d[1, 0], d[1, 1])
        # Conv2d(1, 16) weight gradient, one matmul per window slot; its input needs no gradient
        np.matmul(d, b.cols1.reshape(2, 2, 9, -1).transpose(0, 1, 3, 2), out=b.gw1)
        np.sum(b.gw1, axis=(0, 1), out=g[0].reshape(C1, 9))
        return loss

    def sgd(self) -> None:
        """p -= lr * g, in place."""
        for p, g, s in zip(self.p, self.g, self._scratch):
            np.multiply(g, self.lr, out=s)
            p -= s

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        loss = self.gradients(x, y)
        self.sgd()
        return loss


# ---------------------------------------------------------------------- PyTorch
def torch_spec(batch: int = 128, train: bool = True) -> dict:
    """The PyTorch step of W3 (`train`) or of its inference for benchmarks/nets.py (`torch_step`)."""
    spec = {"net": "cnn", "args": [IN_SHAPE[0], C1, C2, C2 * H3 * H3, HID, N_CLASSES], "x": [batch, *IN_SHAPE]}
    if train:
        spec.update(y=[batch], classes=N_CLASSES, optim="SGD", optim_kw={"lr": LR})
    return spec


# ---------------------------------------------------------------------- cases
def train_cases(batch: int = 128, impls: Iterable[str] = IMPLS, seed: int = 0, device: str = "cpu",
                check: bool = True) -> dict[str, Callable[[], object] | Skipped]:
    """{implementation: one SGD training step (zero grads, forward, loss, backward, update)} for each
    of `impls` (PyTorch where installed; "compiled": PyTorch with torch.compile, compiled here, or Skipped
    saying why not; the ember.compile columns, captured here and checked against eager unless `check` is
    False: benchmarks/ember_compile.py) on fixed random data, all from ember's initial weights. On a CUDA
    `device` ember and PyTorch run there (steps end with a synchronize) and the NumPy step and the
    ember.compile columns are left out."""
    x_np, y_np = _data(batch, seed)
    model = ember_model(seed)
    out: dict[str, Callable[[], object] | Skipped] = {}
    torch = import_torch(impls)
    if torch is not None:  # built before ember trains, from the same initial weights
        out.update(nets.torch_cases(torch, torch_spec(batch), impls, model, x_np, y_np, device))
    if device == "cpu" and any(k in impls for k in EMBER_COMPILED):  # copies of the initial weights
        out.update(ember_compile.train_cases(model, lambda m: ember.optim.SGD(m.parameters(), lr=LR), F.cross_entropy,
                                             ember.from_numpy(x_np), ember.from_numpy(y_np), impls, check))
    if "ember" in impls:
        model.to(device)
        out["ember"] = synced(train_step(model, ember.optim.SGD(model.parameters(), lr=LR), F.cross_entropy,
                                         ember.from_numpy(x_np).to(device), ember.from_numpy(y_np).to(device)),
                              device, ember)
    if "numpy" in impls and device == "cpu":
        ref = NumpyCNN.from_ember(model)
        out["numpy"] = lambda: ref.step(x_np, y_np)
    return in_order(out)


def infer_cases(batch: int = 1000, impls: Iterable[str] = IMPLS,
                seed: int = 0) -> dict[str, Callable[[], object] | Skipped]:
    """{implementation: one forward pass under no_grad, returning the logits} for each of `impls`
    (PyTorch where installed; "compiled" and the ember.compile columns as in train_cases) on fixed random
    data, all from the same weights."""
    x_np, _ = _data(batch, seed)
    model = ember_model(seed).eval()
    out: dict[str, Callable[[], object] | Skipped] = {}
    if any(k in impls for k in EMBER_COMPILED):
        out.update(ember_compile.infer_cases(model, ember.from_numpy(x_np), impls))
    if "ember" in impls:
        x = ember.from_numpy(x_np)

        def ember_infer():
            with ember.no_grad():
                return model(x)
        out["ember"] = ember_infer
    if "numpy" in impls:
        ref = NumpyCNN.from_ember(model)
        out["numpy"] = lambda: ref.predict(x_np)
    torch = import_torch(impls)
    if torch is not None:
        spec, tx = torch_spec(batch, train=False), torch.from_numpy(x_np)
        out["pytorch"] = nets.torch_step(torch, spec, like=model, x=tx)
        if COMPILED in impls:
            out[COMPILED] = nets.compiled_step(torch, spec, like=model, x=tx)
    return out
