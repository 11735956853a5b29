"""Turning what a sampler yields into a batch: the one step the main process (num_workers=0) and
the worker processes share, random state included.

Batch t of an epoch is always fetched with ember's default generator and Python's `random` freshly
seeded with ``base_seed + t`` (NumPy's global generator from ``[t, base_seed]``), wherever it is
fetched: random augmentation in ``__getitem__`` then gives the same samples whatever `num_workers`
is and whichever worker loads the batch. For t < num_workers this is exactly the state a worker
starts in (PyTorch's worker seed ``base_seed + worker_id``), so `get_worker_info().seed` keeps its
meaning.
"""
from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from ..._creation import default_generator
from ._collate import default_collate
from .dataset import Subset, TensorDataset

# The generators seeded for a batch are process-wide: two threads fetching at once would each swap
# them under the other (and could leave a batch's generator in place for good). Fetches in the main
# process therefore take turns; reentrant, as a dataset may itself iterate a DataLoader.
_SEEDED_FETCH = threading.RLock()


def seed_all(base_seed: int, t: int) -> int:
    """Seed ember's default generator and Python's `random` with ``base_seed + t``, and NumPy's
    global generator from ``[t, base_seed]``; return ``base_seed + t``."""
    seed = base_seed + t
    random.seed(seed)
    default_generator.manual_seed(seed)
    # NumPy's legacy global generator takes at most 32-bit words: a SeedSequence spreads both numbers
    np.random.seed(np.random.SeedSequence([t, base_seed]).generate_state(4))
    return seed


@contextmanager
def seeded(base_seed: int, t: int) -> Iterator[None]:
    """Run the body with the generators seeded for batch `t` (`seed_all`), then put back the states
    they had: the caller's random streams do not advance, however much the dataset draws."""
    with _SEEDED_FETCH:
        # swapping the NumPy generator object back is cheaper than a get_state/set_state round trip
        gen_np, gen_seed = default_generator.np, default_generator._seed
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            seed_all(base_seed, t)
            yield
        finally:
            default_generator.np, default_generator._seed = gen_np, gen_seed
            random.setstate(py_state)
            np.random.set_state(np_state)


def _tensor_dataset_below(dataset) -> tuple[list, TensorDataset] | None:
    """The plain Subsets over a plain TensorDataset that `dataset` is (outermost first), or None.
    Exact types only: a subclass may override how samples are made."""
    subsets = []
    while type(dataset) is Subset:
        subsets.append(dataset)
        dataset = dataset.dataset
    return (subsets, dataset) if type(dataset) is TensorDataset else None


class MapFetcher:
    """Batches of a map-style dataset: ``collate_fn([dataset[i] for i in indices])``, or one
    ``dataset.__getitems__(indices)`` call where the dataset has it; without automatic batching,
    ``collate_fn(dataset[index])``."""

    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        # default_collate of TensorDataset samples is each tensor indexed by the batch's rows: one
        # gather per tensor instead of a view per sample and a stack (the common training loop)
        self.tensor_source = _tensor_dataset_below(dataset) if collate_fn is default_collate else None

    def fetch(self, index, base_seed: int | None = None, t: int = 0):
        """The batch for `index`; with a `base_seed`, fetched under ``seeded(base_seed, t)``."""
        if base_seed is None or self._draws_nothing(index):
            return self._fetch(index)
        with seeded(base_seed, t):
            return self._fetch(index)

    def _draws_nothing(self, index) -> bool:
        # the TensorDataset gather runs no user code: no need to pay for seeding
        return self.auto_collation and self.tensor_source is not None

    def _fetch(self, index):
        if not self.auto_collation:
            return self.collate_fn(self.dataset[index])
        if self.tensor_source is not None:
            subsets, base = self.tensor_source
            rows = index
            for s in subsets:
                rows = [s.indices[i] for i in rows]
            rows = np.asarray(rows)
            if rows.ndim == 1 and rows.dtype.kind in "iu" and len(rows):
                return [t[rows] for t in base.tensors]
        getitems = getattr(self.dataset, "__getitems__", None)
        data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        return self.collate_fn(data)


class IterableFetcher:
    """Batches of an iterable dataset: the next ``len(index)`` samples of one iterator over it (the
    indices themselves are placeholders). StopIteration when the stream is done, or when only a
    short last batch is left and `drop_last` is set."""

    def __init__(self, dataset, auto_collation: bool, collate_fn: Callable, drop_last: bool) -> None:
        self.iterator = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index, base_seed: int | None = None, t: int = 0):
        """The next batch; with a `base_seed`, fetched under ``seeded(base_seed, t)``."""
        if base_seed is None:
            return self._fetch(index)
        with seeded(base_seed, t):
            return self._fetch(index)

    def _fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in index:
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)
