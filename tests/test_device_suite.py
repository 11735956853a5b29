"""The parity suites again, on CUDA: every `check_grad`/`compare_torch` input on the device.

`EMBER_TEST_DEVICE=cuda` makes tests/helpers.py put ember's inputs on CUDA and bring results back
to compare them with PyTorch's and with finite differences. Without a GPU, conftest.py installs
tests/_fakecuda.py (CuPy's interface on NumPy, strict where CuPy is strict), so this runs in CI and
checks that every op takes the device path: no NumPy function called on a device array, no
implicit host copy, no host array mixed in, results and gradients on the inputs' device.

On a machine with a GPU and CuPy, the same command runs on the real device:
    EMBER_TEST_DEVICE=cuda python -m pytest tests/
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Files whose tests go through the parity helpers (the op families, nn ops and layers).
SUITES = [
    "test_arithmetic.py", "test_unary.py", "test_reduce.py", "test_shape.py", "test_indexing.py",
    "test_linalg.py", "test_atan2.py", "test_nn_activation.py", "test_nn_conv.py", "test_nn_loss.py",
    "test_nn_misc.py", "test_nn_norm.py", "test_nn_pool.py", "test_nn_fused.py",
]


@pytest.mark.skipif(os.environ.get("EMBER_TEST_DEVICE", "cpu") != "cpu", reason="already running on a device")
@pytest.mark.parametrize("suite", SUITES)
def test_parity_suite_on_cuda(suite):
    env = dict(os.environ, EMBER_TEST_DEVICE="cuda", PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider", "-x", "--tb=short",
           os.path.join("tests", suite)]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"EMBER_TEST_DEVICE=cuda pytest tests/{suite} failed:\n" + r.stdout[-6000:] + r.stderr[-2000:]
