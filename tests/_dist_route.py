"""Where the tensors of an `mpiexec -n 2` test script live and how they travel (imported by
tests/_dist_collectives.py and tests/_dist_ddp.py):

- `cpu`: NumPy tensors over MPI;
- `nccl`: CUDA tensors over NCCL, each rank on GPU LOCAL_RANK;
- `host`: CUDA tensors through host memory, NCCL switched off with EMBER_DISABLE_NCCL on every rank;
- `one-host`: EMBER_DISABLE_NCCL on rank 1 only: every rank must still take the host route;
- `no-nccl-lib`: CuPy cannot load libnccl (the fake CUDA plays it): the host route, with the reason.

Without a GPU the CUDA routes run on tests/_fakecuda.py, whose NCCL runs over MPI.
"""
from __future__ import annotations

import os
import sys

import ember
import ember.distributed as dist

ROUTES = ("cpu", "nccl", "host", "one-host", "no-nccl-lib")


def setup(route: str, rank: int) -> str:
    """Put this rank on its GPU (the real one, or the fake CUDA) and switch NCCL off where `route`
    says: the device name the script's tensors go to."""
    if route not in ROUTES:
        raise SystemExit(f"unknown route {route!r}; one of {ROUTES}")
    if route == "cpu":
        return "cpu"
    if not ember.cuda.is_available() or route == "no-nccl-lib":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import _fakecuda
        _fakecuda.install()
        if route == "no-nccl-lib":
            _fakecuda.cupy.cuda.nccl.available = False
    if route == "host" or (route == "one-host" and rank == 1):
        os.environ["EMBER_DISABLE_NCCL"] = "1"
    ember.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    return "cuda"


def check(route: str, rank: int) -> None:
    """The route taken was the one `route` asks for."""
    if route == "cpu":
        assert dist.nccl.why_not is None and not dist.nccl.communicators
    elif route == "nccl":
        assert dist.nccl.why_not == "" and dist.nccl.communicators, (dist.nccl.why_not, dist.nccl.communicators)
        # one communicator, on this rank's GPU
        assert list(dist.nccl.communicators) == [rank], list(dist.nccl.communicators)
    else:
        why = {"host": "rank 0: EMBER_DISABLE_NCCL is set", "one-host": "rank 1: EMBER_DISABLE_NCCL is set",
               "no-nccl-lib": "rank 0: CuPy cannot load the NCCL library"}[route]
        assert dist.nccl.why_not.startswith(why) and not dist.nccl.communicators, dist.nccl.why_not
