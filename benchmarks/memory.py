"""Peak resident memory of training: one implementation of one workload, alone in this process.

    python -m benchmarks.memory {w1,w3} {ember,ember-compile-step,ember-compile-model,numpy,pytorch} [--steps 200]

prints one JSON line: the peak RSS (`ru_maxrss`) after the imports and the model's set-up, and after
`--steps` training steps. Each implementation runs in a process of its own, so that one library's
imports and caches are not counted against another; the suite (`python -m ember bench`) starts them.
An ember.compile step is captured during the set-up (without the eager twin the suite checks it against:
its steps would count here) and the line adds its `stats` after the steps and `replayed`: whether every
step after the set-up replayed the captured program (no capture, no eager call among them).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys

from benchmarks._harness import EMBER_COMPILED, EMBER_MODEL, EMBER_STEP, Skipped


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=["w1", "w3"])
    ap.add_argument("impl", choices=["ember", EMBER_STEP, EMBER_MODEL, "numpy", "pytorch"])
    ap.add_argument("--steps", type=int, default=200)
    a = ap.parse_args(argv)
    if a.impl in EMBER_COMPILED:  # the memory target is the default mode's (max-autotune adds numba: ~120 MiB)
        from benchmarks import ember_compile
        ember_compile.MODE = "default"
    if a.workload == "w1":
        from benchmarks.mlp import cases
    else:
        from benchmarks.cnn import train_cases as cases
    step = cases(impls=(a.impl,), **({"check": False} if a.impl in EMBER_COMPILED else {}))[a.impl]
    if isinstance(step, Skipped):  # an ember.compile step that fell back to eager: no compiled figure
        print(json.dumps({"workload": a.workload, "impl": a.impl, "steps": a.steps, "skipped": step.reason}))
        return 0
    before = step.ember_compile["stats_before_timing"] if a.impl in EMBER_COMPILED else None
    if a.impl == "pytorch":
        import torch
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    setup = _peak_mib()
    for _ in range(a.steps):
        step()
    out = {"workload": a.workload, "impl": a.impl, "steps": a.steps, "setup_mib": round(setup, 1),
           "peak_mib": round(_peak_mib(), 1)}
    if before is not None:
        from benchmarks.ember_compile import stats_of
        after = stats_of(step.compiled_fns)
        out.update(stats=after, replayed=after["replays"] - before["replays"] == a.steps
                   and after["captures"] == before["captures"] and after["eager"] == before["eager"])
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
