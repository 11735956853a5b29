import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))  # for `from helpers import ...`
sys.path.insert(0, os.path.dirname(os.path.dirname(__file__)))  # for `from benchmarks import ...`

if os.environ.get("EMBER_TEST_DEVICE", "cpu") != "cpu":
    # The parity helpers run on CUDA: a real GPU when CuPy sees one, else the CPU stand-in for CuPy.
    import ember

    if not ember.cuda.is_available():
        import _fakecuda

        _fakecuda.install()

if os.environ.get("EMBER_TEST_COMPILE") == "1":  # the parity tests through ember.compile (tests/helpers.py)
    import helpers

    helpers.compile_every_module()


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "parity: uses PyTorch as an oracle (set on every test of a module that takes `torch`, "
                   "`need_torch`, `requires_torch` or `compare_torch` from helpers; CI's second run is `EMBER_REQUIRE_TORCH=1 pytest -m parity`)")


def pytest_collection_modifyitems(config, items):
    """Mark `parity` every test of a module that reaches PyTorch through tests/helpers.py (per module,
    not per test: a module's other tests are cheap next to its parity tests, and a test that reaches
    torch without a guard is then still run with PyTorch installed)."""
    import helpers

    for item in items:
        g = vars(item.module) if getattr(item, "module", None) is not None else {}
        if ("torch" in g and g["torch"] is helpers.torch) or any(
                g.get(name) is getattr(helpers, name) for name in ("need_torch", "requires_torch", "compare_torch")):
            item.add_marker(pytest.mark.parity)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject.toml): a worker per core this process may run on, at most 8 (beyond that,
    start-up and memory grow for little: the longest tests run one subprocess suite each)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, 8))


@pytest.fixture
def cuda():
    """A CUDA device for one test: the real one, or tests/_fakecuda.py installed for this test only."""
    import ember
    from ember import backend

    installed = False
    if not ember.cuda.is_available():
        import _fakecuda

        _fakecuda.install()
        installed = True
    yield "cuda"
    if installed:
        backend.uninstall_cuda()


def pytest_report_header(config):
    dev = os.environ.get("EMBER_TEST_DEVICE", "cpu")
    if dev == "cpu":
        return None
    import ember
    from ember import backend

    kind = "fake CUDA (tests/_fakecuda.py, NumPy underneath)" if backend.CUDA.fake else ember.cuda.get_device_name()
    return f"ember parity tests on {dev}: {kind}"
