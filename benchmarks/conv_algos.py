"""Each of conv2d's algorithms forced onto the shapes it can take: the measurement behind the thresholds of
ember/ops/nn_conv.py (`WINOGRAD_MIN_CHANNELS`, `WINOGRAD_MIN_TILES`, `FOLDED_MAX_PIXELS`).

    python -m benchmarks.conv_algos [--threads 1] [--cpu-time] [--repeats 5] [SHAPE ...]

For each shape: the forward (keeping what the weight gradient reuses, as in training), the input gradient and
the weight gradient, in ms (best of `--repeats`, the algorithms interleaved), through the array kernels
(`_conv`, `conv_transpose_array`, `_conv_weight_grad`) with no autograd around them. `--cpu-time` times the
process's CPU time instead of the wall clock: with one thread that is the work done, whatever else the machine
runs (docs/performance.md, "Issue 24", used it on a shared machine). The BLAS threads are pinned before NumPy
loads.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

# (N, C, H = W, O, k, stride, padding)
SHAPES = {
    "w3c2": (32, 16, 14, 32, 3, 1, 1), "r64": (32, 64, 32, 64, 3, 1, 1), "r128": (32, 128, 16, 128, 3, 1, 1),
    "r256": (32, 256, 8, 256, 3, 1, 1), "r512": (32, 512, 4, 512, 3, 1, 1), "s128": (32, 64, 32, 128, 3, 2, 1),
    "s256": (32, 128, 16, 256, 3, 2, 1), "s512": (32, 256, 8, 512, 3, 2, 1), "d128": (32, 64, 32, 128, 1, 2, 0),
    "d256": (32, 128, 16, 256, 1, 2, 0), "d512": (32, 256, 8, 512, 1, 2, 0), "r64b1": (1, 64, 32, 64, 3, 1, 1),
    "r256b1": (1, 256, 8, 256, 3, 1, 1), "r512b1": (1, 512, 4, 512, 3, 1, 1),
}
# the module constants that make each algorithm the choice wherever it can run
FORCE = {
    "im2col": dict(WINOGRAD_MIN_CHANNELS=10 ** 9, WINOGRAD_MIN_TILES=1, FOLDED_MAX_PIXELS=0),
    "folded": dict(WINOGRAD_MIN_CHANNELS=10 ** 9, WINOGRAD_MIN_TILES=1, FOLDED_MAX_PIXELS=10 ** 9),
    "winograd": dict(WINOGRAD_MIN_CHANNELS=1, WINOGRAD_MIN_TILES=1, FOLDED_MAX_PIXELS=0),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.conv_algos", description=__doc__.split("\n\n")[0])
    ap.add_argument("shapes", nargs="*", help=f"of {', '.join(SHAPES)} (default: all)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--cpu-time", action="store_true", help="CPU time of this process instead of wall time")
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args(argv)
    unknown = [s for s in a.shapes if s not in SHAPES]
    if unknown:
        ap.error(f"unknown shape {unknown[0]!r}: one of {', '.join(SHAPES)}")
    if "numpy" in sys.modules:
        raise RuntimeError("run this module in a fresh process: its thread pins must precede NumPy")
    for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[v] = str(a.threads)
    import numpy as np

    from ember.ops import nn_conv
    from ember.ops.windows import Win

    clock = time.process_time if a.cpu_time else time.perf_counter
    saved = {k: getattr(nn_conv, k) for k in FORCE["im2col"]}
    print(f"ms per pass (forward, input gradient, weight gradient = sum), best of {a.repeats}, {a.threads} thread(s), "
          f"{'CPU' if a.cpu_time else 'wall'} time")
    try:
        for name in a.shapes or SHAPES:
            n, c, h, o, k, s, p = SHAPES[name]
            rng = np.random.default_rng(0)
            x = rng.standard_normal((n, c, h, h), dtype=np.float32)
            w = (rng.standard_normal((o, c, k, k)) * 0.05).astype(np.float32)
            win = Win((k, k), (s, s), (1, 1), ((p, p), (p, p)))
            g = rng.standard_normal((n, o) + win.out((h, h))).astype(np.float32)
            algos = []
            for algo, consts in FORCE.items():  # those that run on this shape when forced
                for key, v in consts.items():
                    setattr(nn_conv, key, v)
                if nn_conv.algorithm(x, w.shape, win, 1) == algo:
                    algos.append(algo)
            best = {algo: [float("inf")] * 3 for algo in algos}
            for _ in range(a.repeats):
                for algo in algos:
                    for key, v in FORCE[algo].items():
                        setattr(nn_conv, key, v)
                    t0 = clock()
                    _, kept = nn_conv._conv(x, w, None, win, 1, keep=True)
                    t1 = clock()
                    nn_conv.conv_transpose_array(g, w, win, 1, (h, h))
                    t2 = clock()
                    nn_conv._conv_weight_grad(x, g, win, 1, w.shape, kept)
                    t3 = clock()
                    best[algo] = [min(b, t) for b, t in zip(best[algo], (t1 - t0, t2 - t1, t3 - t2))]
            cells = " | ".join(f"{algo} " + " ".join(f"{t * 1e3:.2f}" for t in ts) + f" = {sum(ts) * 1e3:.1f}"
                               for algo, ts in best.items())
            print(f"{name} (N={n}, {c}->{o}, {h}², k={k}, s={s}): {cells}", flush=True)
    finally:
        for key, v in saved.items():
            setattr(nn_conv, key, v)
    return 0


if __name__ == "__main__":
    sys.exit(main())
