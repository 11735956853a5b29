"""Samplers as `torch.utils.data`: iterables of dataset indices (or of index batches) that a
DataLoader walks. Random ones draw from ember's generators with NumPy, whole permutations or
blocks of draws at a time, and yield Python ints."""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized
from typing import Generic, TypeVar

import numpy as np

from ..._creation import Generator, default_generator
from ..._tensor import Tensor, make

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler", "DistributedSampler"]

T_co = TypeVar("T_co", covariant=True)

_BLOCK = 1 << 16  # draws per NumPy call when sampling with replacement: vectorised, yet bounded memory


def _positive_int(value, name: str, cls: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{cls}: {name} should be a positive integer value, but got {name}={value!r}")


class Sampler(Generic[T_co]):
    """Base class: subclasses implement ``__iter__`` (indices, or lists of indices for a batch sampler)
    and may implement ``__len__``, which ``len(DataLoader)`` needs."""

    def __iter__(self) -> Iterator[T_co]:
        raise NotImplementedError(f"{type(self).__name__}: subclasses of Sampler should implement __iter__.")


class SequentialSampler(Sampler[int]):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler[int]):
    """Random indices into `data_source`: a fresh permutation (several, concatenated, when
    ``num_samples > len(data_source)``) or, with `replacement`, independent uniform draws.

    Without a `generator`, each ``iter()`` seeds a private generator from ember's default one, as
    PyTorch does: ``ember.manual_seed`` (or a restored ``ember.get_rng_state()``) fixes the order.
    """

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator: Generator | None = None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement should be a boolean value, but got "
                            f"replacement={replacement!r}")
        _positive_int(self.num_samples, "num_samples", "RandomSampler")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        if self.generator is None:
            rng = np.random.Generator(np.random.PCG64(int(default_generator.np.integers(0, 1 << 63))))
        else:
            rng = self.generator.np
        total = self.num_samples
        if n == 0:
            raise ValueError(f"RandomSampler: cannot draw {total} samples from an empty data_source")
        if self.replacement:
            for start in range(0, total, _BLOCK):
                yield from rng.integers(0, n, min(_BLOCK, total - start)).tolist()
        else:
            for _ in range(total // n):
                yield from rng.permutation(n).tolist()
            if total % n:
                yield from rng.permutation(n)[:total % n].tolist()

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler[int]):
    """The elements of `indices` in a random order (without replacement), drawn from `generator`
    (ember's default generator when None)."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        indices = self.indices
        for i in (self.generator or default_generator).np.permutation(len(indices)).tolist():
            yield indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler[int]):
    """`num_samples` indices into `weights`, index i drawn with probability proportional to weights[i].

    Without `replacement` an index appears at most once (successive draws from the remaining
    weights), so `num_samples` may not exceed the number of nonzero weights.
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:
        _positive_int(num_samples, "num_samples", "WeightedRandomSampler")
        if not isinstance(replacement, bool):
            raise ValueError(f"WeightedRandomSampler: replacement should be a boolean value, but got "
                             f"replacement={replacement!r}")
        try:
            w = np.asarray(weights.numpy(force=True) if isinstance(weights, Tensor) else weights, np.float64)
        except (TypeError, ValueError):
            raise TypeError(f"WeightedRandomSampler: weights should be a 1d sequence of numbers, but got "
                            f"{type(weights).__name__}") from None
        if w.ndim != 1:
            raise ValueError(f"WeightedRandomSampler: weights should be a 1d sequence but given weights have shape "
                             f"{w.shape}")
        if np.isnan(w).any() or np.isinf(w).any():
            raise RuntimeError(f"WeightedRandomSampler: invalid multinomial distribution (encountering probability "
                               f"entry = infinity or NaN, at index {int(np.flatnonzero(~np.isfinite(w))[0])})")
        if (w < 0).any():
            raise RuntimeError(f"WeightedRandomSampler: invalid multinomial distribution (encountering probability "
                               f"entry < 0, at index {int(np.flatnonzero(w < 0)[0])})")
        if not w.sum() > 0:
            raise RuntimeError("WeightedRandomSampler: invalid multinomial distribution (sum of probabilities <= 0)")
        nonzero = int(np.count_nonzero(w))
        if not replacement and num_samples > nonzero:
            raise RuntimeError(f"WeightedRandomSampler: cannot draw num_samples={num_samples} distinct indices "
                               f"without replacement from {nonzero} nonzero weights")
        self.weights = make(w)  # a float64 Tensor, as PyTorch keeps it
        self._last_nonzero = int(np.flatnonzero(w)[-1])
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        rng = (self.generator or default_generator).np
        w = self.weights._data
        if self.replacement:
            cdf = np.cumsum(w)
            # inverse-CDF draws: `side="right"` never lands on a zero weight, and the clamp covers a
            # draw rounded up to the total
            idx = np.searchsorted(cdf, rng.random(self.num_samples) * cdf[-1], side="right")
            return iter(np.minimum(idx, self._last_nonzero).tolist())
        # Without replacement: the top `num_samples` keys log(w) + Gumbel noise, in decreasing order,
        # are distributed exactly as successive draws from the remaining weights (Gumbel-top-k).
        with np.errstate(divide="ignore"):
            keys = np.log(w) + rng.gumbel(size=len(w))
        top = np.argpartition(-keys, self.num_samples - 1)[:self.num_samples]
        return iter(top[np.argsort(-keys[top], kind="stable")].tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler[list]):
    """Lists of `batch_size` consecutive indices from `sampler`; the last, shorter one is dropped
    when `drop_last`."""

    def __init__(self, sampler: Sampler[int] | Iterable[int], batch_size: int, drop_last: bool) -> None:
        _positive_int(batch_size, "batch_size", "BatchSampler")
        if not isinstance(drop_last, bool):
            raise ValueError(f"BatchSampler: drop_last should be a boolean value, but got drop_last={drop_last!r}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list]:
        it = iter(self.sampler)
        if self.drop_last:
            # zip over `batch_size` references to one iterator: full batches only
            for batch in zip(*[it] * self.batch_size):
                yield list(batch)
        else:
            while batch := list(itertools.islice(it, self.batch_size)):
                yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class DistributedSampler(Sampler[int]):
    """This rank's share of `dataset`'s indices for data-parallel training, as
    `torch.utils.data.DistributedSampler`.

    The index list (a permutation seeded by ``seed + epoch`` when `shuffle`, else ``0..n-1``) is
    made a multiple of `num_replicas` long, by repeating it from its start (default) or, with
    `drop_last`, by dropping its tail; rank r takes every `num_replicas`-th index from position r.
    So every rank yields ``len(self)`` indices, the shards are disjoint up to the padding, and
    together they cover the dataset (less the dropped tail). The permutation depends only on
    ``seed + epoch``, so all ranks agree on it: give every rank the same `seed` and call
    ``set_epoch(epoch)`` before each epoch's iteration for a fresh order.

    `num_replicas` and `rank` default to ``ember.distributed``'s world size and rank: without both,
    and before ``init_process_group()``, it raises ``ember.distributed.ProcessGroupStateError`` (a
    ValueError, as in PyTorch, and a RuntimeError).
    """

    def __init__(self, dataset: Sized, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            # imported here: ember.distributed needs mpi4py only once a process group is used
            from ... import distributed as dist
            if not dist.is_initialized():
                raise dist.ProcessGroupStateError(
                    f"DistributedSampler: Default process group has not been initialized, please make sure to call "
                    f"init_process_group() first, or pass both num_replicas and rank (got num_replicas={num_replicas!r}, "
                    f"rank={rank!r})")
            if num_replicas is None:
                num_replicas = dist.get_world_size()
            if rank is None:
                rank = dist.get_rank()
        if num_replicas <= 0:  # PyTorch fails later with ZeroDivisionError; say what is wrong instead
            raise ValueError(f"DistributedSampler: num_replicas should be a positive integer, but got "
                             f"num_replicas={num_replicas!r}")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = int(num_replicas)
        self.rank = int(rank)
        self.epoch = 0
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.seed = seed
        n = len(dataset)
        # drop_last keeps the largest multiple of num_replicas that fits; otherwise round up (pad)
        self.num_samples = n // self.num_replicas if drop_last else -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = Generator().manual_seed(self.seed + self.epoch).permutation(n)
        else:
            indices = np.arange(n)
        # np.resize repeats the array from its start to fill total_size (PyTorch's padding), or
        # truncates it to total_size (PyTorch's drop_last)
        indices = np.resize(indices, self.total_size) if n else indices[:0]
        return iter(indices[self.rank::self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """Use ``seed + epoch`` for the next iterations' shuffle (call it on every rank, each epoch)."""
        self.epoch = epoch
