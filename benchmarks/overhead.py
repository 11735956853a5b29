"""Per-op overhead: ember against raw NumPy and PyTorch CPU on tiny tensors.

Run from the repository root:  python -m benchmarks.overhead [--json results.json] [--no-compile]
(or python benchmarks/overhead.py). One process measures every case, interleaving the
frameworks repeat by repeat (the order rotates each repeat), so drift in machine speed
hits all of them alike. Each sample times many inner iterations with time.perf_counter_ns
and gc disabled (as timeit does); a case reports the median of the samples and their
min-max. A ratio is the median of the per-repeat ratios of paired samples.

The chain is also timed compiled (unless --no-compile): its forward and backward as one function under
`ember.compile`, captured before timing (its compile time: the capturing call less a warm eager call) and
checked to give the hand-written gradient; the report says loudly if a timed call did not replay.

Threads: BLAS/OpenMP pools are pinned to 1 thread (the variables of _harness.THREAD_VARS, set
before NumPy and PyTorch are imported; variables already set by the caller are kept) and
torch.set_num_threads(1): on (4, 4) tensors threads only add synchronisation cost, and
this measures per-op framework overhead, not arithmetic throughput. With one thread there is no
worker pool to spin, so no wait policy and no idle wait matter here.
"""
from __future__ import annotations

import os
import sys

if __package__ in (None, ""):  # run as a script: make the repository's `ember` and `benchmarks` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from benchmarks._harness import THREAD_VARS  # noqa: E402  (the standard library only: NumPy is not loaded yet)

for _var in THREAD_VARS:
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

import ember  # noqa: E402

SHAPE = (4, 4)
CHAIN = 100  # ops in the chain: x*c, x+d, tanh(x), x*c, ...
TINY_SAMPLE_MS = 30  # wall time of one sample (calibrated inner iteration count)
CHAIN_SAMPLE_MS = 60
UNROLL = 10  # tiny-op statements per loop iteration, so the loop's own cost is small

# the chain's steps, cycled; {tanh} is the framework's tanh function
_STEPS = ["x = x * c", "x = x + d", "x = {tanh}(x)"]


def _compile(name: str, body: str, env: dict):
    """A function `loop(n) -> ns` timing n runs of `body` with the names of `env` bound as locals."""
    args = "".join(f", {k}={k}" for k in env)
    body = "\n".join("        " + line for line in body.strip("\n").splitlines())
    src = (f"def {name}(n{args}, _clock=_clock):\n"
           f"    t0 = _clock()\n"
           f"    for _ in range(n):\n{body}\n"
           f"    return _clock() - t0\n")
    ns = dict(env, _clock=time.perf_counter_ns)
    exec(compile(src, f"<benchmark {name}>", "exec"), ns)
    return ns[name]


def _chain_source(tanh: str, backward: str | None) -> str:
    """The 100-op chain, unrolled (no per-op branching), optionally followed by `backward`."""
    lines = ["x = x0"]
    for i in range(CHAIN):
        lines.append(_STEPS[i % 3].format(tanh=tanh))
    if backward is not None:
        lines.append(backward)
    return "\n".join(lines)


def _numpy_chain_backward_source() -> str:
    """Forward saving what backward needs, then the hand-written reverse pass of the chain."""
    lines = ["x = x0"]
    for i in range(CHAIN):
        if i % 3 == 2:
            lines.append(f"x = y{i} = np.tanh(x)")
        else:
            lines.append(_STEPS[i % 3])
    lines.append("g = ones")
    for i in reversed(range(CHAIN)):
        if i % 3 == 0:
            lines.append("g = g * c")
        elif i % 3 == 2:
            lines.append(f"g = g * (1 - y{i} * y{i})")
    lines.append("grad = g")
    return "\n".join(lines)


class Case:
    """One measured configuration: a calibrated loop and its samples (ns per call)."""

    def __init__(self, key: str, label: str, loop, per_loop: int, sample_ms: float) -> None:
        self.key, self.label, self.loop, self.per_loop = key, label, loop, per_loop
        self.samples: list = []
        self.loop(1)  # warm-up
        t = min(self.loop(3) for _ in range(3)) / 3
        self.n = max(1, int(sample_ms * 1e6 / max(t, 1)))

    def measure(self) -> None:
        self.samples.append(self.loop(self.n) / (self.n * self.per_loop))

    @property
    def median_us(self) -> float:
        return statistics.median(self.samples) / 1e3


def _chain_function(backward: str):
    """The chain forward and `backward` as a function of x0 (c, d and tanh from its globals), not compiled;
    the timed code calls it, compiled, after setting x0.grad = None."""
    body = "\n".join("    " + line for line in _chain_source("tanh", backward).splitlines())
    return compile(f"def chain(x0):\n{body}\n", "<benchmark chain>", "exec")


def compiled_chain(a_np, c_np, d_np, ones_np, backward: str) -> tuple:
    """(ember.compile of the chain function, a leaf x0, info): captured on x0 and checked to replay; info holds
    the compile time (the capturing call less a warm eager call of the same function), the stats and the
    program's form. Raises AssertionError where it did not replay."""
    env = {"c": ember.from_numpy(c_np.copy()), "d": ember.from_numpy(d_np.copy()), "tanh": ember.tanh,
           "ones": ember.from_numpy(ones_np.copy())}
    exec(_chain_function(backward), env)
    eager, x_eager = env["chain"], ember.from_numpy(a_np.copy()).requires_grad_()
    fn, x0 = ember.compile(env["chain"]), ember.from_numpy(a_np.copy()).requires_grad_()
    for _ in range(2):  # warm
        x_eager.grad = None
        eager(x_eager)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        x_eager.grad = None
        eager(x_eager)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    x0.grad = None
    fn(x0)
    capture = time.perf_counter() - t0
    for _ in range(2):
        x0.grad = None
        fn(x0)
    stats = dict(fn.stats)
    if stats["replays"] != 2 or stats["eager"] or stats["captures"] != 1:
        raise AssertionError(f"the compiled chain did not replay: {stats}")
    forms = [getattr(e.program, "form", "?") for es in fn.cache.values() for e in es if e.program is not None]
    return fn, x0, {"compile_s": capture - min(times), "capture_s": capture, "eager_s": min(times),
                    "stats_before_timing": stats, "forms": forms}


def build_cases(torch, compiled: bool = True) -> list:
    rng = np.random.default_rng(0)
    a_np, b_np = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    c_np = np.full(SHAPE, 0.9, np.float32)
    d_np = rng.uniform(-0.1, 0.1, SHAPE).astype(np.float32)
    ones_np = np.ones(SHAPE, np.float32)
    tiny = "\n".join(["a + b"] * UNROLL)
    cases = [Case("numpy_op", "NumPy", _compile("numpy_op", tiny, {"a": a_np, "b": b_np}), UNROLL, TINY_SAMPLE_MS)]

    ea, eb = ember.from_numpy(a_np.copy()), ember.from_numpy(b_np.copy())
    ra = ember.from_numpy(a_np.copy()).requires_grad_()
    cases.append(Case("ember_op", "ember, no grad", _compile("ember_op", tiny, {"a": ea, "b": eb}), UNROLL, TINY_SAMPLE_MS))
    cases.append(Case("ember_op_rec", "ember, recorded", _compile("ember_op_rec", tiny, {"a": ra, "b": eb}), UNROLL,
                      TINY_SAMPLE_MS))
    if torch is not None:
        ta, tb = torch.from_numpy(a_np.copy()), torch.from_numpy(b_np.copy())
        tra = torch.from_numpy(a_np.copy()).requires_grad_()
        cases.append(Case("torch_op", "PyTorch, no grad", _compile("torch_op", tiny, {"a": ta, "b": tb}), UNROLL,
                          TINY_SAMPLE_MS))
        cases.append(Case("torch_op_rec", "PyTorch, recorded", _compile("torch_op_rec", tiny, {"a": tra, "b": tb}),
                          UNROLL, TINY_SAMPLE_MS))

    # --- the chain
    np_env = {"x0": a_np, "c": c_np, "d": d_np, "np": np, "ones": ones_np}
    cases.append(Case("numpy_chain_fwd", "NumPy forward", _compile("numpy_chain_fwd", _chain_source("np.tanh", None),
                                                                     np_env), 1, CHAIN_SAMPLE_MS))
    cases.append(Case("numpy_chain_fwdbwd", "NumPy forward+backward (by hand)",
                      _compile("numpy_chain_fwdbwd", _numpy_chain_backward_source(), np_env), 1, CHAIN_SAMPLE_MS))

    # Backward from the sum where the framework has it, else with an explicit ones gradient
    # (both frameworks are always driven the same way).
    use_sum = hasattr(ember.Tensor, "sum")
    bwd = "x0.grad = None\nx.sum().backward()" if use_sum else "x0.grad = None\nx.backward(ones)"
    frameworks = [("ember", ember)] + ([("torch", torch)] if torch is not None else [])
    for tag, fw in frameworks:
        x0 = fw.from_numpy(a_np.copy()).requires_grad_()
        env = {"x0": x0, "c": fw.from_numpy(c_np.copy()), "d": fw.from_numpy(d_np.copy()), "tanh": fw.tanh,
               "ones": fw.from_numpy(ones_np.copy())}
        name = "ember" if tag == "ember" else "PyTorch"
        cases.append(Case(f"{tag}_chain_fwd", f"{name} forward (recorded)",
                          _compile(f"{tag}_chain_fwd", _chain_source("tanh", None), env), 1, CHAIN_SAMPLE_MS))
        cases.append(Case(f"{tag}_chain_fwdbwd", f"{name} forward+backward",
                          _compile(f"{tag}_chain_fwdbwd", _chain_source("tanh", bwd), env), 1, CHAIN_SAMPLE_MS))
        if tag == "ember" and compiled:
            fn, x0, info = compiled_chain(a_np, c_np, d_np, ones_np, bwd.split("\n", 1)[1])
            case = Case("ember_chain_compiled", "ember forward+backward, ember.compile",
                        _compile("ember_chain_compiled", "x0.grad = None\nchain(x0)", {"x0": x0, "chain": fn}), 1,
                        CHAIN_SAMPLE_MS)
            case.compiled, case.info = fn, info
            cases.append(case)
    _check_chain_grads(a_np, c_np, d_np, ones_np, torch, use_sum, compiled)
    return cases


def _check_chain_grads(a_np, c_np, d_np, ones_np, torch, use_sum: bool, compiled: bool = False) -> None:
    """The timed code must compute the same gradient in every framework (and compiled, replaying)."""
    env = {"x0": a_np, "c": c_np, "d": d_np, "np": np, "ones": ones_np}
    exec(_numpy_chain_backward_source(), env)
    expect = env["grad"]
    frameworks = [ember] + ([torch] if torch is not None else [])
    for fw in frameworks:
        x0 = fw.from_numpy(a_np.copy()).requires_grad_()
        e = {"x0": x0, "c": fw.from_numpy(c_np.copy()), "d": fw.from_numpy(d_np.copy()), "tanh": fw.tanh,
             "ones": fw.from_numpy(ones_np.copy())}
        exec(_chain_source("tanh", "x.sum().backward()" if use_sum else "x.backward(ones)"), e)
        got = x0.grad.detach().numpy() if fw is torch else x0.grad.numpy()
        if not np.allclose(got, expect, rtol=1e-4, atol=1e-6):
            raise AssertionError(f"{fw.__name__}: chain gradient differs from the hand-written NumPy one")
    if compiled:  # the gradient of a replay (the third call), not of the capture
        _, x0, _ = compiled_chain(a_np, c_np, d_np, ones_np, "x.sum().backward()" if use_sum else "x.backward(ones)")
        if not np.allclose(x0.grad.numpy(), expect, rtol=1e-4, atol=1e-6):
            raise AssertionError("ember.compile: the replayed chain's gradient differs from the hand-written NumPy one")


def run(repeats: int, torch, compiled: bool = True) -> dict:
    cases = build_cases(torch, compiled)
    gc.collect()
    gc.freeze()  # park every object alive now outside the collector, so the collect() per sample is cheap
    gc_was = gc.isenabled()
    try:
        for r in range(repeats):
            k = r % len(cases)
            for case in cases[k:] + cases[:k]:  # rotate the order: no case always runs first
                gc.collect()
                gc.disable()
                try:
                    case.measure()
                finally:
                    if gc_was:
                        gc.enable()
    finally:
        if gc_was:
            gc.enable()
    return {c.key: c for c in cases}


def paired_ratio(a: Case, b: Case) -> float:
    return statistics.median(x / y for x, y in zip(a.samples, b.samples))


TARGETS = [  # (what, numerator, denominator, limit)
    ("recorded tiny op vs PyTorch recorded", "ember_op_rec", "torch_op_rec", 0.7),
    ("recorded tiny op vs raw NumPy", "ember_op_rec", "numpy_op", 3.0),
    ("100-op chain forward+backward vs PyTorch", "ember_chain_fwdbwd", "torch_chain_fwdbwd", 0.8),
    ("100-op chain forward+backward, ember.compile vs eager", "ember_chain_compiled", "ember_chain_fwdbwd", 0.25),
]
COMPILE_S_TARGET = 1.0  # seconds per captured graph
# ember rows and the PyTorch / NumPy row each is compared with
TINY_PAIRS = {"ember_op": ("torch_op", "numpy_op"), "ember_op_rec": ("torch_op_rec", "numpy_op")}
CHAIN_PAIRS = {"ember_chain_fwd": ("torch_chain_fwd", "numpy_chain_fwd"),
               "ember_chain_fwdbwd": ("torch_chain_fwdbwd", "numpy_chain_fwdbwd"),
               "ember_chain_compiled": ("torch_chain_fwdbwd", "numpy_chain_fwdbwd")}


def fell_back(case) -> str | None:
    """Why a compiled case's timed calls were not all replays (None: they were)."""
    fn = getattr(case, "compiled", None)
    if fn is None:
        return None
    before, now = case.info["stats_before_timing"], fn.stats
    if now["captures"] != before["captures"] or now["eager"] != before["eager"]:
        return (f"{now['captures'] - before['captures']} timed call(s) captured again, "
                f"{now['eager'] - before['eager']} ran eagerly")
    return None


def report(cases: dict, env: dict) -> tuple[str, dict]:
    out = [f"ember per-op overhead — {env['repeats']} interleaved repeats, median (min–max); "
           f"NumPy {env['numpy']}, PyTorch {env['torch'] or 'not run'}, Python {env['python']}, "
           f"threads=1", ""]
    results: dict = {"environment": env, "cases": {}, "targets": []}

    def table(title: str, keys: list, pairs: dict, unit: str) -> None:
        out.extend([f"### {title}", "", f"| case | {unit} median | min–max | ember / PyTorch | ember / NumPy |",
                    "|---|---:|---:|---:|---:|"])
        for k in keys:
            c = cases.get(k)
            if c is None:
                continue
            lo, hi = min(c.samples) / 1e3, max(c.samples) / 1e3
            vs = ["", ""]
            for j, other in enumerate(pairs.get(k, ())):
                if other in cases:
                    vs[j] = f"{paired_ratio(c, cases[other]):.2f}×"
            why = fell_back(c)
            label = c.label + (f" **⚠ FELL BACK TO EAGER: {why}**" if why else "")
            out.append(f"| {label} | {c.median_us:.3f} | {lo:.3f}–{hi:.3f} | {vs[0]} | {vs[1]} |")
            results["cases"][k] = {"label": c.label, "median_us": c.median_us, "min_us": lo, "max_us": hi,
                                   "inner_iterations": c.n * c.per_loop, "samples_us": [s / 1e3 for s in c.samples]}
            if getattr(c, "compiled", None) is not None:
                results["cases"][k]["ember_compile"] = dict(c.info, stats_after_timing=dict(c.compiled.stats),
                                                            fell_back=why)
        out.append("")

    table(f"Tiny op: a + b on {SHAPE} float32", ["numpy_op", "ember_op", "ember_op_rec", "torch_op", "torch_op_rec"],
          TINY_PAIRS, "µs/op")
    table(f"Chain of {CHAIN} tiny ops (x*c, x+d, tanh) on {SHAPE} float32",
          ["numpy_chain_fwd", "numpy_chain_fwdbwd", "ember_chain_fwd", "ember_chain_fwdbwd", "ember_chain_compiled",
           "torch_chain_fwd", "torch_chain_fwdbwd"], CHAIN_PAIRS, "µs/chain")
    comp = cases.get("ember_chain_compiled")
    if comp is not None:
        info, why = comp.info, fell_back(comp)
        ok = info["compile_s"] <= COMPILE_S_TARGET
        out.extend([f"ember.compile of the chain (a function of x0: forward and `backward()`; the timed loop sets "
                    f"x0.grad = None and calls it): {len(info['forms'])} graph ({', '.join(info['forms'])}), compile "
                    f"time {info['compile_s'] * 1e3:.1f} ms (the capturing call, {info['capture_s'] * 1e3:.1f} ms, "
                    f"less "
                    f"a warm eager call) {'✓' if ok else '✗'} (≤ {COMPILE_S_TARGET:g} s); "
                    + (f"**⚠ FELL BACK TO EAGER: {why}**" if why else
                       f"every timed call replayed ({comp.compiled.stats['replays']} replays, 0 eager)."), ""])
    out.extend(["### Targets", "", "| target | ratio | limit | result |", "|---|---:|---:|---|"])
    for what, num, den, limit in TARGETS:
        if num in cases and den in cases and fell_back(cases[num]):
            out.append(f"| {what} | – | ≤ {limit}× | **FAIL: it fell back to eager** |")
            results["targets"].append({"target": what, "ratio": None, "limit": limit, "pass": False})
        elif num in cases and den in cases:
            ratio = paired_ratio(cases[num], cases[den])
            ok = ratio <= limit
            out.append(f"| {what} | {ratio:.2f}× | ≤ {limit}× | {'PASS' if ok else 'FAIL'} |")
            results["targets"].append({"target": what, "ratio": ratio, "limit": limit, "pass": ok})
        else:
            why = "not compiled: --no-compile" if num == "ember_chain_compiled" else "PyTorch not run"
            out.append(f"| {what} | – | ≤ {limit}× | SKIP ({why}) |")
            results["targets"].append({"target": what, "ratio": None, "limit": limit, "pass": None})
    return "\n".join(out), results


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", metavar="PATH", help="also write the results (all samples) as JSON to PATH")
    p.add_argument("--repeats", type=int, default=15, help="interleaved repeats per case (default 15)")
    p.add_argument("--no-torch", action="store_true", help="leave PyTorch out even when it is installed")
    p.add_argument("--no-compile", action="store_true", help="leave out the chain compiled with ember.compile")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    torch = None
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(1)
        except ImportError:
            torch = None
    env = {"python": platform.python_version(), "numpy": np.__version__, "ember": ember.__version__,
           "torch": torch.__version__ if torch is not None else None, "machine": platform.machine(),
           "processor": platform.processor() or platform.machine(), "repeats": args.repeats,
           "threads": {v: os.environ.get(v) for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
           "backward": "sum().backward()" if hasattr(ember.Tensor, "sum") else "backward(ones)"}
    t0 = time.perf_counter()
    text, results = report(run(args.repeats, torch, not args.no_compile), env)
    results["environment"]["wall_s"] = time.perf_counter() - t0
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
