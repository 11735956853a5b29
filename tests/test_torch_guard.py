"""The PyTorch guard of tests/helpers.py: parity tests skip without PyTorch, except under
EMBER_REQUIRE_TORCH=1 (CI's parity run), where a missing PyTorch fails loudly."""
from __future__ import annotations

import os
import subprocess
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
# torch hidden: a None entry in sys.modules makes `import torch` raise ImportError
HIDE = "import sys; sys.modules['torch'] = None; sys.path.insert(0, %r); " % TESTS


def _run(code: str, require: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("EMBER_REQUIRE_TORCH", None)
    if require:
        env["EMBER_REQUIRE_TORCH"] = "1"
    return subprocess.run([sys.executable, "-c", HIDE + code], env=env, capture_output=True, text=True, timeout=120)


def test_without_torch_the_helpers_skip():
    r = _run("import helpers, pytest\n"
             "assert helpers.torch is None\n"
             "try:\n    helpers.need_torch('torch.nn')\nexcept pytest.skip.Exception as e:\n    print('SKIP', e)\n",
             require=False)
    assert r.returncode == 0, r.stderr
    assert "SKIP" in r.stdout and "PyTorch is not installed" in r.stdout


def test_required_torch_missing_fails_at_import():
    r = _run("import helpers", require=True)
    assert r.returncode != 0
    assert "ImportError: EMBER_REQUIRE_TORCH=1 but PyTorch cannot be imported" in r.stderr
    assert "pip install torch==2.13.0" in r.stderr


def test_marked_parity_modules():
    """Modules that reach torch through helpers carry the `parity` mark that CI's second run selects."""
    r = subprocess.run([sys.executable, "-m", "pytest", "-o", "addopts=", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "-m", "parity",
                        os.path.join(TESTS, "test_nn_loss.py"), os.path.join(TESTS, "test_main.py")],
                       cwd=os.path.dirname(TESTS), capture_output=True, text=True, timeout=300)
    assert "test_nn_loss.py" in r.stdout and "test_main.py" not in r.stdout, r.stdout[-2000:]

