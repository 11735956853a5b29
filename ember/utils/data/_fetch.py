"""Turning what a sampler yields into a batch: the one step the main process (num_workers=0) and
the worker processes share."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._collate import default_collate
from .dataset import Subset, TensorDataset


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

    def fetch(self, index):
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

    def fetch(self, index):
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
