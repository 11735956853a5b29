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
