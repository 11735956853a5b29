"""A long W2 training run that samples its own memory: the subject of `test_long_run.py`.

    python tests/_long_run.py STEPS [--every K] [--batch B]

Trains the W2 ResMLP of `benchmarks/resmlp.py` (Adam, dropout, LayerNorm, residual adds) for
STEPS steps on a fixed synthetic MNIST-sized set through a shuffling DataLoader, the way a user
writes the loop, including the habits that keep a graph alive between steps (the last loss and
the last output stay referenced). Every K steps, between two steps, it samples:

* `rss`: the resident set size now (from /proc/self/statm, not the peak), in bytes;
* `blocks`: `sys.getallocatedblocks()`, the Python objects and buffers alive (a leak of small
  Python objects shows here long before it moves the RSS);
* `nodes`, `tensors`: the live graph nodes and Tensors found by the garbage collector;
* `node_bytes`: the array bytes those nodes still hold (saved inputs, outputs, masks...).

It prints one JSON object per sample, then `{"done": STEPS, "loss": ...}`. A separate process
so the RSS belongs to this run alone, not to the test session's other tests.
"""
from __future__ import annotations

import gc
import json
import os
import sys

# One BLAS thread: the matrices are small and the CI machine has 2 shared cores (see _crash_train.py).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

import ember  # noqa: E402
from benchmarks import resmlp  # noqa: E402
from ember.autograd.function import Node  # noqa: E402

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """The current resident set size (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def held_bytes(obj) -> int:
    """Array bytes held by a node: its saved inputs/output and arrays kept on it."""
    total = 0
    values = [getattr(obj, "inputs", None), getattr(obj, "out", None)]
    values += list(getattr(obj, "__dict__", {}).values())
    for v in values:
        for a in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(a, ember.Tensor):
                a = a._data
            total += getattr(a, "nbytes", 0) if isinstance(a, np.ndarray) else 0
    return total


def sample(step: int) -> dict:
    gc.collect()
    nodes = tensors = node_bytes = 0
    for o in gc.get_objects():
        if isinstance(o, Node):
            nodes += 1
            node_bytes += held_bytes(o)
        elif isinstance(o, ember.Tensor):
            tensors += 1
    return {"step": step, "rss": rss_bytes(), "blocks": sys.getallocatedblocks(), "nodes": nodes,
            "tensors": tensors, "node_bytes": node_bytes}


def main(argv: list[str]) -> None:
    steps = int(argv[0])
    every = int(argv[argv.index("--every") + 1]) if "--every" in argv else 500
    batch = int(argv[argv.index("--batch") + 1]) if "--batch" in argv else resmlp.BATCH
    ember.manual_seed(0)
    rng = np.random.default_rng(0)
    n = 16 * batch
    x = rng.standard_normal((n, resmlp.D_IN)).astype(np.float32)
    y = rng.integers(0, resmlp.N_CLASSES, n)
    loader = ember.utils.data.DataLoader(
        ember.utils.data.TensorDataset(ember.from_numpy(x), ember.from_numpy(y)),
        batch_size=batch, shuffle=True, drop_last=True)
    model = resmlp.ember_model()
    opt = ember.optim.Adam(model.parameters(), lr=resmlp.LR)
    loss_fn = ember.nn.CrossEntropyLoss()
    model.train()
    step, loss, out = 0, None, None
    while step < steps:
        for xb, yb in loader:
            opt.zero_grad()
            out = model(xb)  # kept until the next step: its graph must not keep arrays alive
            loss = loss_fn(out, yb)
            loss.backward()
            opt.step()
            step += 1
            if step % every == 0:
                print(json.dumps(sample(step)), flush=True)
            if step == steps:
                break
    print(json.dumps({"done": step, "loss": float(loss)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
