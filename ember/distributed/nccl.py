"""NCCL (CuPy's `cupy.cuda.nccl`) for CUDA tensors: whether the process group uses it, its communicators,
and the NCCL implementations of the collectives.

The collectives here are queued on the current CUDA stream of the buffer's GPU; their request (`_Queued`)
has nothing to wait for on the host. Which route a collective takes is decided in `collectives.py`
(`collectives._start`), which calls `route_for` and, when it gives a route, one of the functions here.

State (read as `nccl.why_not`, `nccl.communicators`; `reset()` clears it when the group is destroyed):
- `why_not`: None while undecided, "" once NCCL is in use, else why it is not (the same on every rank);
- `communicators`: CUDA device index -> NcclCommunicator, made by the first collective on that GPU.
"""
from __future__ import annotations

import os
import warnings
from typing import Any, Callable, NamedTuple

from .. import backend
from . import group

why_not: str | None = None  # for CUDA tensors: None undecided, "" NCCL in use, else why not (the same on every rank)
communicators: dict = {}  # CUDA device index -> NcclCommunicator, made by the first collective on that GPU

# numpy dtype name -> NCCL datatype constant (bool and int16 have none: those go through the host)
_NCCL_TYPES = {"float16": "NCCL_FLOAT16", "float32": "NCCL_FLOAT32", "float64": "NCCL_FLOAT64", "int8": "NCCL_INT8",
               "uint8": "NCCL_UINT8", "int32": "NCCL_INT32", "int64": "NCCL_INT64", "uint32": "NCCL_UINT32",
               "uint64": "NCCL_UINT64"}
# AVG is a SUM followed by a division on every route, so all routes round alike
_NCCL_OPS = {"sum": "NCCL_SUM", "avg": "NCCL_SUM", "max": "NCCL_MAX", "min": "NCCL_MIN", "product": "NCCL_PROD"}


class Route(NamedTuple):
    """What an NCCL collective on one CUDA array needs."""
    nccl: Any  # CuPy's NCCL module
    comm: Any  # the NcclCommunicator of the array's GPU
    datatype: int  # the NCCL datatype of the array's dtype


class _Queued:
    """The request of a collective queued on a CUDA stream (NCCL): nothing to wait for on the host."""

    def __init__(self, event) -> None:
        self._event = event

    def Wait(self) -> None:
        pass

    def Test(self) -> bool:
        return bool(self._event.done)


def reset() -> None:
    """Forget the process group's NCCL state (destroying its communicators): `destroy_process_group` calls it."""
    global why_not
    for c in communicators.values():
        c.destroy()
    communicators.clear()
    why_not = None


def route_for(array) -> Route | None:
    """The NCCL route for a CUDA array NCCL can reduce, else None (MPI through host memory). The first
    call is collective: every rank must make it, in the same collective."""
    global why_not
    code = _NCCL_TYPES.get(array.dtype.name)
    if code is None:
        return None
    comm = group.require("collective")
    cb = backend.cuda_backend()
    if why_not is None:
        why = ""
        if os.environ.get("EMBER_DISABLE_NCCL", "") not in ("", "0"):
            why = "EMBER_DISABLE_NCCL is set"
        elif isinstance(cb.nccl(), str):
            why = cb.nccl()
        # once per process group: every rank must take the same route, or the collectives would not match
        whys = comm.allgather(why)
        bad = [(r, w) for r, w in enumerate(whys) if w]
        why_not = f"rank {bad[0][0]}: {bad[0][1]}" if bad else ""
        if bad and comm.Get_rank() == 0:
            # stacklevel 4: past route_for, collectives._start and its _start_* helper
            warnings.warn(f"ember.distributed: NCCL is not used ({why_not}); CUDA tensors are reduced over MPI "
                          "through host memory", RuntimeWarning, stacklevel=4)
    if why_not:
        return None
    nccl = cb.nccl()
    dev = backend.device_of(array)
    c = communicators.get(dev.index)
    if c is None:
        c = _communicator(nccl, comm, cb, dev)
        communicators[dev.index] = c
    return Route(nccl, c, getattr(nccl, code))


def _communicator(nccl, comm, cb, dev):
    """One NCCL communicator over the process group on GPU `dev`, its unique id broadcast from rank 0 over MPI."""
    me = comm.Get_rank()
    props = cb.properties(dev.index)
    gpu = props.get("uuid") or (props.get("pciDomainID"), props.get("pciBusID"), props.get("pciDeviceID"), dev.index)
    where = comm.allgather((group.mpi().Get_processor_name(), gpu))
    for r, w in enumerate(where):
        if r != me and w == where[me]:
            a, b = sorted((r, me))
            raise RuntimeError(f"ember.distributed: ranks {a} and {b} both use the same GPU ({dev} on host "
                               f"{w[0]}); NCCL needs one GPU per rank: call ember.cuda.set_device(int(os.environ"
                               "['LOCAL_RANK'])) before moving the model to 'cuda'")
    uid = comm.bcast(nccl.get_unique_id() if me == 0 else None, root=0)  # 128 bytes, once
    with cb.use(dev.index):
        return nccl.NcclCommunicator(comm.Get_size(), uid, me)


def _queue(dev: backend.device, call: Callable[[int], None]) -> _Queued:
    """Run `call(stream)` (an NCCL call) with GPU `dev` current, and return its request."""
    cb = backend.cuda_backend()
    with cb.use(dev.index):
        call(cb.stream_ptr())
        return _Queued(cb.record_event())


# ---------------------------------------------------------------------------- the collectives on NCCL
# Each takes the Route that `route_for` gave for its CUDA buffer and returns the request of the queued call.
def all_reduce(route: Route, buf, op: str) -> _Queued:
    """Reduce the contiguous CUDA array `buf` in place (AVG as a SUM: the caller divides)."""
    nccl, c, code = route
    p, n, nop = buf.data.ptr, buf.size, getattr(nccl, _NCCL_OPS[op])
    return _queue(backend.device_of(buf), lambda s: c.allReduce(p, p, n, code, nop, s))


def broadcast(route: Route, buf, src: int) -> _Queued:
    """Copy rank `src`'s contiguous CUDA array `buf` into every rank's `buf`."""
    _, c, code = route
    p, n = buf.data.ptr, buf.size
    return _queue(backend.device_of(buf), lambda s: c.bcast(p, n, code, src, s))


def all_gather(route: Route, send, world: int) -> tuple[_Queued, Any]:
    """Gather every rank's contiguous CUDA array `send`: (request, a new array on send's GPU of shape
    (world,) + send.shape whose row r receives rank r's array); `world` is the group's size."""
    _, c, code = route
    dev = backend.device_of(send)
    with backend.on(dev):
        recv = backend.array_module(send).empty((world,) + send.shape, send.dtype)
    sp, rp, k = send.data.ptr, recv.data.ptr, send.size
    return _queue(dev, lambda s: c.allGather(sp, rp, k, code, s)), recv


def reduce_scatter(route: Route, inputs: list, recv, op: str) -> _Queued:
    """Reduce the arrays `inputs` (one per rank, on any device) elementwise across ranks into the contiguous
    CUDA array `recv`: rank r receives the reduction of everyone's inputs[r]."""
    nccl, c, code = route
    dev = backend.device_of(recv)
    with backend.on(dev):
        send = backend.array_module(recv).stack([backend.transfer(a, dev) for a in inputs])
    sp, rp, k, nop = send.data.ptr, recv.data.ptr, recv.size, getattr(nccl, _NCCL_OPS[op])
    return _queue(dev, lambda s: c.reduceScatter(sp, rp, k, code, nop, s))
