"""Mixed precision on the CPU: `python -m benchmarks.amp [--batch 128] [--repeats 7] [--no-torch]`.

The W2 ResMLP training step (benchmarks/resmlp.py: Linear(784,100), three residual blocks with LayerNorm and
dropout, Linear(100,10), cross-entropy, Adam) at batch 128, float32 against `autocast("cpu")` (bfloat16), in
ember and, for reference, in PyTorch; timed interleaved in one process (`_harness.measure`) at the thread count
the environment sets. Reported: ms per step and each library's autocast/float32 time ratio.

What to expect from ember: NumPy has no bfloat16 matmul, so a bfloat16 op is computed in float32 after widening
its inputs and rounded once after (`autograd.function.dispatch`); autocast adds the casts (the inputs of every
Linear to bfloat16, each result back up where a LayerNorm or the loss needs float32) and runs the same float32
BLAS calls, in the forward and again in the backward. It saves no arithmetic and costs extra passes over memory:
a slowdown, not a speed-up. PyTorch can use native bfloat16 kernels where the CPU has them (AVX512-BF16, AMX).
"""
from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

from . import _harness as H
from . import nets
from .resmlp import D_BOT, D_HID, D_IN, LR, N_BLOCKS, N_CLASSES, P_DROP


def _step(lib, autocast: bool, batch: int):
    """One training step of the ResMLP in `lib` (ember or torch), under autocast("cpu") or in float32."""
    rng = np.random.default_rng(0)
    x = lib.tensor(rng.standard_normal((batch, D_IN)).astype(np.float32))
    y = lib.tensor(rng.integers(0, N_CLASSES, batch))
    lib.manual_seed(0)
    model = nets.resmlp(lib.nn, D_IN, D_HID, D_BOT, N_CLASSES, N_BLOCKS, P_DROP)
    opt = lib.optim.Adam(model.parameters(), lr=LR)
    loss_fn = lib.nn.functional.cross_entropy

    def step():
        opt.zero_grad()
        with lib.autocast("cpu", enabled=autocast):
            loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def cases(batch: int, torch=None) -> dict:
    import ember
    out = {"ember float32": _step(ember, False, batch), "ember bfloat16": _step(ember, True, batch)}
    if torch is not None:
        out["pytorch float32"] = _step(torch, False, batch)
        out["pytorch bfloat16"] = _step(torch, True, batch)
    return out


def report(res: dict, batch: int) -> str:
    lines = [f"ResMLP training step, batch {batch}, ms (median):", "",
             "| library | float32 | autocast bfloat16 | bfloat16 / float32 |", "|---|---:|---:|---:|"]
    for lib in ("ember", "pytorch"):
        f, b = res.get(f"{lib} float32"), res.get(f"{lib} bfloat16")
        if f and b:
            ratio = np.median([y / x for x, y in zip(f["samples_ms"], b["samples_ms"])])
            lines.append(f"| {lib} | {f['ms']:.2f} | {b['ms']:.2f} | {ratio:.2f} |")
    load = res.get("load", {})
    if load:
        lines.append(f"\n(other processes used {load.get('others_cores', '?')} cores meanwhile)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.amp", description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--no-torch", action="store_true")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    torch = None if a.no_torch else H.import_torch(H.IMPLS)
    res = H.measure(cases(a.batch, torch), a.batch, a.repeats, sample_s=0.3)
    print(report(res, a.batch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
