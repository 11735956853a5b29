"""Per-shape convolution speed: `python -m ember bench --only conv` (or `python -m benchmarks.conv`).

For each convolution that real CNNs run (the W3 and LeNet-5 layers at batch 128; CIFAR ResNet-18's 3×3
convolutions, its stride-2 3×3 and its 1×1 stride-2 shortcuts at batch 1, 32 and 128), float32, NCHW, with
a bias, four passes:

    fwd       y = conv2d(x, w, b) under no_grad
    dx        autograd.grad(y, x, g, retain_graph=True), y built once from x requiring grad (w not)
    dw        the same with only w requiring grad
    fwd+bwd   autograd.grad(conv2d(x, w, b), (x, w, b), g): x, w and b requiring grad

each as ember, as PyTorch CPU (the same calls; left out where torch is not installed) and as plain NumPy:
the fastest of a few im2col + GEMM formulations of y, dx and dw (below), picked per shape and pass by a
short timing in the same process after checking each one against ember's result (fwd+bwd: the three picks
and the bias gradient in a row). g is a fixed random cotangent. The three implementations of a pass are
timed interleaved repeat by repeat in one process, each sample started once the other threads are idle
(`_harness.measure`), with the BLAS/OpenMP pools pinned to `--threads` before NumPy and PyTorch load
(PyTorch otherwise at its defaults). A pass counts 2·N·O·C·k²·OH·OW floating-point operations (fwd+bwd
three times that); the report gives ms and GFLOP/s per implementation, the ember/NumPy and ember/PyTorch
throughput ratios (medians of the per-repeat ratios) and marks the shapes whose ember/PyTorch fwd+bwd is
below FWD_BWD_TARGET, with the machine's float32 matmul rate (measured at the start and the end) for scale.

    python -m ember bench --only conv [--threads 2] [--repeats 7] [--quick] [--filter r18.64,w3]
                                      [--no-torch] [--output FILE] [--json FILE]

The NumPy formulations, each chunked over the images so that a chunk's columns stay in cache:
- nchw: per image, y[n] = W (O, K) @ cols[n] (K, OH·OW), K = C·k·k: the result is NCHW as it comes;
- cnhw: the chunk's columns as one (K, m·OH·OW) matrix (a channel-major copy of the input): one GEMM, then
  the (O, m, OH·OW) result transposed into NCHW;
- nhwc: channels-last columns (m·OH·OW, K), whose rows copy runs of k·C contiguous entries: one GEMM;
- dx: per kernel offset one (C, O) @ (O, ·) product added into the strided slice of a padded buffer that the
  offset's windows read (nchw or cnhw), or one (m·OH·OW, O) @ (O, K) product scattered back (nhwc col2im),
  or, at stride 1, the "full" convolution of g with the flipped, transposed kernel in any of the layouts;
- dw: Σ over the chunks of g (O, ·) @ columnsᵀ in each layout.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from typing import Callable, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from . import _harness as H
from .ops import _best_of
from .suite import _matmul_gflops, _Parser, emit, load_banner, machine_info

PASSES = ("fwd", "dx", "dw", "fwd+bwd")
IMPLS = ("ember", "numpy", "pytorch")
FWD_BWD_TARGET = 0.8  # ember/PyTorch throughput of the training pass, per shape (the target)
RESNET_BATCHES = (1, 32, 128)
# (name, C, O, H = W, k, stride, padding, batches)
LAYERS = (
    ("w3.conv1", 1, 16, 28, 3, 1, 1, (128,)),
    ("w3.conv2", 16, 32, 14, 3, 1, 1, (128,)),
    ("lenet.c1", 1, 6, 32, 5, 1, 0, (128,)),
    ("lenet.c3", 6, 16, 14, 5, 1, 0, (128,)),
    ("r18.64", 64, 64, 32, 3, 1, 1, RESNET_BATCHES),
    ("r18.128", 128, 128, 16, 3, 1, 1, RESNET_BATCHES),
    ("r18.256", 256, 256, 8, 3, 1, 1, RESNET_BATCHES),
    ("r18.512", 512, 512, 4, 3, 1, 1, RESNET_BATCHES),
    ("r18.64s2", 64, 128, 32, 3, 2, 1, RESNET_BATCHES),
    ("r18.128s2", 128, 256, 16, 3, 2, 1, RESNET_BATCHES),
    ("r18.256s2", 256, 512, 8, 3, 2, 1, RESNET_BATCHES),
    ("r18.sc64", 64, 128, 32, 1, 2, 0, RESNET_BATCHES),
    ("r18.sc128", 128, 256, 16, 1, 2, 0, RESNET_BATCHES),
    ("r18.sc256", 256, 512, 8, 1, 2, 0, RESNET_BATCHES),
)
QUICK_BATCH = 32


class Conv(NamedTuple):
    """One convolution: input (n, c, h, h), weight (o, c, k, k), stride s, padding p."""
    layer: str
    n: int
    c: int
    o: int
    h: int
    k: int
    s: int
    p: int

    @property
    def name(self) -> str:
        """What --filter matches: the layer and the batch, e.g. r18.64/b32."""
        return f"{self.layer}/b{self.n}"

    @property
    def oh(self) -> int:
        return (self.h + 2 * self.p - self.k) // self.s + 1

    @property
    def flops(self) -> int:
        """Multiply-adds ×2 of one pass (forward, input gradient or weight gradient alike)."""
        return 2 * self.n * self.o * self.c * self.k ** 2 * self.oh ** 2


def convs(quick: bool = False, pattern: str | None = None) -> list[Conv]:
    """The shapes to run: every layer at each of its batches (only QUICK_BATCH with `quick`), those whose
    name contains one of the comma-separated terms of `pattern` when given."""
    terms = [t for t in (pattern or "").split(",") if t]
    out = []
    for layer, c, o, h, k, s, p, batches in LAYERS:
        for n in ((QUICK_BATCH,) if quick else batches):
            conv = Conv(layer, n, c, o, h, k, s, p)
            if not terms or any(t in conv.name for t in terms):
                out.append(conv)
    return out


def pass_flops(conv: Conv, pass_: str) -> int:
    return conv.flops * (3 if pass_ == "fwd+bwd" else 1)


def arrays(conv: Conv, seed: int = 0) -> dict[str, np.ndarray]:
    """x, w (He-scaled), b and a cotangent g of y's shape, float32, from a seeded generator."""
    rng = np.random.default_rng(seed)
    f = np.float32
    he = f(np.sqrt(2 / (conv.c * conv.k ** 2)))
    return {"x": rng.standard_normal((conv.n, conv.c, conv.h, conv.h), dtype=f),
            "w": rng.standard_normal((conv.o, conv.c, conv.k, conv.k), dtype=f) * he,
            "b": rng.standard_normal(conv.o, dtype=f) * f(0.1),
            "g": rng.standard_normal((conv.n, conv.o, conv.oh, conv.oh), dtype=f)}


# ---------------------------------------------------------------------- plain NumPy
# Bytes of im2col columns per chunk of images: a chunk is multiplied while its columns are in cache (the
# value ember's own convolution uses, ember/ops/windows.py)
CHUNK_BYTES = 2 << 20


def _chunk(n: int, per_image: int) -> int:
    return max(1, min(n, CHUNK_BYTES // max(per_image, 1)))


def _out(h: int, k: int, s: int, p: int) -> int:
    return (h + 2 * p - k) // s + 1


def _rows(a: int, s: int, n_out: int) -> slice:
    """The entries of a padded axis that kernel offset a reads for n_out windows of stride s."""
    return slice(a, a + s * (n_out - 1) + 1, s)


def im2col(x: np.ndarray, k: int, s: int, p: int, layout: str):
    """Yield (n0, n1, columns of images n0:n1), K = C·k·k, L = OH·OW:
    nchw (m, K, L), rows in (c, a, b) order; cnhw (K, m·L), the same rows; nhwc (m·L, K), columns in (a, b, c)
    order. Each chunk is padded into a reused zero-bordered buffer in the layout's axis order, then its windows
    are copied out of a strided view in one `copyto`."""
    n, c, h, w = x.shape
    oh, ow = _out(h, k, s, p), _out(w, k, s, p)
    big, lk = c * k * k, oh * ow
    m = _chunk(n, big * lk * x.itemsize)
    hp, wp = h + 2 * p, w + 2 * p
    pad_shape = {"nchw": (m, c, hp, wp), "cnhw": (c, m, hp, wp), "nhwc": (m, hp, wp, c)}[layout]
    pad = None if layout == "nchw" and p == 0 else np.zeros(pad_shape, x.dtype)
    buf = np.empty(m * big * lk, x.dtype)
    for n0 in range(0, n, m):
        n1 = min(n0 + m, n)
        mm = n1 - n0
        if layout == "nchw":
            src = x[n0:n1]
            if pad is not None:
                src = pad[:mm]
                src[:, :, p:p + h, p:p + w] = x[n0:n1]
            sn, sc, sh, sw = src.strides
            shape, strides = (mm, c, k, k, oh, ow), (sn, sc, sh, sw, sh * s, sw * s)
            flat = (mm, big, lk)
        elif layout == "cnhw":
            src = pad[:, :mm]
            src[:, :, p:p + h, p:p + w] = x[n0:n1].transpose(1, 0, 2, 3)
            sc, sn, sh, sw = src.strides
            shape, strides = (c, k, k, mm, oh, ow), (sc, sh, sw, sn, sh * s, sw * s)
            flat = (big, mm * lk)
        else:
            src = pad[:mm]
            src[:, p:p + h, p:p + w] = x[n0:n1].transpose(0, 2, 3, 1)
            sn, sh, sw, sc = src.strides
            shape, strides = (mm, oh, ow, k, k, c), (sn, sh * s, sw * s, sh, sw, sc)
            flat = (mm * lk, big)
        cols = buf[:mm * big * lk].reshape(shape)
        np.copyto(cols, as_strided(src, shape, strides, writeable=False))
        yield n0, n1, cols.reshape(flat)


def _weight_matrix(w: np.ndarray, layout: str) -> np.ndarray:
    """w as (O, K), K in the order of the layout's columns: (c, a, b), or (a, b, c) for nhwc."""
    if layout == "nhwc":
        w = np.ascontiguousarray(w.transpose(0, 2, 3, 1))
    return w.reshape(w.shape[0], -1)


def forward(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, s: int, p: int, layout: str) -> np.ndarray:
    """y[n, o] = b[o] + Σ_{c,a,b} w[o, c, a, b] · x_pad[n, c, i·s + a, j·s + b]: one GEMM per chunk (per image
    for nchw) over the columns of `im2col`, into the (N, O, OH, OW) result."""
    n, o, k = x.shape[0], w.shape[0], w.shape[2]
    oh, ow = _out(x.shape[2], k, s, p), _out(x.shape[3], k, s, p)
    wm = _weight_matrix(w, layout)
    y = np.empty((n, o, oh, ow), x.dtype)
    for n0, n1, cols in im2col(x, k, s, p, layout):
        mm = n1 - n0
        if layout == "nchw":
            np.matmul(wm, cols, out=y[n0:n1].reshape(mm, o, oh * ow))
        elif layout == "cnhw":
            y[n0:n1] = (wm @ cols).reshape(o, mm, oh, ow).transpose(1, 0, 2, 3)
        else:
            y[n0:n1] = (cols @ wm.T).reshape(mm, oh, ow, o).transpose(0, 3, 1, 2)
    if b is not None:
        y += b.reshape(o, 1, 1)
    return y


def weight_grad(x: np.ndarray, g: np.ndarray, s: int, p: int, k: int, layout: str) -> np.ndarray:
    """dw[o, c, a, b] = Σ_{n,i,j} g[n, o, i, j] · x_pad[n, c, i·s + a, j·s + b]: per chunk, g (O, ·) @ colsᵀ."""
    n, o, oh, ow = g.shape
    c = x.shape[1]
    dw = np.zeros((o, c * k * k), x.dtype)
    for n0, n1, cols in im2col(x, k, s, p, layout):
        mm = n1 - n0
        if layout == "nchw":  # a product per image, then their sum
            dw += np.matmul(g[n0:n1].reshape(mm, o, oh * ow), cols.transpose(0, 2, 1)).sum(0)
        elif layout == "cnhw":
            dw += np.ascontiguousarray(g[n0:n1].reshape(mm, o, oh * ow).transpose(1, 0, 2)).reshape(o, -1) @ cols.T
        else:
            dw += np.ascontiguousarray(g[n0:n1].transpose(0, 2, 3, 1)).reshape(-1, o).T @ cols
    if layout == "nhwc":
        return np.ascontiguousarray(dw.reshape(o, k, k, c).transpose(0, 3, 1, 2))
    return dw.reshape(o, c, k, k)


def input_grad(g: np.ndarray, w: np.ndarray, s: int, p: int, hw: tuple, layout: str) -> np.ndarray:
    """dx[n, c, y, x] = Σ over the windows (i, j) and kernel offsets (a, b) that read x_pad[n, c, y + p, x + p]
    of g[n, o, i, j] · w[o, c, a, b]: the adjoint of the forward, scattered back offset by offset."""
    n, o, oh, ow = g.shape
    c, k = w.shape[1], w.shape[2]
    h, wd = hw
    hp, wp, lk = h + 2 * p, wd + 2 * p, oh * ow
    dx = np.empty((n, c, h, wd), g.dtype)
    if layout == "nhwc":  # col2im: one (m·L, O) @ (O, K) product, then k² strided adds of its column blocks
        wm = _weight_matrix(w, layout)
        m = _chunk(n, c * k * k * lk * g.itemsize)
        buf = np.empty((m, hp, wp, c), g.dtype)
        for n0 in range(0, n, m):
            n1 = min(n0 + m, n)
            mm = n1 - n0
            acc = buf[:mm]
            acc.fill(0)
            gm = np.ascontiguousarray(g[n0:n1].transpose(0, 2, 3, 1)).reshape(mm * lk, o)
            dcols = (gm @ wm).reshape(mm, oh, ow, k, k, c)
            for a in range(k):
                for b in range(k):
                    acc[:, _rows(a, s, oh), _rows(b, s, ow)] += dcols[:, :, :, a, b]
            dx[n0:n1] = acc[:, p:p + h, p:p + wd].transpose(0, 3, 1, 2)
        return dx
    # nchw / cnhw: per kernel offset one (C, O) @ (O, ·) product into the slice of the padded buffer it reads
    wt = np.ascontiguousarray(w.transpose(2, 3, 1, 0))  # (k, k, C, O)
    m = _chunk(n, 2 * (c * hp * wp + o * lk) * g.itemsize)
    buf = np.empty((m, c, hp, wp) if layout == "nchw" else (c, m, hp, wp), g.dtype)
    for n0 in range(0, n, m):
        n1 = min(n0 + m, n)
        mm = n1 - n0
        if layout == "nchw":
            acc, gm, part_shape = buf[:mm], g[n0:n1].reshape(mm, o, lk), (mm, c, oh, ow)
        else:
            acc, part_shape = buf[:, :mm], (c, mm, oh, ow)
            gm = np.ascontiguousarray(g[n0:n1].reshape(mm, o, lk).transpose(1, 0, 2)).reshape(o, mm * lk)
        acc.fill(0)
        for a in range(k):
            for b in range(k):
                acc[..., _rows(a, s, oh), _rows(b, s, ow)] += np.matmul(wt[a, b], gm).reshape(part_shape)
        inner = acc[..., p:p + h, p:p + wd]
        dx[n0:n1] = inner if layout == "nchw" else inner.transpose(1, 0, 2, 3)
    return dx


def input_grad_full(g: np.ndarray, w: np.ndarray, s: int, p: int, hw: tuple, layout: str) -> np.ndarray:
    """Stride 1: dx is the forward convolution of g, padded by k-1-p, with the kernel flipped in space and its
    channel axes swapped: wf[c, o, a, b] = w[o, c, k-1-a, k-1-b]."""
    if s != 1 or p > w.shape[2] - 1:
        raise ValueError(f"the full convolution gives dx at stride 1 with padding ≤ k-1 only (got stride {s}, "
                         f"padding {p})")
    wf = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
    return forward(g, wf, None, 1, w.shape[2] - 1 - p, layout)


LAYOUTS = ("nchw", "cnhw", "nhwc")


def formulations(conv: Conv) -> dict[str, dict[str, Callable]]:
    """{pass: {label: f}} for fwd (f(x, w, b)), dx (f(g, w)) and dw (f(x, g)): every formulation that applies."""
    s, p, k, hw = conv.s, conv.p, conv.k, (conv.h, conv.h)
    out = {"fwd": {}, "dx": {}, "dw": {}}
    for lay in LAYOUTS:
        out["fwd"][lay] = functools.partial(forward, s=s, p=p, layout=lay)
        out["dx"][lay + (" col2im" if lay == "nhwc" else " offsets")] = functools.partial(
            input_grad, s=s, p=p, hw=hw, layout=lay)
        if s == 1 and p <= k - 1:
            out["dx"][f"full {lay}"] = functools.partial(input_grad_full, s=s, p=p, hw=hw, layout=lay)
        out["dw"][lay] = functools.partial(weight_grad, s=s, p=p, k=k, layout=lay)
    return out


def bias_grad(g: np.ndarray) -> np.ndarray:
    """db[o] = Σ_{n,i,j} g[n, o, i, j], as two matrix-vector products (as ember's ChannelSum, which measured them ~4×
    faster than g.sum((0, 2, 3)))."""
    n, o = g.shape[:2]
    per_image = g.reshape(n * o, -1) @ np.ones(g.shape[2] * g.shape[3], g.dtype)
    return np.ones(n, g.dtype) @ per_image.reshape(n, o)


def _close(a: np.ndarray, ref: np.ndarray, tol: float = 1e-4) -> bool:
    """Equal up to float32 rounding: the largest difference at most tol of ref's largest magnitude."""
    return a.shape == ref.shape and float(np.abs(a - ref).max()) <= tol * max(float(np.abs(ref).max()), 1e-30)


def numpy_cases(conv: Conv, a: dict, refs: dict, calls: int = 3) -> tuple[dict, dict]:
    """The NumPy steps of the four passes and what was picked: for fwd, dx and dw each formulation is checked
    against `refs` (ember's y, dx, dw; a mismatch raises AssertionError) and timed, after a wait for idle
    threads, as the best of `calls` calls; the fastest is kept. fwd+bwd runs the three picks and the bias
    gradient. Returns ({pass: step}, {"picked": {pass: label}, "candidates_ms": {pass: {label: ms}}})."""
    x, w, b, g = a["x"], a["w"], a["b"], a["g"]
    args = {"fwd": (x, w, b), "dx": (g, w), "dw": (x, g)}
    steps, picked, cands = {}, {}, {}
    for pass_, forms in formulations(conv).items():
        times = {}
        for label, f in forms.items():
            out = f(*args[pass_])  # also the warm-up
            if not _close(out, refs[pass_]):
                raise AssertionError(f"NumPy {pass_} formulation {label!r} disagrees with ember on {conv.name}: "
                                     f"max |diff| {float(np.abs(out - refs[pass_]).max()):.3g}")
            H.wait_idle()
            times[label] = _best_of(lambda: f(*args[pass_]), calls)
        best = min(times, key=times.get)
        steps[pass_] = functools.partial(forms[best], *args[pass_])
        picked[pass_] = best
        cands[pass_] = {k: round(v * 1e3, 4) for k, v in times.items()}
    fwd, dx, dw = steps["fwd"], steps["dx"], steps["dw"]
    steps["fwd+bwd"] = lambda: (fwd(), dx(), dw(), bias_grad(g))
    return steps, {"picked": picked, "candidates_ms": cands}


# ---------------------------------------------------------------------- ember and PyTorch
def library_cases(lib, conv: Conv, a: dict) -> dict[str, Callable[[], object]]:
    """The four passes in ember or PyTorch (the same API), on tensors sharing `a`'s arrays."""
    F, grad = lib.nn.functional.conv2d, lib.autograd.grad
    kw = {"stride": conv.s, "padding": conv.p}

    def t(name: str, requires_grad: bool = False):
        return lib.from_numpy(a[name]).requires_grad_(requires_grad)

    x, w, b, g = t("x"), t("w"), t("b"), t("g")

    def fwd():
        with lib.no_grad():
            return F(x, w, b, **kw)

    xr, wr = t("x", True), t("w", True)
    y_dx, y_dw = F(xr, w, b, **kw), F(x, wr, b, **kw)  # built once; each call runs the backward again
    xt, wt, bt = t("x", True), t("w", True), t("b", True)
    return {"fwd": fwd,
            "dx": lambda: grad(y_dx, xr, g, retain_graph=True),
            "dw": lambda: grad(y_dw, wr, g, retain_graph=True),
            "fwd+bwd": lambda: grad(F(xt, wt, bt, **kw), (xt, wt, bt), g)}


# ---------------------------------------------------------------------- the run (a child process)
def run(threads: int, repeats: int, sample_s: float, quick: bool, pattern: str | None, no_torch: bool) -> dict:
    """Everything measured, as a JSON-able dict. The pools were pinned by the parent's environment; PyTorch's
    also through torch.set_num_threads."""
    import ember
    torch = None if no_torch else H.import_torch(IMPLS)
    if torch is not None:
        torch.set_num_threads(threads)
    impls = [i for i in IMPLS if i != "pytorch" or torch is not None]
    shapes = convs(quick, pattern)
    progress = H.Progress(2 * repeats + len(shapes) * len(PASSES) * len(impls) * repeats, f"conv, {threads} threads")
    res: dict = {"threads": threads, "repeats": repeats, "sample_s": sample_s, "numpy": np.__version__,
                 "torch": getattr(torch, "__version__", None),
                 "torch_threads": torch.get_num_threads() if torch else None,
                 "env": {v: os.environ.get(v) for v in H.THREAD_VARS}, "target": FWD_BWD_TARGET,
                 "matmul_gflops": _matmul_gflops(repeats, sample_s, progress), "rows": []}
    for conv in shapes:
        progress.phase(conv.name)
        a = arrays(conv)
        ember_steps = library_cases(ember, conv, a)
        progress.doing("picking the NumPy formulations")
        refs = {"fwd": ember_steps["fwd"]().numpy(), "dx": ember_steps["dx"]()[0].numpy(),
                "dw": ember_steps["dw"]()[0].numpy()}
        np_steps, picks = numpy_cases(conv, a, refs)
        per_impl = {"ember": ember_steps, "numpy": np_steps}
        if torch is not None:
            per_impl["pytorch"] = library_cases(torch, conv, a)
        row = {**conv._asdict(), "name": conv.name, "oh": conv.oh, "flops": conv.flops, "numpy_forms": picks,
               "passes": {}}
        for pass_ in PASSES:
            progress.phase(f"{conv.name} {pass_}")
            row["passes"][pass_] = H.measure({k: v[pass_] for k, v in per_impl.items()}, 1, repeats, sample_s,
                                             progress)
        res["rows"].append(row)
    res["matmul_gflops_end"] = _matmul_gflops(repeats, sample_s, progress)
    progress.close()
    return res


# ---------------------------------------------------------------------- the report
def _ms(r: dict, k: str) -> str:
    return f"{r[k]['ms']:.3f}" if k in r and "ms" in r[k] else "–"


def _gflops(r: dict, k: str, flops: int) -> str:
    return f"{flops / r[k]['ms'] / 1e6:.1f}" if k in r and "ms" in r[k] else "–"


def report(res: dict, machine: dict | None = None) -> str:
    """The markdown report: the geometry of each layer, then one row per shape and pass."""
    flagged = [{"block": f"{row['name']} {p}", "others_cores": r["load"]["others_cores"]}
               for row in res["rows"] for p, r in row["passes"].items() if r["load"]["under_load"]]
    m = machine or {}
    lines = [f"### Convolutions per shape ({res['threads']} BLAS thread(s), {res['repeats']} interleaved repeats; "
             f"float32, NCHW, with bias)", ""]
    lines += load_banner(flagged, m.get("load_avg_at_start"), m.get("cores"))
    if m:
        lines += [f"{m.get('cpu')}, {m.get('cores')} cores, NumPy {m.get('numpy')} ({m.get('blas')}), "
                  f"PyTorch {res['torch'] or 'not run'}; load average {m.get('load_avg_at_start')} at the start.", ""]
    lines += [f"float32 matmul 2048²: {res['matmul_gflops']:.0f} GFLOP/s at the start, "
              f"{res['matmul_gflops_end']:.0f} at the end.", ""]
    seen, geo = set(), ["| layer | C → O | kernel, stride, padding | H×W → OH×OW |", "|---|---:|---|---|"]
    for row in res["rows"]:
        if row["layer"] not in seen:
            seen.add(row["layer"])
            geo.append(f"| {row['layer']} | {row['c']} → {row['o']} | {row['k']}×{row['k']}, s{row['s']}, "
                       f"p{row['p']} | {row['h']}² → {row['oh']}² |")
    lines += geo + [""]
    lines += ["| layer | batch | pass | ember ms | GFLOP/s | NumPy ms | GFLOP/s | NumPy formulation | PyTorch ms | "
              "GFLOP/s | ember/NumPy | ember/PyTorch |", "|---|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    below = []
    for row in res["rows"]:
        picked = row["numpy_forms"]["picked"]
        for i, (pass_, r) in enumerate(row["passes"].items()):
            fl = row["flops"] * (3 if pass_ == "fwd+bwd" else 1)
            form = picked.get(pass_, "fwd, dx, dw picks + db")
            ratios = r.get("ratios", {})
            vs_np = f"{ratios['numpy']:.2f}×" if "numpy" in ratios else "–"
            vs_torch = f"{ratios['pytorch']:.2f}×" if "pytorch" in ratios else "–"
            if pass_ == "fwd+bwd" and "pytorch" in ratios:
                ok = ratios["pytorch"] >= res["target"]
                vs_torch = f"{vs_torch} ✓" if ok else f"**{vs_torch} ✗**"
                if not ok:
                    below.append(f"{row['name']} ({ratios['pytorch']:.2f}×)")
            warn = " ⚠" if r["load"]["under_load"] else ""
            head = f"| {row['layer']} | {row['n']} |" if i == 0 else "| | |"
            lines.append(f"{head} {pass_}{warn} | {_ms(r, 'ember')} | {_gflops(r, 'ember', fl)} | {_ms(r, 'numpy')} | "
                         f"{_gflops(r, 'numpy', fl)} | {form} | {_ms(r, 'pytorch')} | {_gflops(r, 'pytorch', fl)} | "
                         f"{vs_np} | {vs_torch} |")
    lines += ["", "ms: median per call; GFLOP/s counts 2·N·O·C·k²·OH·OW per pass (three passes for fwd+bwd). "
              "Ratios are ember's throughput over the other's (above 1: ember is faster), medians of the per-repeat "
              f"ratios. ⚠: other processes used more than {H.OTHERS_LIMIT} cores while that pass was timed."]
    if any("pytorch" in r.get("ratios", {}) for row in res["rows"] for r in row["passes"].values()):
        n = len(res["rows"])
        lines.append(f"Target: ember/PyTorch fwd+bwd ≥ {res['target']} on every shape; "
                     + (f"below it on {len(below)} of {n}: {', '.join(below)}." if below else f"met on all {n}."))
    return "\n".join(lines)


# ---------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="python -m ember bench --only conv", description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="BLAS/OpenMP threads for every library (default 2)")
    ap.add_argument("--repeats", type=int, help="interleaved repeats per pass (default 7, 2 with --quick)")
    ap.add_argument("--quick", action="store_true", help=f"batch {QUICK_BATCH} only, 2 repeats of short samples")
    ap.add_argument("--filter", help="only the shapes whose name (LAYER/bBATCH, e.g. r18.64/b32) contains one of "
                                     "these comma-separated terms")
    ap.add_argument("--no-torch", action="store_true", help="leave PyTorch out even where it is installed")
    ap.add_argument("--output", metavar="FILE", help="also write the markdown report to FILE")
    ap.add_argument("--json", metavar="FILE", help="also write every measurement as JSON to FILE")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    repeats = a.repeats or (2 if a.quick else 7)
    if a.threads < 1 or repeats < 1:
        ap.error("--threads and --repeats must be positive")
    if not convs(a.quick, a.filter):
        ap.error(f"--filter {a.filter!r} matches no shape; names are LAYER/bBATCH with LAYER one of "
                 f"{', '.join(layer[0] for layer in LAYERS)}")
    sample_s = 0.005 if a.quick else 0.05
    if a.worker:
        import warnings
        warnings.simplefilter("ignore")
        print(json.dumps(run(a.threads, repeats, sample_s, a.quick, a.filter, a.no_torch)))
        return 0
    # the pools are sized from the environment when NumPy and PyTorch load: measure in a child
    machine = machine_info()
    t0 = time.perf_counter()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = H.thread_env(a.threads)
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "benchmarks.conv", "--worker", "--threads", str(a.threads), "--repeats", str(repeats)]
    cmd += (["--quick"] if a.quick else []) + (["--no-torch"] if a.no_torch else [])
    cmd += ["--filter", a.filter] if a.filter else []
    proc = subprocess.run(cmd, env=env, cwd=root, stdout=subprocess.PIPE, text=True)  # its stderr: the progress
    if proc.returncode:
        print(f"python -m ember bench --only conv: the measuring process failed (exit {proc.returncode}); its error "
              f"output is above", file=sys.stderr)
        return proc.returncode
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["machine"], res["wall_s"] = machine, round(time.perf_counter() - t0, 1)
    return emit(report(res, machine) + f"\n\nRun took {res['wall_s']:.0f} s.", res, a)


if __name__ == "__main__":
    sys.exit(main())
