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

Layout (this module only re-exports the public API):
- `group.py`: the process group and its state (`group.comm`, the MPI communicator): init/destroy,
  rank, world size, backend, and `mpi()`, the lazily imported mpi4py.MPI;
- `collectives.py`: `ReduceOp`, `Work` and every collective; each collective on data picks its
  route (CPU MPI / NCCL / host staging) through one route chooser, `collectives._start`;
- `nccl.py`: the NCCL route: whether the group uses NCCL (`nccl.why_not`), one communicator per GPU
  (`nccl.communicators`), and the NCCL implementations of the collectives.
"""
from __future__ import annotations

from .collectives import ReduceOp, Work, all_gather, all_reduce, barrier, broadcast, reduce_scatter
from .group import (ProcessGroupStateError, destroy_process_group, get_backend, get_rank, get_world_size,
                    init_process_group, is_available, is_initialized)

__all__ = ["ProcessGroupStateError", "ReduceOp", "is_available", "init_process_group", "is_initialized", "get_rank",
           "get_world_size", "barrier", "broadcast", "all_reduce", "all_gather", "reduce_scatter",
           "destroy_process_group", "get_backend", "Work"]

# the public classes read as ember.distributed.<name> in reprs and tracebacks, wherever they are defined
for _cls in (ProcessGroupStateError, ReduceOp, Work):
    _cls.__module__ = __name__
del _cls
