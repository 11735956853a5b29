"""The suite's ember.compile columns (benchmarks/ember_compile.py), its report and the compiled rows of
benchmarks/overhead.py and benchmarks/memory.py, at tiny sizes. No timing is asserted (DESIGN.md §5): a
compiled step must replay its captured program and give eager's losses; a step that falls back to eager,
or gives other numbers, must never be timed as compiled, and the report must say so."""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from benchmarks import cnn, ember_compile, mlp, overhead, resmlp, suite
from benchmarks._harness import COMPILED, EMBER_COMPILED, EMBER_MODEL, EMBER_STEP, Skipped, train_step

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILDERS = {
    "w1": lambda impls: mlp.cases(8, width=32, impls=impls),
    "w2": lambda impls: resmlp.cases(8, impls=impls),
    "w3": lambda impls: cnn.train_cases(8, impls=impls),
}


def _calls(step) -> int:
    """How many times `step` ran while it was built (captures, replays and eager calls)."""
    return sum(step.ember_compile["stats_before_timing"].values())


@pytest.mark.parametrize("key", sorted(BUILDERS))
def test_compiled_training_steps_replay_and_give_eager_losses(key):
    built = BUILDERS[key](("ember",) + EMBER_COMPILED)
    for k in EMBER_COMPILED:
        step = built[k]
        assert not isinstance(step, Skipped), step
        info = step.ember_compile
        assert info["stats_before_timing"]["eager"] == 0 and info["stats_before_timing"]["replays"] >= 1
        assert info["graphs"] == 1 and info["max_abs_diff"] < 1e-5 and info["compile_s_per_graph"] >= 0
        assert info["forms"] == (["static"] if k == EMBER_STEP else ["graph"])
        # an eager step from the same initial weights, brought to the same point with the same seeds
        ref = BUILDERS[key](("ember",))["ember"]
        n = _calls(step)
        for i in range(n):
            ember.manual_seed(ember_compile.SEED + i)
            ref()
        for i in range(n, n + 3):
            ember.manual_seed(ember_compile.SEED + i)
            got = float(step())
            ember.manual_seed(ember_compile.SEED + i)
            want = float(ref())
            np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{key} {k} step {i}")
        after = ember_compile.stats_of(step.compiled_fns)
        before = info["stats_before_timing"]
        assert after == dict(before, replays=before["replays"] + 3), (k, before, after)


def test_compiled_inference_replays_and_gives_eager_logits():
    built = cnn.infer_cases(4, impls=("ember",) + EMBER_COMPILED)
    want = built["ember"]().numpy()
    for k in EMBER_COMPILED:
        step = built[k]
        assert not isinstance(step, Skipped), step
        assert step.ember_compile["forms"] == ["flat"]
        np.testing.assert_allclose(step().numpy(), want, rtol=1e-5, atol=1e-6)
        assert ember_compile.stats_of(step.compiled_fns)["eager"] == 0


def _tiny():
    ember.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    x, y = ember.randn(5, 4), ember.randint(0, 3, (5,))
    return model, x, y


def test_a_step_that_falls_back_to_eager_is_not_timed_and_says_so():
    model, x, y = _tiny()
    opt = ember.optim.SGD(model.parameters(), lr=0.1)

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()  # Python reads a value: a graph break
        return loss.detach()

    compiled = ember.compile(step)
    s = ember_compile.prepared(compiled, [compiled], None)
    assert isinstance(s, Skipped)
    assert s.reason.startswith("⚠ FELL BACK TO EAGER") and "no compiled figure" in s.reason and "\n" not in s.reason


def test_a_compiled_step_that_differs_from_eager_is_not_timed():
    model, x, y = _tiny()
    twin, m = [copy.deepcopy(model) for _ in range(2)]
    eager = train_step(twin, ember.optim.SGD(twin.parameters(), lr=0.1), F.cross_entropy, x, y)
    compiled = ember.compile(train_step(m, ember.optim.SGD(m.parameters(), lr=0.1), F.cross_entropy, x, y))
    s = ember_compile.prepared(compiled, [compiled], lambda: eager() + 1)
    assert isinstance(s, Skipped) and s.reason.startswith("⚠ WRONG")


def test_a_capture_during_the_timing_marks_the_column_fell_back():
    model, x, _ = _tiny()
    cm = ember.compile(model)
    step = ember_compile.prepared(lambda: cm(x), [cm.__dict__["_compiled"]], lambda: model(x))
    assert not isinstance(step, Skipped)
    result = {EMBER_MODEL: {"per_s": 1.0, "min": 1.0, "max": 1.0, "ms": 1.0, "samples_ms": [1.0]}}
    ember_compile.annotate(result, {EMBER_MODEL: step})
    assert "fell_back" not in result[EMBER_MODEL]
    assert result[EMBER_MODEL]["ember_compile"]["replays_while_measured"] == 0
    model.eval()  # a guard fails: the next call captures again
    step()
    ember_compile.annotate(result, {EMBER_MODEL: step})
    assert "1 call(s) captured again" in result[EMBER_MODEL]["fell_back"]
    assert suite._cell(result, EMBER_MODEL).startswith("**⚠ FELL BACK TO EAGER**")


def test_compile_ratios_take_the_faster_pytorch_in_each_repeat():
    def timed(*ms):
        return {"ms": sorted(ms)[len(ms) // 2], "samples_ms": list(ms)}
    r = {"ember": timed(2.0, 2.0, 2.0), "numpy": timed(1.5, 1.5, 1.5), "pytorch": timed(3.0, 1.0, 3.0),
         COMPILED: timed(2.0, 4.0, 2.0), EMBER_STEP: timed(1.0, 1.0, 1.0), EMBER_MODEL: {"skipped": "no"}}
    q = suite.compile_ratios(r)
    assert set(q) == {EMBER_STEP}
    assert q[EMBER_STEP]["ember"] == 2.0 and q[EMBER_STEP]["numpy"] == 1.5
    assert q[EMBER_STEP]["pytorch_best"] == 2.0 and q[EMBER_STEP]["pytorch_best_is"] == COMPILED
    r[EMBER_STEP]["fell_back"] = "recaptured"  # never a compiled figure
    assert suite.compile_ratios(r) == {}


def _res(compiled: dict, torch: str | None = "2.13.0") -> dict:
    def timed(per_s):
        return {"per_s": per_s, "min": per_s, "max": per_s, "ms": 1e3 / per_s, "samples_ms": [1e3 / per_s]}
    w = {"ember": timed(100.0), "numpy": timed(100.0), "pytorch": timed(80.0), COMPILED: timed(90.0),
         "ratios": {"numpy": 1.0, "pytorch": 1.25, COMPILED: 1.1}, **compiled,
         "load": {"others_cores": 0.01, "loadavg": [0.1, 0.1], "seconds": 1.0, "under_load": False}}
    w["compile_ratios"] = suite.compile_ratios(w)
    machine = {"date": "2026-11-26", "cpu": "cpu", "cores": 2, "python": "3.11", "numpy": "2.4", "blas": "openblas",
               "load_avg_at_start": 0.2}
    return {"machine": machine, "only": ["w2"], "repeats": 1, "compile": True, "torch": torch, "wall_s": 1.0,
            "command": "python -m ember bench --compile",
            "runs": [{"threads": 2, "matmul_gflops": 100.0, "matmul_gflops_end": 100.0, "workloads": {"w2": w}}],
            "memory": {"w1": {k: {"setup_mib": 50.0, "peak_mib": peak, "steps": 5, **extra} for k, peak, extra in
                              (("ember", 100.0, {}), (EMBER_STEP, 90.0, {"replayed": True}), ("numpy", 60.0, {}))}}}


def test_report_shows_the_compiled_columns_and_their_targets():
    info = {"graphs": 1, "forms": ["static"], "compile_s_per_graph": 0.02, "replays_while_measured": 40,
            "stats_after_timing": {"captures": 1, "replays": 42, "eager": 0}}
    step = {"per_s": 200.0, "min": 200.0, "max": 200.0, "ms": 5.0, "samples_ms": [5.0], "ember_compile": info}
    text = suite.render(_res({EMBER_STEP: step, EMBER_MODEL: {"skipped": "⚠ FELL BACK TO EAGER (a break) — no "
                                                                          "compiled figure"}}))
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("| workload | BLAS threads | ember |"))
    sep = lines[lines.index(header) + 1]
    row = lines[lines.index(header) + 2]
    assert "| ember.compile(model) | ember.compile(step) | NumPy by hand |" in header
    assert header.count("|") == sep.count("|") == row.count("|")
    assert "| 200 (200–200) |" in row and "not run: ⚠ FELL BACK TO EAGER" in row
    section = text.split("### ember.compile against its targets")[1].split("###")[0]
    step_row = next(line for line in section.splitlines() if "ember.compile(step)" in line and line.startswith("| W2"))
    # W2's targets: 1.2x NumPy, 1.5x the faster PyTorch (here PyTorch compiled at 90/s: 200/90 = 2.2x)
    assert "2.000× ✓ (≥ 1.2)" in step_row and "2.222× ✓ (≥ 1.5) vs torch.compile" in step_row
    assert "20 ms ✓" in step_row and "✓ 1 graph(s) (static), 40 replays while measured, 0 eager" in step_row
    model_row = next(line for line in section.splitlines()
                     if "ember.compile(model)" in line and line.startswith("| W2"))
    assert "**⚠ FELL BACK TO EAGER (a break)" in model_row and "×" not in model_row
    mem = text.split("### Peak RSS")[1].split("###")[0]
    assert "| ember.compile(step) |" in mem and "compiled ≤ eager (target)" in mem
    assert "| 50 → 100 | 50 → 90 | 50 → 60 | – | – | ✓ |" in mem


def test_report_without_torch_has_no_pytorch_compiled_column():
    step = {"per_s": 200.0, "min": 200.0, "max": 200.0, "ms": 5.0, "samples_ms": [5.0]}
    res = _res({EMBER_STEP: step}, torch=None)
    for k in ("pytorch", COMPILED):
        del res["runs"][0]["workloads"]["w2"][k]
    res["runs"][0]["workloads"]["w2"]["compile_ratios"] = suite.compile_ratios(res["runs"][0]["workloads"]["w2"])
    text = suite.render(res)
    assert "PyTorch compiled" not in text and "ember.compile(step)" in text
    step_row = next(line for line in text.split("### ember.compile against")[1].splitlines()
                    if "ember.compile(step)" in line and line.startswith("| W2"))
    assert "| – |" in step_row  # no PyTorch to compare with


def test_compiled_chain_replays_and_gives_the_eager_gradient():
    rng = np.random.default_rng(0)
    a, c = rng.standard_normal((4, 4)).astype(np.float32), np.full((4, 4), 0.9, np.float32)
    d, ones = rng.uniform(-0.1, 0.1, (4, 4)).astype(np.float32), np.ones((4, 4), np.float32)
    fn, x0, info = overhead.compiled_chain(a, c, d, ones, "x.sum().backward()")
    assert info["stats_before_timing"] == {"captures": 1, "replays": 2, "eager": 0} and info["forms"] == ["static"]
    env = {"x0": ember.from_numpy(a.copy()).requires_grad_(), "c": ember.from_numpy(c), "d": ember.from_numpy(d),
           "tanh": ember.tanh}
    exec(overhead._chain_source("tanh", "x.sum().backward()"), env)
    np.testing.assert_allclose(x0.grad.numpy(), env["x0"].grad.numpy(), rtol=1e-5, atol=1e-7)


def test_quick_compile_suite_end_to_end(tmp_path):
    """`--quick --compile` (here without PyTorch): the compiled columns, their section, the compiled step's
    memory run and the compiled chain, all replaying."""
    js = tmp_path / "perf.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "ember", "bench", "--quick", "--compile", "--no-torch", "--threads", "1",
                        "--only", "w1", "--no-scaling", "--json", str(js)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    text, res = r.stdout, json.loads(js.read_text())
    assert "### ember.compile against its targets" in text and "FELL BACK" not in text and "WRONG" not in text
    assert "ember forward+backward, ember.compile" in text and "every timed call replayed" in text
    assert "100-op chain forward+backward, ember.compile vs eager" in text
    w1 = res["runs"][0]["workloads"]["w1"]
    for k in EMBER_COMPILED:
        assert "fell_back" not in w1[k] and len(w1[k]["samples_ms"]) == 2
        info = w1[k]["ember_compile"]
        assert info["stats_after_timing"]["eager"] == 0 and info["replays_while_measured"] > 0
        assert info["stats_after_timing"]["captures"] == info["graphs"] == 1
        assert w1["compile_ratios"][k]["numpy"] > 0 and "pytorch_best" not in w1["compile_ratios"][k]
    for key in ("w1", "w3"):
        m = res["memory"][key][EMBER_STEP]
        assert m["replayed"] is True and m["peak_mib"] >= m["setup_mib"] > 0
