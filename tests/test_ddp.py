"""DistributedDataParallel under `mpiexec -n 2` (scenarios in tests/_dist_ddp.py), plus the
single-process errors. Every multi-process run has a timeout: a hang fails the test."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import ember.nn as nn
from ember.nn.parallel import DistributedDataParallel

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "_dist_ddp.py"


def _mpirun(*args: str, timeout: int = 90) -> subprocess.CompletedProcess:
    pytest.importorskip("mpi4py")
    if shutil.which("mpiexec") is None:
        pytest.skip("mpiexec is not on PATH")
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    return subprocess.run(["mpiexec", "-n", "2", sys.executable, str(SCRIPT), *args], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))


SCENARIOS = ["broadcast", "train", "nosync", "nosync_silent", "buckets", "unused", "devices"]
# the model on the CPU; on CUDA with NCCL; on CUDA through host memory (no NCCL): tests/_dist_route.py
ROUTES = ["cpu", "nccl", "host"]
_runs: dict = {}


@pytest.fixture(params=ROUTES)
def run_all(request):
    # one launch per route for all scenarios: MPI start-up and imports dominate the cost
    route = request.param
    if route not in _runs:
        _runs[route] = _mpirun("--route", route, *SCENARIOS)
    return _runs[route]


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario(run_all, name):
    """broadcast: ranks with different weights are identical after wrapping; train: SGD/Adam (float64
    and float32) on rank halves match full-batch single-process training and stay bitwise identical;
    nosync: 2 micro-batches with no_sync equal one step on the whole batch; buckets: many buckets give
    the bitwise same result as one, started during backward; unused: zeros for unused parameters;
    devices: buckets of one dtype and device, their buffers on the parameters' device."""
    assert run_all.returncode == 0, run_all.stdout + run_all.stderr
    assert f"OK {name}\n" in run_all.stdout, run_all.stdout + run_all.stderr


def test_rank_local_exception_in_backward_aborts_the_job():
    r = _mpirun("crash")
    assert r.returncode != 0
    assert "rank-local failure inside backward" in r.stderr
    assert "UNREACHABLE" not in r.stdout


def test_requires_initialized_process_group():
    import ember.distributed as dist
    if dist.is_initialized():
        pytest.skip("a process group is initialized in this process")
    with pytest.raises(RuntimeError, match="Default process group has not been initialized"):
        DistributedDataParallel(nn.Linear(2, 2))


def test_rejects_non_module():
    with pytest.raises(TypeError, match="expects an ember.nn.Module"):
        DistributedDataParallel(lambda x: x)
