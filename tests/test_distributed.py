"""ember.distributed's collectives across 2 MPI processes (`mpiexec -n 2`, scripts tests/_dist_*.py),
and that one failing rank ends the whole job instead of leaving the others in a collective."""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import ember
import ember.distributed as dist

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NPROC = 2


def _mpiexec() -> str:
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip("mpi4py is not installed (pip install 'ember[dist]')")
    exe = shutil.which("mpiexec")
    if exe is None:
        pytest.skip("mpiexec is not on PATH (the mpich wheel or a system MPI provides it)")
    return exe


def launch(args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    """`mpiexec -n 2 python ARGS` from the repository root, single-threaded BLAS (the 2 ranks share cores)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    cmd = [_mpiexec(), "-n", str(NPROC), sys.executable, *args]
    # its own session, so a hung job is killed whole: killing mpiexec alone would leave the ranks
    # spinning in MPI's busy-wait
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            pytest.fail(f"mpiexec {' '.join(args)} hung for {timeout}s:\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


CASES = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "barrier", "errors", "dtypes"]
ROUTES = ["cpu", "nccl", "host", "one-host", "no-nccl-lib"]  # see tests/_dist_route.py


@pytest.mark.parametrize("case,route", [(c, r) for r in ROUTES for c in CASES]
                         + [("same_gpu", "nccl"), ("fake_nccl", "nccl")])
def test_collectives(case, route):
    """Each case checks its collective on every rank (see tests/_dist_collectives.py) and prints PASS:
    NumPy tensors over MPI, and CUDA tensors over NCCL or through host memory when some rank has no
    NCCL (on the fake CUDA of tests/_fakecuda.py, whose NCCL runs over MPI, where there is no GPU)."""
    p = launch([str(HERE / "_dist_collectives.py"), case, route])
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    for r in range(NPROC):
        assert f"PASS {case} rank {r}" in p.stdout, out


@pytest.mark.parametrize("via_mpi4py", [True, False], ids=["python -m mpi4py", "python"])
@pytest.mark.parametrize("how", ["raise", pytest.param("exit", id="sys.exit")])
def test_failing_rank_aborts_the_job(via_mpi4py, how, request):
    """Rank 1 fails (raises, or sys.exit(3)) while rank 0 waits in all_reduce: mpiexec must exit
    non-zero within seconds."""
    if how == "exit" and not via_mpi4py:
        # SystemExit bypasses sys.excepthook, so ember's abort hook never runs; rank 1 then waits in
        # MPI_Finalize at exit and rank 0 in the all_reduce, forever. `python -m mpi4py` aborts on it.
        request.applymarker(pytest.mark.xfail(strict=True, reason="ember.distributed does not abort the job on "
                                              "sys.exit(non-zero) in a plain `python script.py` rank"))
    script = str(HERE / "_dist_fail.py")
    start = time.monotonic()
    # the hanging case is cut at 20 s (the bound asserted below) to keep this file short
    p = launch(["-m", "mpi4py", script, how] if via_mpi4py else [script, how], timeout=20 if how == "exit" else 60)
    elapsed = time.monotonic() - start
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert elapsed < 20, f"the job took {elapsed:.1f}s to end after rank 1 failed:\n{out}"
    assert "rank 1 failed on purpose" in out, out
    assert "rank 0 left the all_reduce" not in out, out


# --- single process, no mpiexec: what fails before any MPI call -------------------------------------

@pytest.mark.parametrize("call", [
    lambda: dist.get_rank(), lambda: dist.get_world_size(), lambda: dist.get_backend(), lambda: dist.barrier(),
    lambda: dist.all_reduce(ember.ones(2)), lambda: dist.broadcast(ember.ones(2), 0),
    lambda: dist.all_gather([ember.ones(2)], ember.ones(2)), lambda: dist.reduce_scatter(ember.ones(2), [ember.ones(2)]),
], ids=["get_rank", "get_world_size", "get_backend", "barrier", "all_reduce", "broadcast", "all_gather",
        "reduce_scatter"])
def test_not_initialized(call):
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        call()


def test_bad_backend():
    with pytest.raises(ValueError, match="backend must be 'mpi'"):
        dist.init_process_group("tcp")
    assert not dist.is_initialized()


def test_reduce_op_names():
    assert {dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PRODUCT} \
        == {"sum", "avg", "max", "min", "product"}
