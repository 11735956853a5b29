"""benchmarks/fairness.py (`bench --check-fairness`) and benchmarks/nets.py: PyTorch alone is built from the
suite's own spec in a process without ember, and the report sets the three measurements side by side.
No timing is asserted (DESIGN.md §5)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import requires_torch, torch

from benchmarks import fairness, suite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _python(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def test_the_alone_side_loads_no_ember():
    r = _python("-c", "import sys, benchmarks.fairness, benchmarks.nets; print('ember' in sys.modules)", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


def test_every_workload_has_a_spec_with_the_suites_batch():
    for key, (_, items, *_) in suite.WORKLOADS.items():
        spec = fairness.torch_spec(key)
        assert spec["x"][0] == items if key not in ("lstm", "transformer") else spec["y"][0] == items * spec["x"][1]
        json.dumps(spec)  # it travels to the child as JSON


@requires_torch
@pytest.mark.parametrize("key", list(suite.WORKLOADS))
def test_the_alone_step_runs_from_the_spec_alone(key):
    from benchmarks.nets import torch_step
    spec = fairness.torch_spec(key)
    out = torch_step(torch, spec)()
    if spec.get("optim"):
        assert out.dim() == 0 and torch.isfinite(out)
    else:
        assert tuple(out.shape) == (spec["x"][0], 10)


def _m(ms: float, others: float = 0.0) -> dict:
    return {"pytorch": {"ms": ms, "samples_ms": [ms]}, "load": {"others_cores": others, "under_load": others > 0.25},
            "ember_loaded": False}


def _runs(interleaved_ms: list[float], others: float = 0.0) -> list[dict]:
    row = {"alone": [_m(10.0), _m(11.0), _m(10.0)], "alone_default_malloc": [_m(12.0), _m(13.0), _m(12.0)],
           "interleaved": [_m(ms, others) for ms in interleaved_ms]}
    return [{"threads": 2, "torch": "2.13.0", "rows": {"w3": row}}]


MACHINE = {"date": "2026-11-26", "cpu": "cpu", "cores": 2, "load_avg_at_start": 0.1}


def test_fairness_report_sets_the_three_side_by_side():
    runs = _runs([10.2, 10.0, 11.0])
    text = fairness.render(runs, MACHINE, 3, 0.05, 1.0, "python -m ember bench --check-fairness")
    row = next(line for line in text.splitlines() if line.startswith("| W3 CNN, SGD"))
    # medians over the rounds (their range); the ratio is the median of the per-round ratios 1.02, 0.909, 1.1
    assert ("| 10.000 (10.000–11.000) | 12.000 (12.000–13.000) | 10.200 (10.000–11.000) | 1.020 (0.909–1.100) ✓ |"
            in row)
    assert "3 round(s)" in text and "UNDER LOAD" not in text and "ember loaded in them: no" in text


def test_fairness_report_marks_a_handicap_and_load():
    runs = _runs([11.0, 12.0, 11.0], others=0.9)
    text = fairness.render(runs, MACHINE, 3, 0.05, 1.0, "cmd")
    assert "1.100 (1.091–1.100) ✗ |" in text and "| 0.00 / 0.00 / 0.90 ⚠ |" in text and "MEASURED UNDER LOAD" in text
    assert fairness.flagged(runs)[0] == {"block": "w3 at 2 thread(s), interleaved, round 1", "others_cores": 0.9}


def test_check_fairness_without_torch_is_one_line():
    r = _python("-m", "ember", "bench", "--check-fairness", "--no-torch", timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["python -m ember bench: error: --check-fairness times PyTorch: it needs "
                                             "PyTorch installed (and no --no-torch)"]


@requires_torch
def test_check_fairness_runs_end_to_end(tmp_path):
    js = tmp_path / "fair.json"
    r = _python("-m", "ember", "bench", "--check-fairness", "--quick", "--only", "w1", "--threads", "1",
                "--json", str(js), timeout=600)
    assert r.returncode == 0, r.stderr
    assert "| W1 MLP 784-512-512-10, SGD momentum: train | 1 |" in r.stdout
    (run,) = json.loads(js.read_text())["runs"]
    row = run["rows"]["w1"]
    assert set(row) == {"alone", "alone_default_malloc", "interleaved"}
    for col in ("alone", "alone_default_malloc"):
        assert all(m["ember_loaded"] is False and m["torch_threads"] == 1 for m in row[col])
    for ms in row.values():  # --quick: 2 rounds of 3 samples
        assert len(ms) == 2 and all(len(m["pytorch"]["samples_ms"]) == 3 and "under_load" in m["load"] for m in ms)


def test_bad_rounds_is_one_line():
    r = _python("-m", "ember", "bench", "--check-fairness", "--rounds", "0", timeout=60)
    assert r.returncode == 2 and r.stderr.strip().endswith("--rounds must be at least 1 (see python -m ember bench "
                                                           "--help)")


@requires_torch
def test_a_failing_torch_compile_becomes_a_reason_in_the_cases(monkeypatch):
    from benchmarks import mlp

    def broken(model, **kw):
        raise RuntimeError("Dynamo is not supported on this Python\n(see the docs)")
    monkeypatch.setattr(torch, "compile", broken)
    cases = mlp.cases(batch=4, width=8, impls=("ember", "pytorch", "compiled"))
    assert cases["compiled"].reason == "RuntimeError: Dynamo is not supported on this Python (see the docs)"
    assert callable(cases["pytorch"]) and callable(cases["ember"])


@requires_torch
def test_a_model_dynamo_leaves_to_eager_is_not_called_compiled(monkeypatch):
    from torch._dynamo.utils import counters

    from benchmarks import seq
    stats = counters["stats"]
    monkeypatch.setitem(stats, "unique_graphs", stats["unique_graphs"] + 1)  # a graph an earlier row compiled
    step = seq.cases("lstm", batch=2, impls=("pytorch", "compiled"))["compiled"]
    assert step.reason.startswith("torch.compile compiled no graph")
