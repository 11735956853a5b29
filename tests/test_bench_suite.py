"""`python -m ember bench` runs end to end: a --quick smoke run (timings are never asserted: only that
every table is produced from real measurements, and that bad options give one line)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bench(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    return subprocess.run([sys.executable, "-m", "ember", "bench", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_quick_suite_produces_every_table(tmp_path):
    out, js = tmp_path / "perf.md", tmp_path / "perf.json"
    r = _bench("--quick", "--no-torch", "--threads", "1", "--only", "w1,w3i", "--output", str(out), "--json", str(js))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.strip() == r.stdout.strip()
    for heading in ("### Throughput", "### Scaling", "### Peak RSS", "### Per-op overhead", "float32 matmul"):
        assert heading in text, heading
    assert "| W1 MLP" in text and "| W3 CNN: inference" in text and "| W2" not in text
    res = json.loads(js.read_text())
    (run,) = res["runs"]
    assert run["threads"] == 1 and run["torch"] is None and run["matmul_gflops"] > 0
    w1 = run["workloads"]["w1"]
    assert set(w1) == {"ember", "numpy", "ratios", "load", "idle_wait"}
    assert w1["ember"]["per_s"] > 0 and w1["ratios"]["numpy"] > 0 and len(w1["ember"]["samples_ms"]) == 2
    assert "under_load" in w1["load"] and w1["idle_wait"]["waits"] == 2 + 2 * 2  # calibrations, samples
    assert run["env"]["OMP_WAIT_POLICY"] is None and run["env"]["OPENBLAS_NUM_THREADS"] == "1"
    assert "others' CPU (cores)" in text and "PyTorch compiled" not in text
    assert isinstance(res["under_load"], list)
    assert set(run["scaling"]["w1_batch"]) == {"1", "16"}
    for key in ("w1", "w3"):
        for impl in ("ember", "numpy"):
            m = res["memory"][key][impl]
            assert m["peak_mib"] >= m["setup_mib"] > 0


@pytest.mark.parametrize("args,culprit", [
    (["--only", "w9"], "unknown w9"),
    (["--threads", "0"], "--threads must be positive"),
    (["--repeats", "0"], "--repeats must be at least 1"),
    (["--threads", "two"], "--threads"),
])
def test_bad_options_are_one_line(args, culprit):
    r = _bench(*args, timeout=60)
    assert r.returncode == 2
    assert culprit in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
