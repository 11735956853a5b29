"""benchmarks/conv.py (`python -m ember bench --only conv`): every plain-NumPy formulation computes exactly ember's
forward, input gradient and weight gradient; the runner guards its picks, marks the shapes below the target, and a
--quick run produces the table end to end (timings are never asserted)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import requires_torch, torch

import ember
import ember.nn.functional as F
from benchmarks import conv as bc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _ember_refs(c: bc.Conv, a: dict) -> dict:
    """ember's y, dx, dw and db for the arrays of `a` (its cotangent g)."""
    x, w, b = (ember.from_numpy(a[k]).requires_grad_() for k in "xwb")
    y = F.conv2d(x, w, b, stride=c.s, padding=c.p)
    dx, dw, db = ember.autograd.grad(y, (x, w, b), ember.from_numpy(a["g"]))
    return {"fwd": y.detach().numpy(), "dx": dx.numpy(), "dw": dw.numpy(), "db": db.numpy()}


# (n, c, o, h, k, stride, padding): padding 1 and 0, stride 2 with and without padding, 1×1 stride 2, k = 5,
# sizes the stride does not divide
SMALL = [(3, 3, 4, 7, 3, 1, 1), (2, 3, 5, 8, 3, 2, 1), (2, 4, 3, 9, 3, 2, 0), (3, 4, 6, 8, 1, 2, 0),
         (2, 2, 3, 9, 5, 1, 0), (2, 3, 4, 10, 5, 1, 2), (5, 2, 3, 6, 3, 1, 0)]


@pytest.mark.parametrize("shape", SMALL, ids=lambda s: "n{}c{}o{}h{}k{}s{}p{}".format(*s))
@pytest.mark.parametrize("chunked", [False, True], ids=["whole", "chunked"])
def test_every_numpy_formulation_equals_ember(shape, chunked, monkeypatch):
    if chunked:  # two images' columns per chunk at most: several chunks, the last one partial where n is odd
        n, c, o, h, k, s, p = shape
        oh = (h + 2 * p - k) // s + 1
        monkeypatch.setattr(bc, "CHUNK_BYTES", 2 * c * k * k * oh * oh * 4)
    c = bc.Conv("t", *shape)
    a = bc.arrays(c, seed=1)
    ref = _ember_refs(c, a)
    forms = bc.formulations(c)
    assert len(forms["fwd"]) == len(forms["dw"]) == 3
    assert len(forms["dx"]) == (6 if c.s == 1 and c.p <= c.k - 1 else 3)  # the "full" forms at stride 1 only
    args = {"fwd": (a["x"], a["w"], a["b"]), "dx": (a["g"], a["w"]), "dw": (a["x"], a["g"])}
    for pass_, fs in forms.items():
        for label, f in fs.items():
            out = f(*args[pass_])
            assert out.dtype == np.float32 and out.flags.c_contiguous, (pass_, label)
            np.testing.assert_allclose(out, ref[pass_], rtol=1e-5, atol=1e-5, err_msg=f"{pass_} {label}")
    np.testing.assert_allclose(bc.bias_grad(a["g"]), ref["db"], rtol=1e-5, atol=1e-5)


def test_numpy_cases_pick_a_checked_formulation_and_refuse_a_wrong_one():
    c = bc.Conv("t", 2, 3, 4, 6, 3, 1, 1)
    a = bc.arrays(c)
    ref = _ember_refs(c, a)
    steps, info = bc.numpy_cases(c, a, ref, calls=1)
    assert set(steps) == set(bc.PASSES)
    for pass_ in ("fwd", "dx", "dw"):
        assert info["picked"][pass_] in info["candidates_ms"][pass_]
        np.testing.assert_allclose(steps[pass_](), ref[pass_], rtol=1e-5, atol=1e-5)
    y, dx, dw, db = steps["fwd+bwd"]()
    np.testing.assert_allclose(db, ref["db"], rtol=1e-5, atol=1e-5)
    ref["dw"] = ref["dw"] * 1.01  # a formulation that disagrees with ember is never timed
    with pytest.raises(AssertionError, match="dw formulation"):
        bc.numpy_cases(c, a, ref, calls=1)


def test_the_shapes_and_the_filter():
    every = bc.convs()
    assert len(every) == 4 + 10 * 3 and len({c.name for c in every}) == len(every)
    assert {c.n for c in every if c.layer.startswith("r18")} == {1, 32, 128}
    assert {c.n for c in bc.convs(quick=True)} == {32}
    assert [c.name for c in bc.convs(pattern="r18.sc64,lenet.c1")] == [
        "lenet.c1/b128", "r18.sc64/b1", "r18.sc64/b32", "r18.sc64/b128"]
    c = next(c for c in every if c.name == "r18.64s2/b32")
    assert (c.c, c.o, c.h, c.oh, c.k, c.s, c.p) == (64, 128, 32, 16, 3, 2, 1)
    assert c.flops == 2 * 32 * 128 * 64 * 9 * 16 * 16 and bc.pass_flops(c, "fwd+bwd") == 3 * c.flops


def _fake_result(ratio: float) -> dict:
    def timed(ms):
        return {"ms": ms, "per_s": 1e3 / ms, "samples_ms": [ms]}
    passes = {p: {"ember": timed(2.0), "numpy": timed(1.0), "pytorch": timed(1.0 * ratio * 2),
                  "ratios": {"numpy": 0.5, "pytorch": ratio}, "load": {"under_load": False, "others_cores": 0.0}}
              for p in bc.PASSES}
    c = bc.Conv("r18.64", 32, 64, 64, 32, 3, 1, 1)
    row = {**c._asdict(), "name": c.name, "oh": c.oh, "flops": c.flops, "passes": passes,
           "numpy_forms": {"picked": {"fwd": "nchw", "dx": "full nhwc", "dw": "cnhw"}}}
    return {"threads": 2, "repeats": 7, "torch": "x", "target": bc.FWD_BWD_TARGET, "matmul_gflops": 150.0,
            "matmul_gflops_end": 140.0, "rows": [row]}


def test_report_marks_the_shapes_below_the_target():
    low = bc.report(_fake_result(0.5))
    assert "| r18.64 | 32 | fwd |" in low and "full nhwc" in low and "**0.50× ✗**" in low
    assert "below it on 1 of 1: r18.64/b32 (0.50×)" in low and "float32 matmul 2048²: 150 GFLOP/s" in low
    fwd = next(line for line in low.splitlines() if "| fwd |" in line)
    assert f"| {bc.Conv('r18.64', 32, 64, 64, 32, 3, 1, 1).flops / 2.0 / 1e6:.1f} |" in fwd  # GFLOP/s from ms
    high = bc.report(_fake_result(1.2))
    assert "1.20× ✓" in high and "met on all 1" in high and "✗" not in high


def test_quick_run_end_to_end(tmp_path):
    js = tmp_path / "conv.json"
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-m", "ember", "bench", "--only", "conv", "--quick", "--no-torch", "--threads",
                        "1", "--filter", "w3.conv1", "--json", str(js)], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "| layer | batch | pass | ember ms |" in r.stdout and "float32 matmul 2048²" in r.stdout
    for pass_ in bc.PASSES:
        assert f"| {pass_}" in r.stdout
    assert "| w3.conv1 | 32 | fwd" in r.stdout and "r18" not in r.stdout
    res = json.loads(js.read_text())
    (row,) = res["rows"]
    assert res["threads"] == 1 and res["torch"] is None and res["env"]["OPENBLAS_NUM_THREADS"] == "1"
    for pass_ in bc.PASSES:
        m = row["passes"][pass_]
        assert set(m) >= {"ember", "numpy", "ratios", "load"} and "pytorch" not in m
        assert len(m["ember"]["samples_ms"]) == 2 and m["ratios"]["numpy"] > 0


def test_a_filter_matching_nothing_is_one_line():
    r = subprocess.run([sys.executable, "-m", "benchmarks.conv", "--filter", "vgg"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "matches no shape" in r.stderr and len(r.stderr.strip().splitlines()) == 1


@requires_torch
def test_pytorch_steps_equal_embers():
    c = bc.Conv("t", 2, 3, 4, 7, 3, 2, 1)
    a = bc.arrays(c)
    e, t = bc.library_cases(ember, c, a), bc.library_cases(torch, c, a)
    np.testing.assert_allclose(t["fwd"]().numpy(), e["fwd"]().numpy(), rtol=1e-5, atol=1e-5)
    for pass_ in ("dx", "dw", "fwd+bwd"):
        for tg, eg in zip(t[pass_](), e[pass_]()):
            np.testing.assert_allclose(tg.numpy(), eg.numpy(), rtol=1e-5, atol=1e-5, err_msg=pass_)


def test_conv_algos_times_each_algorithm_where_it_runs():
    """benchmarks/conv_algos.py (the thresholds' measurement): every algorithm that can take a shape is timed."""
    r = subprocess.run([sys.executable, "-m", "benchmarks.conv_algos", "--repeats", "1", "--cpu-time", "r512b1", "d512"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1].startswith("r512b1") and all(f"{a} " in lines[1] for a in ("im2col", "folded", "winograd"))
    assert lines[2].startswith("d512") and "folded " in lines[2] and "winograd" not in lines[2]
    bad = subprocess.run([sys.executable, "-m", "benchmarks.conv_algos", "vgg"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "unknown shape 'vgg'" in bad.stderr
