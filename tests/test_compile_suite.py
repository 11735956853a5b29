"""The parity suites again, through `ember.compile`: every function and model they check is compiled,
and what is compared with PyTorch and finite differences is a replay of the captured program.

`EMBER_TEST_COMPILE=1` makes tests/helpers.py compile every function `check_grad` and `compare_torch`
evaluate, and every Module call (conftest.py installs `helpers.compile_every_module`): a first call
captures (an eager run, its result dropped), and the result checked is the second call's, a replay.
A compiler bug shows as a parity failure, or as an exception in capture or replay.

This runs with PyTorch installed (CI's parity run, where each suite's gradchecks run too): without it
most of these suites would skip, and CI would pay for the rerun twice.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import requires_torch
from test_device_suite import ROOT, SUITES

pytestmark = requires_torch  # (so conftest.py marks these `parity`)

# The op families and nn layers (as tests/test_device_suite.py), whole models and training loops, and the
# recurrent and attention layers (RNN/LSTM/GRU, MultiheadAttention, Transformer).
COMPILE_SUITES = SUITES + ["test_nn_models.py", "test_nn_rnn.py", "test_nn_attention.py", "test_sorting.py",
                           "test_counting.py", "test_linalg_ext.py", "test_indexing_ext.py", "test_statistics.py",
                           "test_special.py", "test_elementwise_ext.py"]


@pytest.mark.skipif(os.environ.get("EMBER_TEST_COMPILE") == "1", reason="already running compiled")
@pytest.mark.parametrize("suite", COMPILE_SUITES)
def test_parity_suite_compiled(suite):
    env = dict(os.environ, EMBER_TEST_COMPILE="1", PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider", "-x", "--tb=short",
           os.path.join("tests", suite)]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"EMBER_TEST_COMPILE=1 pytest tests/{suite} failed:\n" + r.stdout[-6000:] + r.stderr[-2000:]
