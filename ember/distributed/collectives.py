"""The collectives (all_reduce, broadcast, all_gather, reduce_scatter, barrier) and their requests (`Work`).

Every collective on data starts through one route chooser, `_start`, which picks the route from where
the tensor's buffer lives: buffer-based MPI for NumPy arrays; NCCL (`nccl.py`) for CUDA arrays when the
process group uses it; otherwise MPI on a host copy, copied back when the request completes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import backend
from .._tensor import Tensor, bump_version
from . import group as _pg  # not `group`: that is every collective's parameter (PyTorch's)
from . import nccl
from .. import _dtype as dt


class ReduceOp:
    """Reductions for `all_reduce` and `reduce_scatter` (PyTorch's names)."""
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


class Work:
    """A started non-blocking collective: `wait()` completes it (and runs its finishing step).

    For a collective on NCCL, `wait()` returns at once: the operation is queued on the CUDA stream,
    and whatever runs later on that stream sees its result (as PyTorch's NCCL work); `is_completed()`
    says whether the GPU has finished it."""

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


class _ViaHost:
    """The request of an MPI collective on a host copy of a CUDA array: completing it copies the result back."""

    def __init__(self, req, host: np.ndarray, dev_array) -> None:
        self._req, self._host, self._dev_array = req, host, dev_array

    def Wait(self) -> None:
        if self._req is not None:
            self._req.Wait()
            self._req = None
            a = self._dev_array
            dev = backend.device_of(a)
            with backend.on(dev):
                a[...] = backend.transfer(self._host, dev)

    def Test(self) -> bool:
        return self._req is None or bool(self._req.Test())


def _mpi_op(op: str):
    MPI = _pg.mpi()
    table = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.MAX: MPI.MAX, ReduceOp.MIN: MPI.MIN,
             ReduceOp.PRODUCT: MPI.PROD}
    if op not in table:
        raise ValueError(f"unknown reduce op {op!r}; use ember.distributed.ReduceOp.SUM, AVG, MAX, MIN or PRODUCT")
    return table[op]


# ---------------------------------------------------------------------------- routes
def _start(buf, mpi_start: Callable[[np.ndarray], object], nccl_start: Callable[[nccl.Route], object], *,
           reads: bool = True, writes: bool = True):
    """Start a collective on this rank's contiguous array `buf` (NumPy or CUDA) by the route where `buf`
    lives, and return its request:

    - a NumPy array: `mpi_start(buf)` (the MPI call on it);
    - a CUDA array NCCL can take (`nccl.route_for`): `nccl_start(route)` (the NCCL call, queued);
    - any other CUDA array: `mpi_start(host)` on a host copy of `buf` (an empty host array when the
      collective does not read `buf`: `reads=False`), copied back into `buf` when the request completes
      (unless the collective does not write `buf`: `writes=False`)."""
    if type(buf) is np.ndarray:
        return mpi_start(buf)
    route = nccl.route_for(buf)
    if route is not None:
        return nccl_start(route)
    host = np.ascontiguousarray(backend.to_host(buf)) if reads else np.empty(buf.shape, buf.dtype)
    req = mpi_start(host)
    return _ViaHost(req, host, buf) if writes else req


def start_all_reduce(buf, op: str = ReduceOp.SUM):
    """Start reducing the contiguous array `buf` in place (as a SUM for AVG; the caller divides): its request.
    DistributedDataParallel starts its buckets with it."""
    comm, MPI, mop = _pg.require("all_reduce()"), _pg.mpi(), _mpi_op(op)
    return _start(buf, lambda a: comm.Iallreduce(MPI.IN_PLACE, a, op=mop), lambda r: nccl.all_reduce(r, buf, op))


def _start_broadcast(buf, src: int):
    """Start copying rank `src`'s contiguous array `buf` into every rank's `buf`: its request."""
    comm = _pg.require("broadcast()")
    return _start(buf, lambda a: comm.Ibcast(a, root=src), lambda r: nccl.broadcast(r, buf, src))


def _contiguous(t: Tensor, who: str):
    """(a C-contiguous array on t's device holding t's values, a function writing it back into t or None)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{who}: expected an ember Tensor, got {type(t).__name__}")
    a = t._data
    if a.flags.c_contiguous:
        return a, None
    xp = backend.array_module(a)
    with backend.on(t.device):
        c = xp.ascontiguousarray(a)

    def back():
        t._data[...] = c
    return c, back


def _done(t: Tensor, back, avg: bool):
    def finish():
        with backend.on(t.device):
            if back is not None:
                back()
            if avg:
                t._data /= _pg.world_size()
        bump_version(t)
    return finish


def _run(req, finish, async_op: bool):
    work = Work(req, finish)
    if async_op:
        return work
    work.wait()
    return None


def _assign(t: Tensor, part) -> None:
    """t's values <- `part` (an array on any device)."""
    with backend.on(t.device):
        t._data[...] = backend.transfer(part, t.device)
    bump_version(t)


def _check_rank(r: int, who: str) -> None:
    n = _pg.get_world_size()
    if not isinstance(r, int) or not 0 <= r < n:
        raise ValueError(f"{who}: rank {r!r} is out of range for world_size={n}")


# ---------------------------------------------------------------------------- the collectives
def barrier(group=None, async_op: bool = False, device_ids=None):
    # no data, so no route to choose: always MPI
    comm = _pg.require("barrier()")
    if async_op:
        return Work(comm.Ibarrier())
    comm.Barrier()
    return None


def all_reduce(tensor: Tensor, op: str = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` across all ranks in place: every rank ends with the result."""
    _pg.require("all_reduce()")
    _mpi_op(op)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"all_reduce(): expected an ember Tensor, got {type(tensor).__name__}")
    if tensor._data.dtype.kind == "b":
        raise TypeError("all_reduce(): bool tensors cannot be reduced over MPI; convert with .to(ember.uint8) "
                        "(SUM/MAX then act as a count/any)")
    if op == ReduceOp.AVG and not dt.is_float(tensor._data.dtype):
        raise TypeError(f"all_reduce(): ReduceOp.AVG needs a floating tensor, got {tensor.dtype}")
    buf, back = _contiguous(tensor, "all_reduce()")
    return _run(start_all_reduce(buf, op), _done(tensor, back, op == ReduceOp.AVG), async_op)


def broadcast(tensor: Tensor, src: int, group=None, async_op: bool = False):
    """Copy rank `src`'s tensor into every rank's `tensor` (same shape and dtype everywhere)."""
    _pg.require("broadcast()")
    _check_rank(src, "broadcast()")
    buf, back = _contiguous(tensor, "broadcast()")
    return _run(_start_broadcast(buf, src), _done(tensor, back, False), async_op)


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Fill `tensor_list[r]` with rank r's `tensor`, on every rank."""
    comm = _pg.require("all_gather()")
    n = comm.Get_size()
    if not isinstance(tensor_list, list) or len(tensor_list) != n:
        raise ValueError(f"all_gather(): tensor_list must be a list of world_size={n} tensors, got "
                         f"{len(tensor_list) if isinstance(tensor_list, list) else type(tensor_list).__name__}")
    send, _ = _contiguous(tensor, "all_gather()")
    for i, t in enumerate(tensor_list):
        if not isinstance(t, Tensor) or t.shape != tensor.shape or t.dtype != tensor.dtype:
            raise ValueError(f"all_gather(): tensor_list[{i}] must have the input's shape {list(tensor.shape)} and "
                             f"dtype {tensor.dtype}")
    recv = None  # (n,) + send.shape: on the host for MPI, on send's GPU for NCCL; set by the route taken

    def on_mpi(a: np.ndarray):
        nonlocal recv
        recv = np.empty((n,) + a.shape, a.dtype)
        return comm.Iallgather(a, recv)

    def on_nccl(route: nccl.Route):
        nonlocal recv
        req, recv = nccl.all_gather(route, send, n)
        return req

    # send is only read: through the host, its copy goes to MPI and the finishing step copies recv out
    req = _start(send, on_mpi, on_nccl, writes=False)

    def finish():
        for r, t in enumerate(tensor_list):
            _assign(t, recv[r])
    return _run(req, finish, async_op)


def reduce_scatter(output: Tensor, input_list: list, op: str = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `input_list` elementwise across ranks; rank r receives the reduction of everyone's input_list[r]."""
    comm = _pg.require("reduce_scatter()")
    n = comm.Get_size()
    mop = _mpi_op(op)
    if not isinstance(input_list, list) or len(input_list) != n:
        raise ValueError(f"reduce_scatter(): input_list must be a list of world_size={n} tensors")
    for i, t in enumerate(input_list):
        if not isinstance(t, Tensor) or t.shape != output.shape or t.dtype != output.dtype:
            raise ValueError(f"reduce_scatter(): input_list[{i}] must have the output's shape {list(output.shape)} "
                             f"and dtype {output.dtype}")
    recv, back = _contiguous(output, "reduce_scatter()")
    finish = _done(output, back, op == ReduceOp.AVG)

    def on_mpi(a: np.ndarray):
        send = np.stack([backend.to_host(t._data) for t in input_list])
        return comm.Ireduce_scatter_block(send, a, op=mop)

    # recv is only written: through the host, MPI fills an empty host array that is then copied into recv
    req = _start(recv, on_mpi, lambda r: nccl.reduce_scatter(r, [t._data for t in input_list], recv, op), reads=False)
    return _run(req, finish, async_op)
