"""What every workload shares: thread pinning, interleaved timing, and the summary of samples.

A workload is a dict {implementation: step}, each step a zero-argument callable running one full
step on data bound inside it. `interleave` times the implementations repeat by repeat in rotating
order (so drift in machine speed hits all alike), gc off while timing, as timeit does; a sample is
the mean over enough consecutive steps to last `sample_s`. Throughput ratios are the medians of
the per-repeat ratios of paired samples.
"""
from __future__ import annotations

import gc
import os
import statistics
import time
from typing import Callable

IMPLS = ("ember", "numpy", "pytorch")
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "NUMEXPR_NUM_THREADS")


def thread_env(threads: int, env: dict | None = None) -> dict:
    """The environment pinning every BLAS/OpenMP pool to `threads` (read once, when NumPy/PyTorch load).

    OMP_WAIT_POLICY=PASSIVE: PyTorch's OpenMP workers otherwise spin after each parallel region and,
    on 2 cores, starve the OpenBLAS threads of the NumPy-based implementations run beside them."""
    env = dict(os.environ if env is None else env)
    for var in THREAD_VARS:
        env[var] = str(threads)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def _calibrate(fn: Callable[[], object], sample_s: float) -> int:
    """Steps per sample: enough for `sample_s` seconds, judged from the fastest of three single steps."""
    best = min(_run(fn, 1) for _ in range(3))
    return max(1, round(sample_s / max(best, 1e-7)))


def _run(fn: Callable[[], object], steps: int) -> float:
    """Seconds per step over `steps` consecutive calls, gc disabled."""
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
        return (time.perf_counter() - t0) / steps
    finally:
        gc.enable()


def interleave(cases: dict[str, Callable[[], object]], repeats: int, sample_s: float = 0.1,
               warmup: int = 2) -> dict[str, list[float]]:
    """Seconds per step of each case, `repeats` samples each, the cases rotating their order each repeat."""
    for fn in cases.values():  # first calls fill caches, allocator arenas, optimizer state, BLAS pools
        _run(fn, warmup)
    steps = {k: _calibrate(fn, sample_s) for k, fn in cases.items()}
    names = list(cases)
    samples: dict[str, list[float]] = {k: [] for k in names}
    for r in range(repeats):
        for k in names[r % len(names):] + names[:r % len(names)]:
            samples[k].append(_run(cases[k], steps[k]))
    return samples


def summarize(samples: dict[str, list[float]], items: int, reference: str = "ember") -> dict:
    """Per case: items/s (median, min, max) and step ms (median); then `reference`/other throughput ratios."""
    out: dict = {}
    for k, v in samples.items():
        med = statistics.median(v)
        out[k] = {"per_s": items / med, "min": items / max(v), "max": items / min(v), "ms": med * 1e3}
    if reference in samples:
        ref = samples[reference]
        out["ratios"] = {other: statistics.median(o / e for e, o in zip(ref, samples[other]))
                         for other in samples if other != reference}
    return out


def measure(cases: dict[str, Callable[[], object]], items: int, repeats: int, sample_s: float = 0.1) -> dict:
    """interleave + summarize."""
    return summarize(interleave(cases, repeats, sample_s), items)


def import_torch(impls) -> object | None:
    """PyTorch when "pytorch" is among `impls` and it is installed, else None."""
    if "pytorch" not in impls:
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch


def in_order(cases: dict) -> dict:
    """`cases` in the order of IMPLS (extra entries after them)."""
    return {k: cases[k] for k in sorted(cases, key=lambda k: IMPLS.index(k) if k in IMPLS else len(IMPLS))}


def train_step(model, opt, loss_fn, x, y) -> Callable[[], object]:
    """One training step in ember or PyTorch (the same API): zero the grads, loss, backward, update.
    Returns the detached loss."""
    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def synced(step: Callable[[], object], device: str, lib) -> Callable[[], object]:
    """`step` followed by waiting for `device` with `lib.cuda.synchronize` (lib: ember or torch), so that a
    timing counts the work a GPU queued, not only its launch; `step` itself on the CPU."""
    if device == "cpu":
        return step
    sync = lib.cuda.synchronize

    def run():
        out = step()
        sync()
        return out
    return run

