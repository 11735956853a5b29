"""`ember.distributed`: collectives over MPI (mpi4py), as `torch.distributed` with backend="mpi".

Every collective is a buffer-based, in-place MPI call on the tensor's array (`Allreduce` with
`IN_PLACE`, `Bcast`, `Allgather`, `Reduce_scatter_block`): tensors are never pickled. A
non-contiguous tensor goes through one contiguous copy. CUDA tensors are reduced through host
memory for now (copied to the host, reduced over MPI, copied back); NCCL (`cupy.cuda.nccl`) is
not wired in yet.

Launch N processes with MPI: `mpiexec -n N python -m mpi4py -m ember train --distributed ...`.
`python -m mpi4py` aborts the whole job when any rank raises or exits with a non-zero status, so
one failing rank never leaves the others waiting; `init_process_group` also installs an excepthook
that aborts on an uncaught exception for scripts started without it (a plain `sys.exit(n)` on
one rank is not an exception: launch with `-m mpi4py` to cover it too).
"""
from __future__ import annotations

import sys
import traceback
from typing import Any

import numpy as np

from .. import backend
from .._tensor import Tensor, bump_version

__all__ = ["ReduceOp", "is_available", "init_process_group", "is_initialized", "get_rank", "get_world_size",
           "barrier", "broadcast", "all_reduce", "all_gather", "reduce_scatter", "destroy_process_group",
           "get_backend", "Work"]


class ReduceOp:
    """Reductions for `all_reduce` and `reduce_scatter` (PyTorch's names)."""
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


_comm = None  # the process group's MPI communicator (a duplicate of COMM_WORLD)
_MPI = None
_nccl = None  # NCCL communicator for CUDA tensors, made on first use


def is_available() -> bool:
    """True when mpi4py can be imported (the 'dist' extra)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def _mpi():
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
    `world_size`/`rank`, when given, must agree with what MPI says (MPI assigns them)."""
    global _comm
    if backend not in ("mpi", "nccl", "gloo"):
        raise ValueError(f"init_process_group(): backend must be 'mpi', got {backend!r} (ember's collectives run "
                         "over MPI; CUDA tensors use NCCL underneath)")
    if _comm is not None:
        raise RuntimeError("init_process_group(): trying to initialize the default process group twice!")
    MPI = _mpi()
    if not MPI.Is_initialized():
        MPI.Init()
    world = MPI.COMM_WORLD
    if world_size not in (-1, None) and world_size != world.Get_size():
        raise ValueError(f"init_process_group(): world_size={world_size}, but MPI started {world.Get_size()} "
                         f"processes (mpiexec -n {world_size} ...)")
    if rank not in (-1, None) and rank != world.Get_rank():
        raise ValueError(f"init_process_group(): rank={rank}, but MPI assigned rank {world.Get_rank()}")
    _comm = world.Dup()
    _install_abort_hook()


def _install_abort_hook() -> None:
    """An uncaught exception on one rank ends every rank (MPI_Abort), instead of leaving them in a collective."""
    previous = sys.excepthook

    def hook(tp, value, tb):
        if _comm is None or _world_size() == 1:
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
    return _comm is not None


def _group():
    if _comm is None:
        raise RuntimeError("Default process group has not been initialized, please make sure to call "
                           "init_process_group() (under mpiexec)")
    return _comm


def _world_size() -> int:
    return _comm.Get_size() if _comm is not None else 1


def get_backend(group=None) -> str:
    _group()
    return "mpi"


def get_rank(group=None) -> int:
    """This process's rank in [0, world_size)."""
    return _group().Get_rank()


def get_world_size(group=None) -> int:
    return _group().Get_size()


def barrier(group=None, async_op: bool = False, device_ids=None):
    comm = _group()
    if async_op:
        return Work(comm.Ibarrier())
    comm.Barrier()
    return None


def destroy_process_group(group=None) -> None:
    """Leave the process group (MPI itself is finalized at exit)."""
    global _comm, _nccl
    if _comm is not None:
        _comm.Free()
    _comm = None
    _nccl = None


class Work:
    """A started non-blocking collective: `wait()` completes it (and runs its finishing step)."""

    def __init__(self, request, finish=None) -> None:
        self._req, self._finish = request, finish

    def wait(self, timeout=None) -> bool:
        if self._req is not None:
            self._req.Wait()
            self._req = None
            if self._finish is not None:
                self._finish()
                self._finish = None
        return True

    def is_completed(self) -> bool:
        if self._req is None:
            return True
        done = self._req.Test()
        if done:
            self.wait()
        return done


def _mpi_op(op: str):
    MPI = _mpi()
    table = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.MAX: MPI.MAX, ReduceOp.MIN: MPI.MIN,
             ReduceOp.PRODUCT: MPI.PROD}
    if op not in table:
        raise ValueError(f"unknown reduce op {op!r}; use ember.distributed.ReduceOp.SUM, AVG, MAX, MIN or PRODUCT")
    return table[op]


def _host_buffer(t: Tensor, who: str):
    """(a contiguous NumPy array holding t's values, a function writing it back into t)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{who}: expected an ember Tensor, got {type(t).__name__}")
    a = t.data
    if type(a) is np.ndarray and a.flags.c_contiguous:
        return a, None
    host = np.ascontiguousarray(backend.to_host(a))

    def back():
        t.data[...] = host if type(t.data) is np.ndarray else backend.transfer(host, t.device)
    return host, back


def _done(t: Tensor, back, avg: bool):
    def finish():
        if back is not None:
            back()
        if avg:
            t.data /= _world_size()
        bump_version(t)
    return finish


def all_reduce(tensor: Tensor, op: str = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` across all ranks in place: every rank ends with the result."""
    comm = _group()
    mop = _mpi_op(op)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"all_reduce(): expected an ember Tensor, got {type(tensor).__name__}")
    if tensor.data.dtype.kind == "b":
        raise TypeError("all_reduce(): bool tensors cannot be reduced over MPI; convert with .to(ember.uint8) "
                        "(SUM/MAX then act as a count/any)")
    if op == ReduceOp.AVG and tensor.data.dtype.kind != "f":
        raise TypeError(f"all_reduce(): ReduceOp.AVG needs a floating tensor, got {tensor.dtype}")
    buf, back = _host_buffer(tensor, "all_reduce()")
    finish = _done(tensor, back, op == ReduceOp.AVG)
    MPI = _mpi()
    if async_op:
        return Work(comm.Iallreduce(MPI.IN_PLACE, buf, op=mop), finish)
    comm.Allreduce(MPI.IN_PLACE, buf, op=mop)
    finish()
    return None


def broadcast(tensor: Tensor, src: int, group=None, async_op: bool = False):
    """Copy rank `src`'s tensor into every rank's `tensor` (same shape and dtype everywhere)."""
    comm = _group()
    _check_rank(src, "broadcast()")
    buf, back = _host_buffer(tensor, "broadcast()")
    finish = _done(tensor, back, False)
    if async_op:
        return Work(comm.Ibcast(buf, root=src), finish)
    comm.Bcast(buf, root=src)
    finish()
    return None


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Fill `tensor_list[r]` with rank r's `tensor`, on every rank."""
    comm = _group()
    n = comm.Get_size()
    if not isinstance(tensor_list, list) or len(tensor_list) != n:
        raise ValueError(f"all_gather(): tensor_list must be a list of world_size={n} tensors, got "
                         f"{len(tensor_list) if isinstance(tensor_list, list) else type(tensor_list).__name__}")
    for i, t in enumerate(tensor_list):
        if not isinstance(t, Tensor) or t.shape != tensor.shape or t.dtype != tensor.dtype:
            raise ValueError(f"all_gather(): tensor_list[{i}] must have the input's shape {list(tensor.shape)} and "
                             f"dtype {tensor.dtype}")
    send, _ = _host_buffer(tensor, "all_gather()")
    recv = np.empty((n,) + send.shape, send.dtype)

    def finish():
        for t, part in zip(tensor_list, recv):
            t.data[...] = part if type(t.data) is np.ndarray else backend.transfer(part, t.device)
            bump_version(t)
    if async_op:
        return Work(comm.Iallgather(send, recv), finish)
    comm.Allgather(send, recv)
    finish()
    return None


def reduce_scatter(output: Tensor, input_list: list, op: str = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `input_list` elementwise across ranks; rank r receives the reduction of everyone's input_list[r]."""
    comm = _group()
    n = comm.Get_size()
    if not isinstance(input_list, list) or len(input_list) != n:
        raise ValueError(f"reduce_scatter(): input_list must be a list of world_size={n} tensors")
    for i, t in enumerate(input_list):
        if not isinstance(t, Tensor) or t.shape != output.shape or t.dtype != output.dtype:
            raise ValueError(f"reduce_scatter(): input_list[{i}] must have the output's shape {list(output.shape)} "
                             f"and dtype {output.dtype}")
    send = np.stack([backend.to_host(t.data) for t in input_list])
    recv, back = _host_buffer(output, "reduce_scatter()")
    finish = _done(output, back, op == ReduceOp.AVG)
    mop = _mpi_op(op)
    if async_op:
        return Work(comm.Ireduce_scatter_block(send, recv, op=mop), finish)
    comm.Reduce_scatter_block(send, recv, op=mop)
    finish()
    return None


def _check_rank(r: int, who: str) -> None:
    n = get_world_size()
    if not isinstance(r, int) or not 0 <= r < n:
        raise ValueError(f"{who}: rank {r!r} is out of range for world_size={n}")
