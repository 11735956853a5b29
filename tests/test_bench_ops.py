"""benchmarks/ops.py (`python -m ember bench --only ops`): the case files load, and the runner measures and reports."""
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.ops import Case, load_cases, measure, report  # noqa: E402


def test_every_case_file_declares_cases():
    cases = load_cases()
    assert cases and all(isinstance(c, Case) for _, c in cases)
    assert len({c.name for _, c in cases}) == len(cases), "case names are unique"


def test_measure_and_report_a_small_case():
    case = Case("add 100", lambda rng: {"x": rng.standard_normal(100).astype(np.float32)},
                lambda E, a: a["x"] + 1, ("np.add", lambda a: a["x"] + 1), grad=True)
    t = measure(case, repeats=2)
    assert set(t) == {"ember", "numpy", "ember fwd+bwd"} and all(v > 0 for v in t.values())
    text = report([("demo", case.name, case, t)], threads=1)
    assert "| demo | add 100 |" in text and "np.add" in text
