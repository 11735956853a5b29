"""Per-op speed: `python -m ember bench --only ops` (or `python -m benchmarks.ops`).

Each op family contributes `benchmarks/ops_<family>.py` with a list `CASES` of `Case`s: one call on
realistic inputs, the NumPy/SciPy routine doing the same work, and PyTorch's call. Every case is timed
for ember, NumPy and PyTorch in one process, interleaved repeat by repeat (median of the repeats, each
repeat the best of a few calls, each started once the previous one's threads are idle, as in the suite's
harness), with every library's thread pools limited to the same count
(threadpoolctl for NumPy's BLAS/OpenMP, `torch.set_num_threads` for PyTorch). Cases with `grad` also time
ember's backward (against a fixed random cotangent) and report it over the forward: the issue's target is
a backward no slower than two forwards.

    python -m ember bench --only ops [--threads 2] [--repeats 7] [--filter sort] [--output FILE]
"""
from __future__ import annotations

import argparse
import glob
import importlib
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ._harness import wait_idle


@dataclass
class Case:
    """One timed operation on inputs made once from a seeded NumPy Generator.

    make(rng) -> dict of NumPy arrays (the inputs; float arrays become leaves requiring grad when `grad`).
    ember(E, a) / torch(T, a): the call, given the library module and the dict of its tensors.
    numpy: (label, fn(a)) on the NumPy arrays: the NumPy/SciPy routine doing the same work, or None.
    grad: also time backward of the (first) output against a fixed random cotangent.
    """
    name: str
    make: Callable[[Any], dict]
    ember: Callable[[Any, dict], Any]
    numpy: tuple[str, Callable[[dict], Any]] | None = None
    torch: Callable[[Any, dict], Any] | None = None
    grad: bool = False
    tags: tuple = field(default_factory=tuple)


def load_cases(pattern: str | None = None) -> list[tuple[str, Case]]:
    """(family, case) for every case of every benchmarks/ops_*.py, optionally those whose name contains pattern."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for path in sorted(glob.glob(os.path.join(here, "ops_*.py"))):
        family = os.path.basename(path)[4:-3]
        mod = importlib.import_module(f"benchmarks.ops_{family}")
        for case in getattr(mod, "CASES", []):
            if pattern is None or pattern in case.name or pattern == family:
                out.append((family, case))
    return out


def _first(r):
    return r[0] if isinstance(r, (tuple, list)) else r


def _best_of(fn, calls: int) -> float:
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _calls_for(fn) -> int:
    """Enough calls per repeat that a repeat takes ~20 ms (at least 1, at most 50)."""
    t = _best_of(fn, 1)
    return int(min(50, max(1, 0.02 / max(t, 1e-7))))


def _to_torch(torch, v: np.ndarray):
    if v.dtype.name == "bfloat16":  # (torch.from_numpy does not take ml_dtypes' bfloat16: exact through float32)
        return torch.from_numpy(v.astype(np.float32)).bfloat16()
    return torch.from_numpy(v.copy())


def measure(case: Case, repeats: int, torch=None) -> dict:
    """Median times (seconds) of ember's, NumPy's and PyTorch's forward, and ember's backward, interleaved."""
    import ember
    arrays = case.make(np.random.default_rng(0))
    e_in = {k: ember.from_numpy(v.copy()) for k, v in arrays.items()}
    fns: dict[str, Callable] = {"ember": lambda: case.ember(ember, e_in)}
    if case.numpy is not None:
        fns["numpy"] = lambda: case.numpy[1](arrays)
    if torch is not None and case.torch is not None:
        t_in = {k: _to_torch(torch, v) for k, v in arrays.items()}
        fns["torch"] = lambda: case.torch(torch, t_in)
    if case.grad:
        g_in = {k: ember.from_numpy(v.copy()) for k, v in arrays.items()}
        for t in g_in.values():
            t.requires_grad_(t.is_floating_point())
        out = _first(case.ember(ember, g_in))
        cot = ember.from_numpy(np.random.default_rng(1).standard_normal(out.shape).astype(out._data.dtype))

        def backward():
            _first(case.ember(ember, g_in)).backward(cot)
            for t in g_in.values():
                t.grad = None
        fns["ember fwd+bwd"] = backward
    calls = {}
    for k, f in fns.items():
        wait_idle()
        calls[k] = _calls_for(f)
    samples: dict[str, list] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            # each sample starts once the previous one's threads are idle: a library's spinning pool (OpenMP's
            # wait policy, OpenBLAS's) must not take the cores from the next one (benchmarks/_harness.py)
            wait_idle()
            samples[k].append(_best_of(f, calls[k]))
    return {k: statistics.median(v) for k, v in samples.items()}


def report(rows: list[tuple[str, str, Case, dict]], threads: int) -> str:
    lines = [f"### Per-op speed ({threads} thread(s), float32 unless named; ms, median)", "",
             "| family | case | ember | NumPy/SciPy (routine) | PyTorch | ember / NumPy | ember / PyTorch | "
             "backward / forward |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for family, _, case, t in rows:
        e = t["ember"]
        npx = f"{t['numpy'] * 1e3:.3f} ({case.numpy[0]})" if "numpy" in t else "—"
        tx = f"{t['torch'] * 1e3:.3f}" if "torch" in t else "—"
        rn = f"{e / t['numpy']:.2f}" if "numpy" in t else "—"
        rt = f"{e / t['torch']:.2f}" if "torch" in t else "—"
        bw = f"{(t['ember fwd+bwd'] - e) / e:.2f}" if "ember fwd+bwd" in t else "—"
        lines.append(f"| {family} | {case.name} | {e * 1e3:.3f} | {npx} | {tx} | {rn} | {rt} | {bw} |")
    lines += ["", "Ratios are times: below 1 ember is faster. Targets (issue 22): ember / NumPy ≤ 1.2, "
              "ember / PyTorch ≤ 1.5, backward / forward ≤ 2."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ember bench --only ops", description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2, help="threads for every library (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=7, help="interleaved repeats per case (default: %(default)s)")
    ap.add_argument("--filter", help="only the cases whose name contains this (or a family name)")
    ap.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    ap.add_argument("--output", help="also write the markdown report to this file")
    a = ap.parse_args(argv)
    try:
        import threadpoolctl
        threadpoolctl.threadpool_limits(a.threads)
    except ImportError:
        print("warning: threadpoolctl is not installed; NumPy's thread pools are not limited", file=sys.stderr)
    torch = None
    if not a.no_torch:
        try:
            import torch
            torch.set_num_threads(a.threads)
        except ImportError:
            torch = None
    rows = []
    for family, case in load_cases(a.filter):
        t = measure(case, a.repeats, torch)
        rows.append((family, case.name, case, t))
        print(f"{family:10s} {case.name:50s} ember {t['ember'] * 1e3:9.3f} ms", file=sys.stderr)
    text = report(rows, a.threads)
    print(text)
    if a.output:
        with open(a.output, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
