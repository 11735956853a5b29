"""DataLoader as `torch.utils.data.DataLoader`: batches from a dataset, in the main process or in
worker processes, in sampler order either way."""
from __future__ import annotations

import itertools
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from ... import backend
from ..._creation import Generator, default_generator
from ._collate import default_collate, default_convert
from ._fetch import IterableFetcher, MapFetcher
from ._pin import can_pin, pin_memory as _pinned
from ._worker import IterationEnd, Resume, WorkerError, worker_loop
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)

_POLL_S = 1.0  # longest single wait for a result before the workers' liveness is checked again
_JOIN_S = 2.0  # how long shutdown waits for a worker to leave on its own before it is terminated
# the reading ends of every live iterator's result pipes: a forked worker closes its copies of them
_readers: weakref.WeakSet = weakref.WeakSet()


class _InfiniteConstantSampler(Sampler):
    """The sampler behind an IterableDataset: placeholders forever (the dataset decides when to stop)."""

    def __iter__(self):
        return itertools.repeat(None)


def _default_context():
    # fork: workers start at once and inherit the dataset instead of unpickling it; it is only
    # reliable on Linux (macOS's system libraries are not fork-safe)
    return mp.get_context("fork") if sys.platform.startswith("linux") else mp.get_context()


class DataLoader(Generic[T_co]):
    """Iterate over `dataset` in batches.

    Map-style datasets are read in the order of `sampler` (sequential, or random with `shuffle`),
    `batch_size` indices at a time (or as `batch_sampler` groups them); `batch_size=None` turns
    automatic batching off (samples come one by one through `default_convert`). Iterable datasets
    are read as they stream. `collate_fn` (default: `default_collate`) merges the samples of a batch.

    With ``num_workers > 0`` batches are made in that many worker processes, up to
    ``prefetch_factor * num_workers`` in flight, and delivered in sampler order.

    Randomness: each epoch draws one base seed from `generator` (ember's default generator when
    None), workers or not. Batch t of the epoch is fetched with ember's default generator and
    Python's `random` freshly seeded with ``base_seed + t`` (NumPy's global generator from both),
    in the main process as in any worker. So the same seed gives bitwise the same batches, random
    augmentation in ``__getitem__`` included, whatever `num_workers` is and whichever worker loads a
    batch; the caller's generators are restored after each batch fetched in the main process (the
    dataset's draws do not advance them). Worker i starts in the state of batch i (PyTorch's seed
    ``base_seed + i``, `get_worker_info().seed`) and then calls ``worker_init_fn(i)``; seeding done
    there (or state kept in the dataset) is overridden for each batch, or escapes the guarantee.
    Another thread drawing from these generators while a batch loads breaks it too. An exception in a worker is raised again here, naming
    the worker and the sample indices; a worker that dies, or a batch slower than `timeout` seconds,
    raises RuntimeError. `persistent_workers` keeps the workers alive from one epoch to the next.
    `prefetch_factor` is None by default, as in PyTorch 2.13: 2 when there are workers.

    `pin_memory=True` copies the tensors of each batch (also inside tuples, lists and dicts) into
    page-locked host memory in the main process, so that `.to('cuda', non_blocking=True)` is
    asynchronous; without CUDA it warns once and yields ordinary batches. `pin_memory_device` is
    accepted for PyTorch compatibility (ember pins for its CUDA devices whatever it says).
    """

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1, shuffle: bool = False,
                 sampler: Sampler | Iterable | None = None, batch_sampler: Sampler | Iterable | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context=None, generator: Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "") -> None:
        if not isinstance(num_workers, int) or isinstance(num_workers, bool):
            raise TypeError(f"DataLoader: num_workers should be an int, but got {type(num_workers).__name__}")
        if num_workers < 0:
            raise ValueError(f"DataLoader: num_workers option should be non-negative (got {num_workers}); "
                             f"use num_workers=0 to disable multiprocessing.")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative (got {timeout})")
        if timeout > 0 and num_workers == 0:
            raise ValueError(f"DataLoader: timeout={timeout} needs num_workers > 0 (it bounds the wait for a "
                             f"worker's batch); set timeout=0 to load in the main process")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing. "
                             "Let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None.")
        if num_workers > 0:
            if prefetch_factor is None:
                prefetch_factor = 2
            elif not isinstance(prefetch_factor, int) or isinstance(prefetch_factor, bool) or prefetch_factor < 1:
                raise ValueError(f"DataLoader: prefetch_factor option should be a positive integer, but got "
                                 f"prefetch_factor={prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None:
            if num_workers == 0:
                raise ValueError(f"DataLoader: multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={num_workers}")
            if isinstance(multiprocessing_context, str):
                methods = mp.get_all_start_methods()
                if multiprocessing_context not in methods:
                    raise ValueError(f"DataLoader: multiprocessing_context option should specify a valid start "
                                     f"method in {methods!r}, but got {multiprocessing_context!r}")
                multiprocessing_context = mp.get_context(multiprocessing_context)
            elif not isinstance(multiprocessing_context, mp.context.BaseContext):
                raise TypeError(f"DataLoader: multiprocessing_context option should be a valid context object or a "
                                f"string specifying the start method, but got {multiprocessing_context!r}")
        for name, fn in (("collate_fn", collate_fn), ("worker_init_fn", worker_init_fn)):
            if fn is not None and not callable(fn):
                raise TypeError(f"DataLoader: {name} should be callable, but got {type(fn).__name__}")

        iterable = isinstance(dataset, IterableDataset)
        if iterable:
            for name, value in (("shuffle", shuffle), ("sampler", sampler), ("batch_sampler", batch_sampler)):
                if value is not None and value is not False:  # identity: a sampler may be an array
                    raise ValueError(f"DataLoader with IterableDataset: expected unspecified {name} option, but got "
                                     f"{name}={value!r} (an IterableDataset decides its own order)")
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")
        if sampler is None:
            if iterable:
                sampler = _InfiniteConstantSampler()
            else:
                sampler = RandomSampler(dataset, generator=generator) if shuffle else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        # batches' tensors go to page-locked host memory (in the main process, also with workers), from which
        # copies to the GPU are faster and can be asynchronous; without CUDA, a warning and ordinary memory
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self._warned_pin = False
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        self.collate_fn = collate_fn or (default_collate if batch_sampler is not None else default_convert)
        self.persistent_workers = persistent_workers
        self._iterable = iterable
        self._iterator = None
        self._initialized = True
        if num_workers > 0:
            _warn_if_too_many_workers(num_workers)

    _FROZEN = frozenset({"batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers"})

    def __setattr__(self, name: str, value) -> None:
        if name in self._FROZEN and self.__dict__.get("_initialized"):
            raise ValueError(f"{name} attribute should not be set after {type(self).__name__} is initialized")
        super().__setattr__(name, value)

    def __iter__(self) -> _BaseIter:
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None or self._iterator.shut_down:
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator.reset(self)
        return self._iterator

    def __len__(self) -> int:
        """Batches per epoch: ``len(batch_sampler)`` (or ``len(sampler)`` without batching); for an
        iterable dataset, ``len(dataset)`` divided by batch_size, rounded as `drop_last` says."""
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self.batch_sampler is not None else self.sampler)


def _warn_if_too_many_workers(num_workers: int) -> None:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if cpus is not None and num_workers > cpus:
        warnings.warn(f"This DataLoader will create {num_workers} worker processes in total, more than the {cpus} "
                      f"CPUs this process may use; the excess workers only compete for them (and may freeze the "
                      f"machine): consider lowering num_workers.", stacklevel=3)


class _BaseIter:
    """One pass over a DataLoader (persistent workers: several, see `reset`)."""

    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._auto_collation = loader.batch_sampler is not None
        self._index_sampler = loader.batch_sampler if self._auto_collation else loader.sampler
        self._collate_fn = loader.collate_fn
        self._drop_last = loader.drop_last
        self._generator = loader.generator
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = self._draw_base_seed()
        self._pin = False
        if loader.pin_memory:
            self._pin = backend.cuda_backend() is not None
            if not self._pin and not loader._warned_pin:  # warned once per DataLoader
                loader._warned_pin = True
                can_pin()

    def _draw_base_seed(self) -> int:
        # drawn for every epoch, workers or not (persistent ones too), so the generator's stream (and
        # with it the shuffling order) does not depend on num_workers
        return int((self._generator or default_generator).np.integers(0, 1 << 63))

    def _make_fetcher(self):
        fetcher = IterableFetcher if self._iterable else MapFetcher
        return fetcher(self._dataset, self._auto_collation, self._collate_fn, self._drop_last)

    def __iter__(self):
        return self

    def __len__(self) -> int:
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._fetcher = self._make_fetcher()
        self._batch = 0  # number of the next batch in this epoch: with the base seed, its random state

    def __next__(self):
        index = next(self._sampler_iter)
        t, self._batch = self._batch, self._batch + 1
        data = self._fetcher.fetch(index, self._base_seed, t)
        return _pinned(data) if self._pin else data


class _MultiProcessIter(_BaseIter):
    """Batches from worker processes, put back in sampler order.

    Task t (the t-th batch of indices) goes to the next worker, round-robin, that still has data;
    results that arrive ahead of their turn wait in `_results`. Each worker answers on its own pipe,
    and the main process waits on those pipes and on the workers' process sentinels together, so a
    worker's death is seen as soon as it happens.
    """

    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self.shut_down = False
        self._timeout = loader.timeout
        self._persistent = loader.persistent_workers
        self._in_flight = loader.prefetch_factor * loader.num_workers
        ctx = loader.multiprocessing_context or _default_context()
        self._done = ctx.Event()
        self._workers, self._pids, self._index_queues, self._conns = [], [], [], []
        n = loader.num_workers
        forks = ctx.get_start_method() == "fork"
        try:
            for i in range(n):
                index_queue = ctx.Queue()
                reader, writer = ctx.Pipe(duplex=False)
                w = ctx.Process(target=worker_loop, name=f"ember DataLoader worker {i}", daemon=True,
                                args=(i, n, self._dataset, self._iterable, self._auto_collation, self._collate_fn,
                                      self._drop_last, self._base_seed, loader.worker_init_fn, index_queue, writer,
                                      self._done, [*_readers, reader] if forks else []))
                w.start()
                # only the worker may hold the writing end: its death then ends the pipe (EOF), and
                # workers started later do not inherit it
                writer.close()
                self._workers.append(w)
                self._pids.append(w.pid)
                self._index_queues.append(index_queue)
                self._conns.append(reader)
                _readers.add(reader)
        except BaseException:
            self._shutdown(graceful=False)
            raise
        self._start_epoch()

    def _start_epoch(self) -> None:
        n = len(self._workers)
        self._worker_cycle = itertools.cycle(range(n))  # every epoch starts at worker 0
        self._send_idx = 0       # next task id to hand out
        self._rcvd_idx = 0       # next task id to return
        self._task_worker = {}   # task id -> worker, for tasks not yet returned
        self._results = {}       # task id -> batch (or WorkerError) that arrived ahead of its turn
        self._pending = [0] * n  # tasks each worker has yet to answer
        self._active = [True] * n  # False once a worker's iterable dataset is exhausted
        for _ in range(self._in_flight):
            self._dispatch()

    def reset(self, loader: DataLoader) -> None:
        """A new epoch on the same (persistent) workers: what the last epoch left in flight is
        discarded, and each worker restarts its dataset iterator."""
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = self._draw_base_seed()  # as a fresh iterator would: a new epoch, new random states
        for q in self._index_queues:
            q.put(Resume())
        for w in range(len(self._workers)):
            while not isinstance(self._receive([w])[1][1], Resume):
                pass
        self._start_epoch()

    def _dispatch(self) -> None:
        """Send the sampler's next index batch to the next worker that still has data."""
        try:
            index = next(self._sampler_iter)
        except StopIteration:
            return
        for _ in range(len(self._workers)):
            w = next(self._worker_cycle)
            if self._active[w]:
                break
        else:
            return
        self._index_queues[w].put((self._send_idx, index, self._base_seed))
        self._task_worker[self._send_idx] = w
        self._pending[w] += 1
        self._send_idx += 1

    def __next__(self):
        while True:
            if self.shut_down:
                raise StopIteration
            # tasks given to a worker after its iterable dataset ended get no answer: skip them
            while self._rcvd_idx < self._send_idx:
                if self._rcvd_idx in self._results or self._active[self._task_worker[self._rcvd_idx]]:
                    break
                del self._task_worker[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown()
                raise StopIteration
            if self._rcvd_idx in self._results:
                data = self._results.pop(self._rcvd_idx)
                del self._task_worker[self._rcvd_idx]
                self._rcvd_idx += 1
                self._dispatch()
                if isinstance(data, WorkerError):
                    data.reraise()
                return _pinned(data) if self._pin else data
            w, (task_id, data) = self._receive([w for w, p in enumerate(self._pending) if p])
            self._pending[w] -= 1
            if isinstance(data, IterationEnd):
                self._active[w] = False
                self._pending[w] = 0  # it ignores whatever it was sent after this
                self._dispatch()
            else:
                self._results[task_id] = data

    def _receive(self, waiting: list[int]) -> tuple[int, tuple]:
        """The next message from one of the `waiting` workers: (worker, (task id, payload)).
        RuntimeError when one of them dies, or when none answers within the timeout."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            conns = {self._conns[w]: w for w in waiting}
            sentinels = {self._workers[w].sentinel: w for w in waiting}
            left = _POLL_S if deadline is None else min(_POLL_S, max(0.0, deadline - time.monotonic()))
            ready = mp.connection.wait([*conns, *sentinels], left)
            for obj in ready:  # answers first: a worker may have answered just before it died
                if obj in conns:
                    try:
                        return conns[obj], obj.recv()
                    except EOFError:
                        self._died(conns[obj])
            for w in waiting:
                if self._workers[w].sentinel in ready or not self._workers[w].is_alive():
                    self._died(w)
            if deadline is not None and time.monotonic() >= deadline:
                self._shutdown(graceful=False)
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds waiting for a batch from "
                                   f"worker(s) {waiting}")

    def _died(self, w: int):
        self._workers[w].join(_JOIN_S)  # its exit code
        code = self._workers[w].exitcode
        self._shutdown(graceful=False)
        if code is None:
            how = "closed its result pipe"
        elif code < 0:
            try:
                how = f"exited unexpectedly with exit code {code} (killed by signal {signal.Signals(-code).name})"
            except ValueError:
                how = f"exited unexpectedly with exit code {code} (killed by signal {-code})"
        else:
            how = f"exited unexpectedly with exit code {code}"
        raise RuntimeError(f"DataLoader worker {w} (pid {self._pids[w]}) {how}. It may have run out of memory or "
                           f"crashed in native code; running with num_workers=0 shows the error in this process.")

    def _shutdown(self, graceful: bool = True) -> None:
        """Stop every worker and release the pipes and queues (idempotent)."""
        if self.shut_down:
            return
        self.shut_down = True
        self._done.set()
        # closing the reading ends first unblocks a worker that is sending a batch (it gets EPIPE and leaves)
        for c in self._conns:
            c.close()
        if graceful:
            for q, w in zip(self._index_queues, self._workers):
                if w.is_alive():
                    q.put(None)
            deadline = time.monotonic() + _JOIN_S
            for w in self._workers:
                w.join(max(0.0, deadline - time.monotonic()))
        for w in self._workers:
            if w.is_alive():
                w.kill()
                w.join()
            w.close()
        for q in self._index_queues:
            q.cancel_join_thread()  # never block this process's exit on indices no worker will read
            q.close()

    def __del__(self) -> None:
        if not getattr(self, "shut_down", True):
            try:
                self._shutdown()
            except Exception:  # interpreter shutdown: modules may already be gone
                pass
