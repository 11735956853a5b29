"""ember.utils.data.DistributedSampler: shards per rank, PyTorch's padding/drop_last rules, the
seed + epoch shuffle shared by all ranks, and its errors. Single process: num_replicas/rank given."""
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ember
import ember.distributed
from ember.utils.data import DataLoader, DistributedSampler, Sampler, TensorDataset
from helpers import need_torch


class Sized:
    """A dataset stand-in: the sampler needs only len()."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def shards(n: int, replicas: int, **kw) -> list[list[int]]:
    return [list(DistributedSampler(Sized(n), num_replicas=replicas, rank=r, **kw)) for r in range(replicas)]


def interleave(parts: list[list[int]]) -> list[int]:
    """The global index list the ranks took their strided slices of."""
    return [parts[r][i] for i in range(len(parts[0])) for r in range(len(parts))]


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 60), replicas=st.integers(1, 9), drop_last=st.booleans(), shuffle=st.booleans(),
       seed=st.integers(-5, 2**40), epoch=st.integers(0, 50))
def test_shards_are_disjoint_and_complete(n, replicas, drop_last, shuffle, seed, epoch):
    samplers = [DistributedSampler(Sized(n), num_replicas=replicas, rank=r, shuffle=shuffle, seed=seed,
                                   drop_last=drop_last) for r in range(replicas)]
    for s in samplers:
        s.set_epoch(epoch)
    parts = [list(s) for s in samplers]
    size = n // replicas if drop_last else -(-n // replicas)
    assert all(len(p) == len(s) == size for p, s in zip(parts, samplers))
    assert all(type(i) is int and 0 <= i < n for p in parts for i in p)
    flat = interleave(parts)
    counts = Counter(flat)
    if drop_last:
        # no repeats, and exactly the last n % replicas of the order are dropped
        assert max(counts.values(), default=1) == 1 and len(flat) == n - n % replicas
    else:
        # every index appears; the padding repeats the order from its start
        assert set(counts) == set(range(n))
        assert flat[n:] == [flat[i % n] for i in range(n, len(flat))] if n else flat == []
    if not shuffle:
        assert flat[:min(n, len(flat))] == list(range(min(n, len(flat))))


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 50), replicas=st.integers(1, 8), drop_last=st.booleans())
def test_matches_torch_unshuffled(n, replicas, drop_last):
    """Without shuffle the shards are PyTorch's, element for element (padding and drop_last included)."""
    tdata = need_torch("torch.utils.data")
    for r in range(replicas):
        t = tdata.DistributedSampler(Sized(n), num_replicas=replicas, rank=r, shuffle=False, drop_last=drop_last)
        e = DistributedSampler(Sized(n), num_replicas=replicas, rank=r, shuffle=False, drop_last=drop_last)
        assert (len(e), e.num_samples, e.total_size) == (len(t), t.num_samples, t.total_size)
        assert list(e) == list(t)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(1, 50), replicas=st.integers(1, 8), drop_last=st.booleans(), seed=st.integers(0, 1000))
def test_shuffled_padding_follows_torch(n, replicas, drop_last, seed):
    """Shuffled, the permutation differs from PyTorch's but where it pads, drops and which ranks get
    the repeats are the same: map PyTorch's order onto ember's and compare positions."""
    tdata = need_torch("torch.utils.data")
    tparts = [list(tdata.DistributedSampler(Sized(n), num_replicas=replicas, rank=r, seed=seed, drop_last=drop_last))
              for r in range(replicas)]
    eparts = shards(n, replicas, seed=seed, drop_last=drop_last)
    assert [len(p) for p in eparts] == [len(p) for p in tparts]
    # position of each index in each global order: a repeat at global position k refers back to
    # the same earlier position in both
    for flat in (interleave(tparts), interleave(eparts)):
        first = {}
        pattern = [first.setdefault(i, k) for k, i in enumerate(flat)]
        assert pattern == [k if k < n else k % n for k in range(len(flat))]


def test_shuffle_is_a_seeded_permutation():
    a = shards(100, 4, seed=3)
    assert a == shards(100, 4, seed=3)  # deterministic: every rank computes the same global order
    assert interleave(a) != list(range(100))
    assert sorted(interleave(a)) == list(range(100))
    assert interleave(shards(100, 4, seed=4)) != interleave(a)


def test_set_epoch_changes_order_and_all_ranks_agree():
    ds = Sized(97)
    samplers = [DistributedSampler(ds, num_replicas=3, rank=r, seed=11) for r in range(3)]
    orders = []
    for epoch in range(4):
        for s in samplers:
            s.set_epoch(epoch)
        parts = [list(s) for s in samplers]
        # each rank iterated its own sampler object; together they still form one permutation
        assert sorted(interleave(parts)[:97]) == list(range(97))
        assert parts == [list(s) for s in samplers]  # same epoch, same order again
        orders.append(interleave(parts))
    assert len({tuple(o) for o in orders}) == 4
    # seed + epoch is what counts (PyTorch's rule)
    s = DistributedSampler(ds, num_replicas=3, rank=1, seed=10)
    s.set_epoch(1)
    assert list(s) == list(DistributedSampler(ds, num_replicas=3, rank=1, seed=11))
    assert samplers[0].epoch == 3


def test_no_shuffle_ignores_epoch():
    s = DistributedSampler(Sized(10), num_replicas=3, rank=2, shuffle=False)
    before = list(s)
    s.set_epoch(5)
    assert list(s) == before == [2, 5, 8, 1]


def test_padding_and_drop_last_examples():
    # n=5, 3 replicas: order 0..4 padded with 0 -> ranks get [0,3], [1,4], [2,0]
    assert shards(5, 3, shuffle=False) == [[0, 3], [1, 4], [2, 0]]
    assert shards(5, 3, shuffle=False, drop_last=True) == [[0], [1], [2]]
    # more replicas than samples: the order repeats more than once
    assert shards(2, 5, shuffle=False) == [[0], [1], [0], [1], [0]]
    assert shards(2, 5, shuffle=False, drop_last=True) == [[]] * 5
    assert shards(0, 2) == [[], []]


def test_with_dataloader_and_is_a_sampler():
    ds = TensorDataset(ember.arange(10))
    s = DistributedSampler(ds, num_replicas=2, rank=1, shuffle=False)
    assert isinstance(s, Sampler)
    batches = [b[0].tolist() for b in DataLoader(ds, batch_size=2, sampler=s)]
    assert batches == [[1, 3], [5, 7], [9]]


def test_errors():
    with pytest.raises(ValueError, match=r"Invalid rank 2, rank should be in the interval \[0, 1\]"):
        DistributedSampler(Sized(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match=r"Invalid rank -1, rank should be in the interval \[0, 2\]"):
        DistributedSampler(Sized(4), num_replicas=3, rank=-1)
    with pytest.raises(ValueError, match="num_replicas should be a positive integer"):
        DistributedSampler(Sized(4), num_replicas=0, rank=0)


def test_defaults_need_a_process_group():
    dist = ember.distributed
    if dist.is_initialized():
        pytest.skip("a process group is already initialized in this process")
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedSampler(Sized(4))
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedSampler(Sized(4), num_replicas=2)
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        DistributedSampler(Sized(4), rank=0)
