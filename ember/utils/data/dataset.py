"""Datasets as `torch.utils.data`: map-style (`__getitem__` + `__len__`) and iterable-style
(`__iter__`), and the compositions built on them (TensorDataset, Subset, ConcatDataset,
ChainDataset, random_split)."""
from __future__ import annotations

import bisect
import itertools
import math
import numbers
import operator
import warnings
from collections.abc import Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from ..._creation import Generator, default_generator
from ..._tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "Subset", "ConcatDataset", "ChainDataset", "random_split"]

T_co = TypeVar("T_co", covariant=True)


class Dataset(Generic[T_co]):
    """A map from keys (usually ints in ``range(len(self))``) to samples.

    Subclasses implement ``__getitem__`` and, for the default samplers, ``__len__``; they may add
    ``__getitems__(indices) -> list of samples`` to fetch a whole batch in one call (the DataLoader
    then uses it). ``a + b`` concatenates two map-style datasets.
    """

    def __getitem__(self, index) -> T_co:
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset[T_co]) -> ConcatDataset[T_co]:
        return ConcatDataset([self, other])


class IterableDataset(Dataset[T_co], Iterable[T_co]):
    """A stream of samples: subclasses implement ``__iter__``.

    With ``num_workers > 0`` every worker process iterates its own copy, so a dataset that should
    not repeat samples splits its stream with ``get_worker_info()`` (its ``id`` and ``num_workers``).
    ``a + b`` chains two iterable datasets.
    """

    def __add__(self, other: Dataset[T_co]) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset[tuple]):
    """Sample ``i`` is ``tuple(t[i] for t in tensors)``: tensors indexed along their first dimension."""

    def __init__(self, *tensors: Tensor) -> None:
        if not tensors:
            raise ValueError("TensorDataset(): expected at least one tensor")
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"TensorDataset(): argument {i} must be a Tensor, but got {type(t).__name__}")
            if t.ndim == 0:
                raise ValueError(f"TensorDataset(): argument {i} is a 0-d tensor; samples are taken along dim 0, "
                                 f"so every tensor needs at least one dimension")
        sizes = [t.shape[0] for t in tensors]
        if any(s != sizes[0] for s in sizes):
            raise ValueError(f"TensorDataset(): size mismatch between tensors: every tensor needs the same size "
                             f"in dim 0, but got sizes {sizes}")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset[T_co]):
    """The samples of `dataset` at `indices`, in that order: ``Subset(d, ix)[i] == d[ix[i]]``."""

    def __init__(self, dataset: Dataset[T_co], indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        try:
            inner = [self.indices[i] for i in idx] if isinstance(idx, list) else self.indices[idx]
        except IndexError:
            raise IndexError(f"Subset: index {idx} is out of range for a Subset of length {len(self.indices)}") from None
        return self.dataset[inner]

    def __getitems__(self, indices: list) -> list:
        getitems = getattr(self.dataset, "__getitems__", None)
        if callable(getitems):
            return getitems([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset[T_co]):
    """Map-style datasets one after another: indices ``0..len(a)-1`` are `a`'s, the next are `b`'s, ..."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("ConcatDataset(): datasets should not be an empty iterable")
        for i, d in enumerate(self.datasets):
            if isinstance(d, IterableDataset):
                raise TypeError(f"ConcatDataset(): dataset {i} ({type(d).__name__}) is an IterableDataset, which has "
                                f"no indices to concatenate; use ChainDataset (or `+`) for iterable datasets")
        self.cumulative_sizes = list(itertools.accumulate(len(d) for d in self.datasets))

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        i = operator.index(idx)
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"ConcatDataset index {i} is out of range for a dataset of length {n}")
        if i < 0:
            i += n
        which = bisect.bisect_right(self.cumulative_sizes, i)
        return self.datasets[which][i - (self.cumulative_sizes[which - 1] if which else 0)]


class ChainDataset(IterableDataset):
    """Iterable datasets one after another (lazily: each is iterated when the previous one ends)."""

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def _checked(self) -> Iterator[IterableDataset]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise TypeError(f"ChainDataset only supports IterableDataset, but got {type(d).__name__}")
            yield d

    def __iter__(self):
        for d in self._checked():
            yield from d

    def __len__(self) -> int:
        return sum(len(d) for d in self._checked())


def random_split(dataset: Dataset, lengths: Sequence[int | float],
                 generator: Generator | None = default_generator) -> list[Subset]:
    """Split `dataset` into non-overlapping random Subsets of the given lengths.

    `lengths` are sizes summing to ``len(dataset)``, or fractions summing to 1: each split then gets
    ``floor(len(dataset) * frac)`` samples and the remainder is handed out one at a time, round-robin
    from the first split (PyTorch's rule). The permutation comes from `generator` (ember's default one
    when None), so ``ember.manual_seed`` makes the split reproducible.
    """
    lengths = list(lengths)
    n = len(dataset)
    total = sum(lengths)
    if math.isclose(total, 1) and total <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if not 0 <= frac <= 1:
                raise ValueError(f"random_split(): fraction at index {i} is not between 0 and 1 (got {frac})")
            sizes.append(math.floor(n * frac))
        for i in range(n - sum(sizes)):
            sizes[i % len(sizes)] += 1
        for i, size in enumerate(sizes):
            if size == 0:
                warnings.warn(f"random_split(): length of split at index {i} is 0. This might result in an empty "
                              f"dataset.", stacklevel=2)
        lengths = sizes
        total = n
    if not all(isinstance(k, numbers.Integral) and not isinstance(k, bool) for k in lengths):
        raise ValueError(f"random_split(): lengths {lengths} are neither integers summing to the length of the "
                         f"dataset ({n}) nor fractions summing to 1")
    lengths = [int(k) for k in lengths]
    if any(k < 0 for k in lengths):
        raise ValueError(f"random_split(): lengths must be non-negative, but got {lengths}")
    if total != n:
        raise ValueError(f"random_split(): sum of input lengths ({total}) does not equal the length of the input "
                         f"dataset ({n})!")
    perm = (generator or default_generator).np.permutation(n).tolist()
    ends = itertools.accumulate(lengths)
    return [Subset(dataset, perm[end - length:end]) for end, length in zip(ends, lengths)]
