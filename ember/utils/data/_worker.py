"""The DataLoader's worker processes: the loop each one runs, what it tells the main process, and
`get_worker_info()`.

A worker takes ``(task_id, indices, base_seed)`` from its index queue, fetches and collates that
batch in the random state `_fetch.seeded` gives it, and sends ``(task_id, batch)`` back on its own
result pipe. The main process dispatches round-robin
and puts batches back in task order. Nothing a worker does can leave the main process waiting
forever: failures travel as a `WorkerError`, and a worker that dies closes its pipe, which the
main process sees at once.
"""
from __future__ import annotations

import ctypes
import os
import pickle
import queue
import signal
import sys
import traceback

from ...autograd import no_grad
from ._fetch import IterableFetcher, MapFetcher, seed_all

__all__ = ["WorkerInfo", "get_worker_info"]

_POLL_S = 0.1  # how often an idle worker checks that it should stop, or that the main process is gone

_worker_info: WorkerInfo | None = None


class WorkerInfo:
    """What `get_worker_info()` tells the code running in a worker (read-only): `id` (0 to
    ``num_workers - 1``), `num_workers`, `seed` (``base_seed + id``: the ember and `random` seed the
    worker starts with, and fetches batch `id` with) and `dataset` (this process's copy)."""

    __slots__ = ("id", "num_workers", "seed", "dataset")

    def __init__(self, id: int, num_workers: int, seed: int, dataset) -> None:  # noqa: A002 (PyTorch's name)
        for name, value in zip(self.__slots__, (id, num_workers, seed, dataset)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise RuntimeError(f"Cannot assign attributes to {type(self).__name__} objects")

    def __repr__(self) -> str:
        return f"WorkerInfo(id={self.id}, num_workers={self.num_workers}, seed={self.seed})"


def get_worker_info() -> WorkerInfo | None:
    """Inside a DataLoader worker: this worker's `WorkerInfo`; in the main process: None.

    An IterableDataset uses it to give each worker its own share of the stream; a `worker_init_fn`
    to configure ``info.dataset`` per worker or to seed other libraries from ``info.seed``.
    """
    return _worker_info


class IterationEnd:
    """A worker's answer once its copy of an iterable dataset is exhausted."""

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id


class Resume:
    """Main → worker: a new epoch of persistent workers (restart the dataset iterator); the worker
    echoes it back once everything sent before it has been answered."""


class _KeyErrorMessage(str):
    """A KeyError prints its argument's repr; this message keeps its line breaks."""

    def __repr__(self) -> str:
        return str(self)


class WorkerError:
    """An exception raised in a worker, carried to the main process and raised again there (same
    type where it can be rebuilt from a message, else RuntimeError), with the worker id, what it was
    doing and the original traceback."""

    def __init__(self, worker_id: int, doing: str) -> None:
        exc_type, exc, tb = sys.exc_info()
        try:  # the type travels by reference: it must be importable in the main process
            pickle.dumps(exc_type)
        except Exception:
            exc_type = None
        self.exc_type = exc_type
        self.message = (f"Caught {type(exc).__name__} in DataLoader worker process {worker_id} {doing}.\n"
                        f"Original {''.join(traceback.format_exception(type(exc), exc, tb))}")

    def reraise(self):
        msg = _KeyErrorMessage(self.message) if self.exc_type is KeyError else self.message
        try:
            exc = self.exc_type(msg)
        except Exception:  # no type (not importable) or one that is not built from a message
            raise RuntimeError(msg) from None
        raise exc


def _describe(index, iterable: bool, batched: bool) -> str:
    """What a worker was doing when it failed, for the error raised in the main process."""
    if iterable:
        return f"while fetching the next {'batch' if batched else 'sample'} of its IterableDataset"
    if not batched:
        return f"while fetching sample index {index!r}"
    index = list(index)
    shown = ", ".join(map(repr, index[:32])) + (f", ... ({len(index)} indices)" if len(index) > 32 else "")
    return f"while fetching the batch of sample indices [{shown}]"


def worker_loop(worker_id: int, num_workers: int, dataset, iterable: bool, auto_collation: bool, collate_fn,
                drop_last: bool, base_seed: int, worker_init_fn, index_queue, result_conn, done,
                inherited_readers: list) -> None:
    """The body of worker process `worker_id` (see the module docstring for the protocol). It
    returns on a None task, or once the `done` event is set or the main process is gone: `done`
    also reaches it when the main process can no longer feed the queue (its iterator collected by
    the garbage collector after the queue itself was finalized)."""
    global _worker_info
    # The reading ends of result pipes that fork copied into this process: with them closed, the
    # main process is each pipe's only reader, and a worker blocked sending a batch gets EPIPE as
    # soon as the main process closes its end.
    for reader in inherited_readers:
        reader.close()
    # Ctrl-C is the main process's to handle: it shuts the workers down
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    parent = os.getppid()
    # seeded as if about to fetch batch `worker_id` (distinct per worker: forked workers would otherwise
    # share their parent's states); worker_init_fn and iter(dataset) run in this state
    seed = seed_all(base_seed, worker_id)
    _worker_info = WorkerInfo(worker_id, num_workers, seed, dataset)
    fetcher_type = IterableFetcher if iterable else MapFetcher
    fetcher = start_error = None  # every task gets start_error while there is no fetcher
    try:
        if worker_init_fn is not None:
            worker_init_fn(worker_id)
        fetcher = fetcher_type(dataset, auto_collation, collate_fn, drop_last)
    except Exception:
        start_error = WorkerError(worker_id, "while starting (in worker_init_fn or iter(dataset))")
    ended = False
    # gradients cannot cross processes: batches are plain data, and collating records no graph
    with no_grad():
        while True:
            try:
                task = index_queue.get(timeout=_POLL_S)
            except queue.Empty:
                if done.is_set() or os.getppid() != parent:
                    return
                continue
            if task is None or done.is_set():
                return
            if isinstance(task, Resume):
                ended = False
                try:
                    fetcher = fetcher_type(dataset, auto_collation, collate_fn, drop_last)
                except Exception:
                    fetcher = None
                    start_error = WorkerError(worker_id, "while restarting iter(dataset) for a new epoch")
                reply = (None, task)
            elif ended:
                continue  # its iterable dataset is done; the main process no longer waits for this worker
            else:
                # batch `task_id` of the epoch whose base seed is `epoch_seed`: fetched in the same
                # random state as in the main process with num_workers=0 (see _fetch.py)
                task_id, index, epoch_seed = task
                if fetcher is None:
                    reply = (task_id, start_error)
                else:
                    try:
                        reply = (task_id, fetcher.fetch(index, epoch_seed, task_id))
                    except Exception as e:
                        if iterable and isinstance(e, StopIteration):
                            reply, ended = (task_id, IterationEnd(worker_id)), True
                        else:
                            reply = (task_id, WorkerError(worker_id, _describe(index, iterable, auto_collation)))
            if not _send(result_conn, reply, worker_id):
                return
            del task, reply


def _die_with_parent() -> None:
    """On Linux, ask the kernel to SIGKILL this worker when the process that forked it dies, so a
    main process killed outright leaves no worker behind, even one blocked sending a batch (the
    idle poll of `os.getppid()` covers the other platforms)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass


def _send(conn, reply: tuple, worker_id: int) -> bool:
    """Send `reply` to the main process (an error in its place when it does not pickle); False when
    the main process has closed the pipe."""
    try:
        conn.send(reply)
    except OSError:
        return False
    except Exception:
        err = WorkerError(worker_id, "while sending its batch to the main process (it does not pickle)")
        try:
            conn.send((reply[0], err))
        except OSError:
            return False
    return True
