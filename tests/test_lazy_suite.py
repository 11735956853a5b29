"""The parity suites again, in lazy mode: every op they check is deferred and computed when read.

`EMBER_LAZY=always` runs the whole process in one lazy block (as `EMBER_LAZY=1` does) and defers even
an application seen for the first time (its shape is learned by running it once on the side), and fuses
elementwise chains of any size: so each op of each suite goes through deferral, the stand-in, the
computation at the read, the fusion pass and autograd's recording at that point. A lazy-mode bug shows as
a parity failure, or as an exception where the value is read.

Like tests/test_compile_suite.py this runs with PyTorch installed (CI's parity run).
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers import requires_torch
from test_device_suite import ROOT, SUITES

pytestmark = requires_torch  # (so conftest.py marks these `parity`)

LAZY_SUITES = SUITES + ["test_autograd.py", "test_inplace.py", "test_nn_models.py", "test_nn_rnn.py",
                        "test_nn_attention.py", "test_optim.py", "test_data_attr.py", "test_sorting.py",
                        "test_counting.py", "test_linalg_ext.py", "test_indexing_ext.py", "test_statistics.py",
                        "test_special.py", "test_elementwise_ext.py"]
# three processes, not one per suite: each start (PyTorch's import) costs ~3 s of CI's time
GROUPS = {"ops": LAZY_SUITES[:7] + LAZY_SUITES[21:], "nn": LAZY_SUITES[7:14], "autograd-models-optim": LAZY_SUITES[14:21]}


@pytest.mark.skipif(os.environ.get("EMBER_LAZY", "0") not in ("", "0"), reason="already running lazily")
@pytest.mark.parametrize("group", list(GROUPS))
def test_parity_suites_lazy(group):
    env = dict(os.environ, EMBER_LAZY="always", PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-p", "no:cacheprovider", "--tb=short"]
    cmd += [os.path.join("tests", suite) for suite in GROUPS[group]]
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, (f"EMBER_LAZY=always pytest {' '.join(GROUPS[group])} failed:\n" + r.stdout[-6000:]
                               + r.stderr[-2000:])
