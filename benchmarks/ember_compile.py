"""The suite's ember.compile columns: ember with `model = ember.compile(model)` ("ember-compile-model") and with
the whole step compiled ("ember-compile-step": zero_grad, forward, loss, backward and the optimizer update
captured once and replayed; for inference the compiled no_grad forward). The compiled step is a function of
the batch, `step(x, y)`, called with the workload's batch each time, as a training loop calls it.

Each is built from a deep copy of the workload's ember model (its initial weights, its own optimizer) and
captured here, before any timing, next to an eager twin (another copy): call by call, with ember's generator
seeded alike (dropout draws the same masks), the compiled step must return what the eager twin returns, and
it must have replayed a captured program — else the case is not timed and its cell says loudly why
(`Skipped`: a compiled figure that was really eager would be a lie). The compile time of a graph is its
capturing call less a warm eager call of the twin. `annotate` then checks, after the timing, that the timed
calls were all replays (no capture, no eager call among them).

The memory runs (benchmarks/memory.py) build without the twin (`check=False`): its steps would count in the
peak RSS of the compiled run.
"""
from __future__ import annotations

import copy
import time
from typing import Callable

import numpy as np

import ember

from ._harness import EMBER_COMPILED, EMBER_MODEL, EMBER_STEP, Skipped, one_line, step_function, train_step

# ember.compile's mode for the timed columns: its fastest (the optimizers' fused numba updates in replays;
# benchmarks/memory.py measures the default mode, which does not load numba)
MODE = "max-autotune"
CHECK_CALLS = 3  # compiled calls checked against the eager twin at build (the first one captures)
MAX_CALLS = 6  # calls allowed before a replay must have happened
SEED = 1234  # ember's generator is seeded with SEED + i before the i-th call of the twin and of the compiled step


def stats_of(fns) -> dict:
    """The summed `.stats` of the CompiledFunctions `fns`: captures, replays, eager calls."""
    out = {"captures": 0, "replays": 0, "eager": 0}
    for f in fns:
        for k in out:
            out[k] += f.stats[k]
    return out


def _programs(fns) -> tuple[list, list]:
    """(the forms of the captured programs, the graph-break reasons of the captures that broke)."""
    forms, breaks = [], []
    for f in fns:
        for entries in getattr(f, "cache", {}).values():
            for e in entries:
                program = getattr(e, "program", None)
                if program is None:
                    breaks += [f"{r} ({w})" for r, w in getattr(e, "breaks", ())] or ["a graph break"]
                else:
                    forms.append(getattr(program, "form", "?"))
    return forms, breaks


def _short(text: str, limit: int = 200) -> str:
    """`text` on one line, cut to `limit` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _host(out) -> np.ndarray:
    """A step's result (a loss or the logits) as a NumPy array."""
    return np.asarray(out.detach().cpu().numpy())


def prepared(step: Callable[[], object], fns: list,
             twin: Callable[[], object] | None) -> Callable[[], object] | Skipped:
    """`step` (it calls the CompiledFunctions `fns`), captured and checked before any timing; or Skipped with a
    loud reason where it fell back to eager, never replayed, or returned other values than `twin`, an eager
    step of an identical copy. The step carries `compile_s` (seconds per captured graph: its capturing call less
    a warm eager call of the twin) and `ember_compile` (what `annotate` reports)."""
    try:
        t_capture, t_eager, worst = 0.0, [], 0.0
        for i in range(MAX_CALLS):
            before = stats_of(fns)
            want = None
            if twin is not None and i < CHECK_CALLS:
                ember.manual_seed(SEED + i)
                t0 = time.perf_counter()
                want = _host(twin())
                t_eager.append(time.perf_counter() - t0)
            ember.manual_seed(SEED + i)
            t0 = time.perf_counter()
            got = step()
            dt = time.perf_counter() - t0
            now = stats_of(fns)
            if now["captures"] > before["captures"]:
                t_capture += dt
            if want is not None:
                got = _host(got)
                if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
                    diff = np.max(np.abs(got - want)) if got.shape == want.shape else f"shape {got.shape}"
                    return Skipped(f"⚠ WRONG: compiled call {i + 1} returned other values than eager ember "
                                   f"(max difference {diff}); not timed")
                worst = max(worst, float(np.max(np.abs(got - want))) if got.size else 0.0)
            if i + 1 >= CHECK_CALLS and now["replays"] > 0:
                break
    except Exception as e:  # the compiler raised: the column says so instead of ending the suite
        return Skipped(_short(f"⚠ ember.compile FAILED: {one_line(e)}"))
    stats = stats_of(fns)
    forms, breaks = _programs(fns)
    if stats["eager"] or breaks or not stats["replays"]:
        why = "; ".join(dict.fromkeys(breaks)) or (f"{stats['eager']} eager call(s)" if stats["eager"]
                                                    else "it never replayed")
        return Skipped(_short(f"⚠ FELL BACK TO EAGER, no compiled figure: {why}"))
    graphs = stats["captures"]
    warm = min(t_eager[1:] or t_eager) if t_eager else None
    compile_s = None if warm is None else max(0.0, t_capture / graphs - warm)
    info = {"graphs": graphs, "forms": forms, "capture_s": round(t_capture, 4),
            "eager_call_s": None if warm is None else round(warm, 4),
            "compile_s_per_graph": None if compile_s is None else round(compile_s, 4),
            "checked_calls": len(t_eager), "max_abs_diff": worst, "stats_before_timing": stats}
    step.ember_compile = info
    step.compiled_fns = fns
    if compile_s is not None:
        step.compile_s = round(compile_s, 4)
    return step


def train_cases(model, make_opt: Callable, loss_fn: Callable, x, y, impls, check: bool = True) -> dict:
    """{EMBER_MODEL, EMBER_STEP among `impls`: a prepared training step}, each on its own deep copy of `model`
    (taken now: call this before the eager step trains it) with `make_opt(module)` for its optimizer."""
    out: dict = {}
    for k in EMBER_COMPILED:
        if k not in impls:
            continue
        m = copy.deepcopy(model)
        twin = None
        if check:
            t = copy.deepcopy(model)
            twin = train_step(t, make_opt(t), loss_fn, x, y)
        if k == EMBER_MODEL:
            cm = ember.compile(m, mode=MODE)
            step, fns = train_step(cm, make_opt(m), loss_fn, x, y), [cm.__dict__["_compiled"]]
        else:
            fn = ember.compile(step_function(m, make_opt(m), loss_fn), mode=MODE)
            step, fns = (lambda fn=fn: fn(x, y)), [fn]
        out[k] = prepared(step, fns, twin)
    return out


def infer_cases(model, x, impls, check: bool = True) -> dict:
    """{EMBER_MODEL: the forward of `ember.compile(model)` under no_grad, EMBER_STEP: the compiled function
    `infer(x)`: `with no_grad(): return model(x)`, called with x} for those among `impls`, each on a deep copy of
    `model` (eval mode)."""
    def forward(net):
        def infer(x):
            with ember.no_grad():
                return net(x)
        return infer

    def infer_with(net):
        f = forward(net)
        return lambda: f(x)

    out: dict = {}
    twin = infer_with(model) if check else None
    for k in EMBER_COMPILED:
        if k not in impls:
            continue
        m = copy.deepcopy(model)
        if k == EMBER_MODEL:
            cm = ember.compile(m, mode=MODE)
            step, fns = infer_with(cm), [cm.__dict__["_compiled"]]
        else:
            fn = ember.compile(forward(m), mode=MODE)
            step, fns = (lambda fn=fn: fn(x)), [fn]
        out[k] = prepared(step, fns, twin)
    return out


def annotate(result: dict, cases: dict) -> None:
    """After `measure`: each timed ember.compile case's `ember_compile` record, with its stats after the timing;
    where a timed call captured again or ran eagerly, `fell_back` says so (the report then shows no figure)."""
    for k in EMBER_COMPILED:
        step = cases.get(k)
        if step is None or isinstance(step, Skipped) or k not in result or "skipped" in result[k]:
            continue
        info = dict(step.ember_compile)
        before, after = info["stats_before_timing"], stats_of(step.compiled_fns)
        info["stats_after_timing"] = after
        info["replays_while_measured"] = after["replays"] - before["replays"]
        result[k]["ember_compile"] = info
        recaptured, eager = after["captures"] - before["captures"], after["eager"] - before["eager"]
        if recaptured or eager:
            result[k]["fell_back"] = (f"during the timing {recaptured} call(s) captured again and {eager} ran eagerly "
                                      f"— not a compiled figure")
