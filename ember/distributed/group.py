"""The default process group: joining and leaving it, its rank and size, and the MPI module behind it.

Its state is module-level: `comm` is the group's MPI communicator (None outside a group). Other modules
read it as `group.comm` at call time, never through `from .group import comm`: it is rebound by
`init_process_group` and `destroy_process_group`.
"""
from __future__ import annotations

import os
import sys
import traceback
from typing import Any

comm = None  # the process group's MPI communicator (a duplicate of COMM_WORLD); None outside a group
_MPI = None  # the mpi4py.MPI module, once imported


class ProcessGroupStateError(ValueError, RuntimeError):
    """The default process group is not in the state a call needs: used before `init_process_group()`,
    or initialized twice.

    A ValueError, as PyTorch raises, so `except ValueError` written for PyTorch catches it; also a
    RuntimeError, which ember raised before, so code written against ember keeps working."""


def is_available() -> bool:
    """True when mpi4py can be imported (the 'dist' extra)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def mpi():
    """The mpi4py.MPI module (imported on first use, so ember imports without mpi4py); a RuntimeError
    saying how to install it when it is missing."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise RuntimeError(f"ember.distributed needs mpi4py ({e}): pip install 'ember[dist]' (mpi4py and the "
                               "mpich wheel), or only mpi4py built against your cluster's MPI") from None
        _MPI = MPI
    return _MPI


def init_process_group(backend: str = "mpi", init_method: str | None = None, timeout: Any = None,
                       world_size: int = -1, rank: int = -1, **unused) -> None:
    """Join the job's process group: every process started by `mpiexec` calls this once.
    `world_size`/`rank`, when given, must agree with what MPI says (MPI assigns them).

    Sets the environment variables a PyTorch launcher sets, where they are unset: RANK, WORLD_SIZE,
    LOCAL_RANK and LOCAL_WORLD_SIZE (the rank among, and the number of, processes on this host), so
    `ember.cuda.set_device(int(os.environ["LOCAL_RANK"]))` gives each process its own GPU."""
    global comm
    if backend not in ("mpi", "nccl", "gloo"):
        raise ValueError(f"init_process_group(): backend must be 'mpi', got {backend!r} (ember's collectives run "
                         "over MPI; CUDA tensors use NCCL underneath)")
    if comm is not None:
        raise ProcessGroupStateError("init_process_group(): trying to initialize the default process group twice!")
    MPI = mpi()
    if not MPI.Is_initialized():
        MPI.Init()
    world = MPI.COMM_WORLD
    if world_size not in (-1, None) and world_size != world.Get_size():
        raise ValueError(f"init_process_group(): world_size={world_size}, but MPI started {world.Get_size()} "
                         f"processes (mpiexec -n {world_size} ...)")
    if rank not in (-1, None) and rank != world.Get_rank():
        raise ValueError(f"init_process_group(): rank={rank}, but MPI assigned rank {world.Get_rank()}")
    comm = world.Dup()
    node = comm.Split_type(MPI.COMM_TYPE_SHARED)  # the processes sharing this host's memory
    local = {"RANK": comm.Get_rank(), "WORLD_SIZE": comm.Get_size(), "LOCAL_RANK": node.Get_rank(),
             "LOCAL_WORLD_SIZE": node.Get_size()}
    node.Free()
    for k, v in local.items():
        os.environ.setdefault(k, str(v))
    _install_abort_hook()


def _install_abort_hook() -> None:
    """An uncaught exception on one rank ends every rank (MPI_Abort), instead of leaving them in a collective."""
    previous = sys.excepthook

    def hook(tp, value, tb):
        if comm is None or world_size() == 1:
            previous(tp, value, tb)
            return
        try:
            traceback.print_exception(tp, value, tb)
            sys.stderr.write(f"ember.distributed: rank {get_rank()} raised {tp.__name__}; aborting the job\n")
            sys.stderr.flush()
        finally:
            _MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


def is_initialized() -> bool:
    return comm is not None


def require(who: str):
    """The group's MPI communicator; a ProcessGroupStateError naming `who` (the caller, as "all_reduce()")
    outside a process group."""
    if comm is None:
        raise ProcessGroupStateError(
            f"{who}: Default process group has not been initialized, please make sure to call "
            "init_process_group() first (in every process, launched with mpiexec -n N ...)")
    return comm


def world_size() -> int:
    """The group's size, 1 outside a group (never raises, unlike `get_world_size`)."""
    return comm.Get_size() if comm is not None else 1


def get_backend(group=None) -> str:
    require("get_backend()")
    return "mpi"


def get_rank(group=None) -> int:
    """This process's rank in [0, world_size)."""
    return require("get_rank()").Get_rank()


def get_world_size(group=None) -> int:
    return require("get_world_size()").Get_size()


def destroy_process_group(group=None) -> None:
    """Leave the process group (MPI itself is finalized at exit)."""
    global comm
    # imported here, not at the top: nccl imports this module
    from . import nccl
    nccl.reset()
    if comm is not None:
        comm.Free()
    comm = None
