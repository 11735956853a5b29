"""`ember.distributed`: collectives over MPI (mpi4py), as `torch.distributed` with backend="mpi".

Every collective is an in-place call on the tensor's own memory; tensors are never pickled. Each
takes one of three routes, chosen by where the tensor lives:

- NumPy (CPU) tensors: buffer-based MPI (`Allreduce` with `IN_PLACE`, `Bcast`, `Allgather`,
  `Reduce_scatter_block`);
- CUDA tensors, with CuPy's NCCL bindings (`cupy.cuda.nccl`) on every rank: NCCL, on the current
  stream, through one NCCL communicator per GPU whose unique id rank 0 broadcasts over MPI;
- CUDA tensors without NCCL (or with `EMBER_DISABLE_NCCL=1`, or of a dtype NCCL lacks: int16):
  copied to the host, reduced over MPI, copied back (rank 0 warns once).

A non-contiguous tensor goes through one contiguous copy. NCCL needs one GPU per rank: give rank r
the GPU `LOCAL_RANK` (set by `init_process_group`), as `train --distributed --device cuda` does.

Launch N processes with MPI: `mpiexec -n N python -m mpi4py -m ember train --distributed ...`.
`python -m mpi4py` aborts the whole job when any rank raises or exits with a non-zero status, so
one failing rank never leaves the others waiting; `init_process_group` also installs an excepthook
that aborts on an uncaught exception for scripts started without it (a plain `sys.exit(n)` on
one rank is not an exception: launch with `-m mpi4py` to cover it too).
"""
from __future__ import annotations

import os
import sys
import traceback
import warnings
from typing import Any

import numpy as np

from .. import backend
from .._tensor import Tensor, bump_version

__all__ = ["ProcessGroupStateError", "ReduceOp", "is_available", "init_process_group", "is_initialized", "get_rank",
           "get_world_size", "barrier", "broadcast", "all_reduce", "all_gather", "reduce_scatter",
           "destroy_process_group", "get_backend", "Work"]


class ProcessGroupStateError(ValueError, RuntimeError):
    """The default process group is not in the state a call needs: used before `init_process_group()`,
    or initialized twice.

    A ValueError, as PyTorch raises, so `except ValueError` written for PyTorch catches it; also a
    RuntimeError, which ember raised before, so code written against ember keeps working."""


class ReduceOp:
    """Reductions for `all_reduce` and `reduce_scatter` (PyTorch's names)."""
    SUM = "sum"
    AVG = "avg"
    MAX = "max"
    MIN = "min"
    PRODUCT = "product"


_comm = None  # the process group's MPI communicator (a duplicate of COMM_WORLD)
_MPI = None
_nccl_why = None  # for CUDA tensors: None undecided, "" NCCL in use, else why not (the same on every rank)
_nccl_comms: dict = {}  # CUDA device index -> NcclCommunicator, made by the first collective on that GPU

# numpy dtype name -> NCCL datatype constant (bool and int16 have none: those go through the host)
_NCCL_TYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64", "int8": "NCCL_INT8",
               "uint8": "NCCL_UINT8", "int32": "NCCL_INT32", "int64": "NCCL_INT64", "uint32": "NCCL_UINT32",
               "uint64": "NCCL_UINT64"}
# AVG is a SUM followed by a division on every route, so all routes round alike
_NCCL_OPS = {"sum": "NCCL_SUM", "avg": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN", "product": "NCCL_PROD"}


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
    `world_size`/`rank`, when given, must agree with what MPI says (MPI assigns them).

    Sets the environment variables a PyTorch launcher sets, where they are unset: RANK, WORLD_SIZE,
    LOCAL_RANK and LOCAL_WORLD_SIZE (the rank among, and the number of, processes on this host), so
    `ember.cuda.set_device(int(os.environ["LOCAL_RANK"]))` gives each process its own GPU."""
    global _comm
    if backend not in ("mpi", "nccl", "gloo"):
        raise ValueError(f"init_process_group(): backend must be 'mpi', got {backend!r} (ember's collectives run "
                         "over MPI; CUDA tensors use NCCL underneath)")
    if _comm is not None:
        raise ProcessGroupStateError("init_process_group(): trying to initialize the default process group twice!")
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
    node = _comm.Split_type(MPI.COMM_TYPE_SHARED)  # the processes sharing this host's memory
    local = {"RANK": _comm.Get_rank(), "WORLD_SIZE": _comm.Get_size(), "LOCAL_RANK": node.Get_rank(),
             "LOCAL_WORLD_SIZE": node.Get_size()}
    node.Free()
    for k, v in local.items():
        os.environ.setdefault(k, str(v))
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


def _group(who: str):
    if _comm is None:
        raise ProcessGroupStateError(
            f"{who}: Default process group has not been initialized, please make sure to call "
            "init_process_group() first (in every process, launched with mpiexec -n N ...)")
    return _comm


def _world_size() -> int:
    return _comm.Get_size() if _comm is not None else 1


def get_backend(group=None) -> str:
    _group("get_backend()")
    return "mpi"


def get_rank(group=None) -> int:
    """This process's rank in [0, world_size)."""
    return _group("get_rank()").Get_rank()


def get_world_size(group=None) -> int:
    return _group("get_world_size()").Get_size()


def barrier(group=None, async_op: bool = False, device_ids=None):
    comm = _group("barrier()")
    if async_op:
        return Work(comm.Ibarrier())
    comm.Barrier()
    return None


def destroy_process_group(group=None) -> None:
    """Leave the process group (MPI itself is finalized at exit)."""
    global _comm, _nccl_why
    for c in _nccl_comms.values():
        c.destroy()
    _nccl_comms.clear()
    _nccl_why = None
    if _comm is not None:
        _comm.Free()
    _comm = None


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


class _Queued:
    """The request of a collective queued on a CUDA stream (NCCL): nothing to wait for on the host."""

    def __init__(self, event) -> None:
        self._event = event

    def Wait(self) -> None:
        pass

    def Test(self) -> bool:
        return bool(self._event.done)


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
    MPI = _mpi()
    table = {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.MAX: MPI.MAX, ReduceOp.MIN: MPI.MIN,
             ReduceOp.PRODUCT: MPI.PROD}
    if op not in table:
        raise ValueError(f"unknown reduce op {op!r}; use ember.distributed.ReduceOp.SUM, AVG, MAX, MIN or PRODUCT")
    return table[op]


# ---------------------------------------------------------------------------- NCCL for CUDA tensors
def _nccl_for(array):
    """(NCCL module, communicator, datatype) for a CUDA array NCCL can reduce, else None (MPI through host
    memory). The first call is collective: every rank must make it, in the same collective."""
    global _nccl_why
    code = _NCCL_TYPES.get(array.dtype.name)
    if code is None:
        return None
    comm = _group("collective")
    cb = backend.cuda_backend()
    if _nccl_why is None:
        why = ""
        if os.environ.get("EMBER_DISABLE_NCCL", "") not in ("", "0"):
            why = "EMBER_DISABLE_NCCL is set"
        elif isinstance(cb.nccl(), str):
            why = cb.nccl()
        # once per process group: every rank must take the same route, or the collectives would not match
        whys = comm.allgather(why)
        bad = [(r, w) for r, w in enumerate(whys) if w]
        _nccl_why = f"rank {bad[0][0]}: {bad[0][1]}" if bad else ""
        if bad and comm.Get_rank() == 0:
            warnings.warn(f"ember.distributed: NCCL is not used ({_nccl_why}); CUDA tensors are reduced over MPI "
                          "through host memory", RuntimeWarning, stacklevel=4)
    if _nccl_why:
        return None
    nccl = cb.nccl()
    dev = backend.device_of(array)
    c = _nccl_comms.get(dev.index)
    if c is None:
        c = _nccl_communicator(nccl, comm, cb, dev)
        _nccl_comms[dev.index] = c
    return nccl, c, getattr(nccl, code)


def _nccl_communicator(nccl, comm, cb, dev):
    """One NCCL communicator over the process group on GPU `dev`, its unique id broadcast from rank 0 over MPI."""
    me = comm.Get_rank()
    props = cb.properties(dev.index)
    gpu = props.get("uuid") or (props.get("pciDomainID"), props.get("pciBusID"), props.get("pciDeviceID"), dev.index)
    where = comm.allgather((_mpi().Get_processor_name(), gpu))
    for r, w in enumerate(where):
        if r != me and w == where[me]:
            a, b = sorted((r, me))
            raise RuntimeError(f"ember.distributed: ranks {a} and {b} both use the same GPU ({dev} on host "
                               f"{w[0]}); NCCL needs one GPU per rank: call ember.cuda.set_device(int(os.environ"
                               "['LOCAL_RANK'])) before moving the model to 'cuda'")
    uid = comm.bcast(nccl.get_unique_id() if me == 0 else None, root=0)  # 128 bytes, once
    with cb.use(dev.index):
        return nccl.NcclCommunicator(comm.Get_size(), uid, me)


def _queue(dev: backend.device, call) -> _Queued:
    """Run `call(stream)` (an NCCL call) with GPU `dev` current, and return its request."""
    cb = backend.cuda_backend()
    with cb.use(dev.index):
        call(cb.stream_ptr())
        return _Queued(cb.record_event())


# ---------------------------------------------------------------------------- routes
def _start(buf, mpi_start, nccl_call):
    """Start a collective on the contiguous array `buf` (NumPy or CUDA), in place, by its route: its request.
    `mpi_start(host_array)` starts the MPI call; `nccl_call(nccl, comm, datatype, ptr, count, stream)` is the
    NCCL call."""
    if type(buf) is np.ndarray:
        return mpi_start(buf)
    route = _nccl_for(buf)
    if route is not None:
        nccl, c, code = route
        ptr, n = buf.data.ptr, buf.size
        return _queue(backend.device_of(buf), lambda s: nccl_call(nccl, c, code, ptr, n, s))
    host = np.ascontiguousarray(backend.to_host(buf))
    return _ViaHost(mpi_start(host), host, buf)


def _start_all_reduce(buf, op: str = ReduceOp.SUM):
    """Start reducing `buf` in place (as a SUM for AVG; the caller divides): its request."""
    comm, MPI, mop = _group("all_reduce()"), _mpi(), _mpi_op(op)
    return _start(buf, lambda a: comm.Iallreduce(MPI.IN_PLACE, a, op=mop),
                  lambda nccl, c, code, p, n, s: c.allReduce(p, p, n, code, getattr(nccl, _NCCL_OPS[op]), s))


def _start_broadcast(buf, src: int):
    comm = _group("broadcast()")
    return _start(buf, lambda a: comm.Ibcast(a, root=src), lambda nccl, c, code, p, n, s: c.bcast(p, n, code, src, s))


def _contiguous(t: Tensor, who: str):
    """(a C-contiguous array on t's device holding t's values, a function writing it back into t or None)."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{who}: expected an ember Tensor, got {type(t).__name__}")
    a = t.data
    if a.flags.c_contiguous:
        return a, None
    xp = backend.array_module(a)
    with backend.on(t.device):
        c = xp.ascontiguousarray(a)

    def back():
        t.data[...] = c
    return c, back


def _done(t: Tensor, back, avg: bool):
    def finish():
        with backend.on(t.device):
            if back is not None:
                back()
            if avg:
                t.data /= _world_size()
        bump_version(t)
    return finish


def _run(req, finish, async_op: bool):
    work = Work(req, finish)
    if async_op:
        return work
    work.wait()
    return None


def all_reduce(tensor: Tensor, op: str = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `tensor` across all ranks in place: every rank ends with the result."""
    _group("all_reduce()")
    _mpi_op(op)
    if not isinstance(tensor, Tensor):
        raise TypeError(f"all_reduce(): expected an ember Tensor, got {type(tensor).__name__}")
    if tensor.data.dtype.kind == "b":
        raise TypeError("all_reduce(): bool tensors cannot be reduced over MPI; convert with .to(ember.uint8) "
                        "(SUM/MAX then act as a count/any)")
    if op == ReduceOp.AVG and tensor.data.dtype.kind != "f":
        raise TypeError(f"all_reduce(): ReduceOp.AVG needs a floating tensor, got {tensor.dtype}")
    buf, back = _contiguous(tensor, "all_reduce()")
    return _run(_start_all_reduce(buf, op), _done(tensor, back, op == ReduceOp.AVG), async_op)


def broadcast(tensor: Tensor, src: int, group=None, async_op: bool = False):
    """Copy rank `src`'s tensor into every rank's `tensor` (same shape and dtype everywhere)."""
    _group("broadcast()")
    _check_rank(src, "broadcast()")
    buf, back = _contiguous(tensor, "broadcast()")
    return _run(_start_broadcast(buf, src), _done(tensor, back, False), async_op)


def _assign(t: Tensor, part) -> None:
    """t's values <- `part` (an array on any device)."""
    with backend.on(t.device):
        t.data[...] = backend.transfer(part, t.device)
    bump_version(t)


def all_gather(tensor_list: list, tensor: Tensor, group=None, async_op: bool = False):
    """Fill `tensor_list[r]` with rank r's `tensor`, on every rank."""
    comm = _group("all_gather()")
    n = comm.Get_size()
    if not isinstance(tensor_list, list) or len(tensor_list) != n:
        raise ValueError(f"all_gather(): tensor_list must be a list of world_size={n} tensors, got "
                         f"{len(tensor_list) if isinstance(tensor_list, list) else type(tensor_list).__name__}")
    send, _ = _contiguous(tensor, "all_gather()")
    for i, t in enumerate(tensor_list):
        if not isinstance(t, Tensor) or t.shape != tensor.shape or t.dtype != tensor.dtype:
            raise ValueError(f"all_gather(): tensor_list[{i}] must have the input's shape {list(tensor.shape)} and "
                             f"dtype {tensor.dtype}")
    route = None if type(send) is np.ndarray else _nccl_for(send)
    if route is not None:
        _, c, code = route
        dev = tensor.device
        with backend.on(dev):
            recv = backend.array_module(send).empty((n,) + send.shape, send.dtype)
        sp, rp, k = send.data.ptr, recv.data.ptr, send.size
        req = _queue(dev, lambda s: c.allGather(sp, rp, k, code, s))
    else:
        send = np.ascontiguousarray(backend.to_host(send))
        recv = np.empty((n,) + send.shape, send.dtype)
        req = comm.Iallgather(send, recv)

    def finish():
        for r, t in enumerate(tensor_list):
            _assign(t, recv[r])
    return _run(req, finish, async_op)


def reduce_scatter(output: Tensor, input_list: list, op: str = ReduceOp.SUM, group=None, async_op: bool = False):
    """Reduce `input_list` elementwise across ranks; rank r receives the reduction of everyone's input_list[r]."""
    comm = _group("reduce_scatter()")
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
    route = None if type(recv) is np.ndarray else _nccl_for(recv)
    if route is not None:
        nccl, c, code = route
        dev = output.device
        with backend.on(dev):
            send = backend.array_module(recv).stack([backend.transfer(t.data, dev) for t in input_list])
        sp, rp, k, nop = send.data.ptr, recv.data.ptr, recv.size, getattr(nccl, _NCCL_OPS[op])
        req = _queue(dev, lambda s: c.reduceScatter(sp, rp, k, code, nop, s))
    else:
        send = np.stack([backend.to_host(t.data) for t in input_list])
        if type(recv) is np.ndarray:
            req = comm.Ireduce_scatter_block(send, recv, op=mop)
        else:
            host = np.empty(recv.shape, recv.dtype)
            req = _ViaHost(comm.Ireduce_scatter_block(send, host, op=mop), host, recv)
    return _run(req, finish, async_op)


def _check_rank(r: int, who: str) -> None:
    n = get_world_size()
    if not isinstance(r, int) or not 0 <= r < n:
        raise ValueError(f"{who}: rank {r!r} is out of range for world_size={n}")
