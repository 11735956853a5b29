"""ember.utils.data in one process: datasets, random_split, samplers, collation and the DataLoader,
against PyTorch's behaviour where it is deterministic."""
from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest

import ember
import ember.utils.data as D
from helpers import requires_torch, torch

Point = collections.namedtuple("Point", "x y")


def _errors_alike(ember_call, torch_call, match: str):
    """Both calls raise the same exception type; ember's message matches `match`."""
    with pytest.raises(Exception) as t_err:
        torch_call()
    with pytest.raises(t_err.type, match=match):
        ember_call()


class Squares(D.Dataset):
    def __len__(self):
        return 7

    def __getitem__(self, i):
        if not 0 <= i < 7:
            raise IndexError(i)
        return i * i


class Stream(D.IterableDataset):
    def __init__(self, n: int, with_len: bool = True):
        self.n, self.with_len = n, with_len

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self):
        if not self.with_len:
            raise TypeError("Stream has no len()")
        return self.n


# ---------------------------------------------------------------------- datasets
def test_dataset_base_and_add():
    with pytest.raises(NotImplementedError, match="__getitem__"):
        D.Dataset()[0]
    cat = Squares() + Squares()
    assert isinstance(cat, D.ConcatDataset) and len(cat) == 14 and cat[8] == 1
    chain = Stream(2) + Stream(3)
    assert isinstance(chain, D.ChainDataset) and list(chain) == [0, 1, 0, 1, 2] and len(chain) == 5


def test_tensor_dataset():
    x, y = ember.arange(12.0).reshape(4, 3), ember.tensor([1, 0, 1, 1])
    ds = D.TensorDataset(x, y)
    assert len(ds) == 4
    xi, yi = ds[2]
    assert xi.tolist() == [6.0, 7.0, 8.0] and yi.item() == 1
    assert [t.tolist() for t in ds[1:3]] == [x[1:3].tolist(), [0, 1]]


def test_tensor_dataset_errors():
    with pytest.raises(ValueError, match=r"size mismatch.*\[4, 3\]"):
        D.TensorDataset(ember.zeros(4, 2), ember.zeros(3))
    with pytest.raises(TypeError, match="argument 1 must be a Tensor, but got ndarray"):
        D.TensorDataset(ember.zeros(4), np.zeros(4))
    with pytest.raises(ValueError, match="at least one tensor"):
        D.TensorDataset()
    with pytest.raises(ValueError, match="argument 0 is a 0-d tensor"):
        D.TensorDataset(ember.tensor(1.0))


def test_subset():
    s = D.Subset(Squares(), [6, 0, 3])
    assert len(s) == 3 and [s[i] for i in range(3)] == [36, 0, 9]
    assert s.__getitems__([2, 0]) == [9, 36]

    class Batched(Squares):
        calls = []

        def __getitems__(self, idx):
            self.calls.append(list(idx))
            return [self[i] for i in idx]

    inner = Batched()
    assert D.Subset(inner, [5, 1, 2]).__getitems__([0, 2]) == [25, 4] and inner.calls == [[5, 2]]


@requires_torch
def test_concat_dataset_matches_torch():
    parts = [[0, 1, 2], [], [3, 4], [5]]
    e, t = D.ConcatDataset(parts), torch.utils.data.ConcatDataset(parts)
    assert e.cumulative_sizes == t.cumulative_sizes and len(e) == len(t)
    assert [e[i] for i in range(-len(e), len(e))] == [t[i] for i in range(-len(t), len(t))]
    assert e[np.int64(4)] == 4


def test_concat_dataset_errors():
    cat = D.ConcatDataset([[1, 2], [3]])
    for bad in (3, -4, 100):
        with pytest.raises(IndexError, match=f"index {bad} is out of range for a dataset of length 3"):
            cat[bad]
    with pytest.raises(ValueError, match="empty iterable"):
        D.ConcatDataset([])
    with pytest.raises(TypeError, match=r"dataset 1 \(Stream\) is an IterableDataset.*ChainDataset"):
        D.ConcatDataset([[1], Stream(2)])
    with pytest.raises(TypeError, match="ChainDataset only supports IterableDataset, but got list"):
        list(D.ChainDataset([Stream(1), [1, 2]]))


@requires_torch
@pytest.mark.parametrize("n", [0, 1, 7, 10, 101])
@pytest.mark.parametrize("lengths", [[0.5, 0.5], [0.8, 0.2], [0.3, 0.3, 0.4], [0.1] * 10, [1.0], [0.25, 0.0, 0.75]])
def test_random_split_fraction_lengths_match_torch(n, lengths):
    data = list(range(n))
    with warnings.catch_warnings(record=True) as t_w:
        warnings.simplefilter("always")
        t_sizes = [len(s) for s in torch.utils.data.random_split(data, lengths)]
    with warnings.catch_warnings(record=True) as e_w:
        warnings.simplefilter("always")
        parts = D.random_split(data, lengths)
    assert [len(s) for s in parts] == t_sizes
    assert len(e_w) == len(t_w)  # one "length of split ... is 0" warning per empty split
    seen = [i for s in parts for i in s.indices]
    assert sorted(seen) == data  # a partition: every sample once
    assert all(isinstance(s, D.Subset) and s.dataset is data for s in parts)


def test_random_split_is_seeded():
    data = list(range(50))
    ember.manual_seed(5)
    a = [s.indices for s in D.random_split(data, [20, 30])]
    ember.manual_seed(5)
    b = [s.indices for s in D.random_split(data, [20, 30])]
    g1, g2 = ember.Generator().manual_seed(1), ember.Generator().manual_seed(1)
    c = [s.indices for s in D.random_split(data, [20, 30], generator=g1)]
    assert a == b and c == [s.indices for s in D.random_split(data, [20, 30], generator=g2)]
    assert a != [s.indices for s in D.random_split(data, [20, 30])]  # the default generator moved on
    assert sorted(a[0] + a[1]) == data and len(a[0]) == 20
    assert [len(s) for s in D.random_split(data, np.array([45, 5]))] == [45, 5]


@requires_torch
@pytest.mark.parametrize("lengths, match", [
    ([3, 3], r"sum of input lengths \(6\) does not equal the length of the input dataset \(10\)"),
    ([0.5, 0.4], r"lengths \[0.5, 0.4\] are neither integers summing to the length of the dataset \(10\) "
                 r"nor fractions summing to 1"),
    ([1.5, -0.5], "fraction at index 0 is not between 0 and 1"),
])
def test_random_split_errors_match_torch(lengths, match):
    _errors_alike(lambda: D.random_split(list(range(10)), lengths),
                  lambda: torch.utils.data.random_split(list(range(10)), lengths), match)


def test_random_split_rejects_negative_lengths():
    with pytest.raises(ValueError, match=r"lengths must be non-negative, but got \[12, -2\]"):
        D.random_split(list(range(10)), [12, -2])


# ---------------------------------------------------------------------- samplers
def test_sequential_and_base_sampler():
    assert list(D.SequentialSampler(range(5))) == [0, 1, 2, 3, 4] and len(D.SequentialSampler(range(5))) == 5
    with pytest.raises(NotImplementedError):
        iter(D.Sampler())
    with pytest.raises(TypeError):
        len(D.Sampler())


@pytest.mark.parametrize("n, num_samples", [(10, None), (10, 4), (10, 25), (1, 3)])
def test_random_sampler_without_replacement(n, num_samples):
    s = D.RandomSampler(range(n), num_samples=num_samples)
    out = list(s)
    total = num_samples or n
    assert len(out) == len(s) == total and all(type(i) is int for i in out)
    for start in range(0, total - total % n, n):  # every full block is a permutation
        assert sorted(out[start:start + n]) == list(range(n))
    assert len(set(out[total - total % n:])) == total % n  # the tail has no duplicates


def test_random_sampler_with_replacement():
    out = list(D.RandomSampler(range(3), replacement=True, num_samples=70000))
    assert len(out) == 70000 and set(out) == {0, 1, 2}
    assert np.allclose(np.bincount(out) / 70000, 1 / 3, atol=0.01)


def test_random_sampler_follows_ember_seed_and_rng_state():
    s = D.RandomSampler(range(20))
    ember.manual_seed(0)
    a = list(s)
    ember.manual_seed(0)
    assert list(s) == a
    state = ember.get_rng_state()
    b = list(s)
    ember.set_rng_state(state)
    assert list(s) == b and b != a
    ember.manual_seed(1)
    assert list(s) != a


def test_random_sampler_generator():
    s = D.RandomSampler(range(20), generator=ember.Generator().manual_seed(3))
    first, second = list(s), list(s)
    assert first != second  # the generator advances
    before = ember.get_rng_state()
    again = D.RandomSampler(range(20), generator=ember.Generator().manual_seed(3))
    assert list(again) == first
    assert ember.get_rng_state().tolist() == before.tolist()  # the default generator was not used


@requires_torch
@pytest.mark.parametrize("kwargs, exc_match", [
    (dict(data_source=range(3), replacement=1), "replacement should be a boolean value"),
    (dict(data_source=range(3), num_samples=0), "num_samples should be a positive integer value"),
    (dict(data_source=range(3), num_samples=2.5), "num_samples should be a positive integer value"),
    (dict(data_source=[]), "num_samples should be a positive integer value, but got num_samples=0"),
])
def test_random_sampler_errors_match_torch(kwargs, exc_match):
    _errors_alike(lambda: D.RandomSampler(**kwargs), lambda: torch.utils.data.RandomSampler(**kwargs), exc_match)


def test_random_sampler_empty_source_at_iteration():
    with pytest.raises(ValueError, match="cannot draw 3 samples from an empty data_source"):
        list(D.RandomSampler([], num_samples=3))


def test_subset_random_sampler():
    idx = [10, 20, 30, 40]
    s = D.SubsetRandomSampler(idx, generator=ember.Generator().manual_seed(0))
    out = list(s)
    assert sorted(out) == idx and len(s) == 4
    assert out == list(D.SubsetRandomSampler(idx, generator=ember.Generator().manual_seed(0)))
    ember.manual_seed(2)
    a = list(D.SubsetRandomSampler(idx))
    ember.manual_seed(2)
    assert list(D.SubsetRandomSampler(idx)) == a


def test_weighted_sampler_with_replacement_follows_weights():
    w = [0.0, 1.0, 3.0, 0.0, 6.0]
    out = list(D.WeightedRandomSampler(w, 50000, generator=ember.Generator().manual_seed(0)))
    assert len(out) == 50000 and all(type(i) is int for i in out)
    freq = np.bincount(out, minlength=5) / 50000
    assert freq[0] == freq[3] == 0  # zero weights are never drawn
    assert np.allclose(freq, np.array(w) / 10, atol=0.01)


def test_weighted_sampler_without_replacement():
    w = ember.tensor([5.0, 0.0, 1.0, 1.0, 0.5])
    for seed in range(30):
        out = list(D.WeightedRandomSampler(w, 4, replacement=False, generator=ember.Generator().manual_seed(seed)))
        assert len(set(out)) == 4 and 1 not in out
    # successive draws: the first index follows the weights, the second the remaining ones
    firsts = [list(D.WeightedRandomSampler([3.0, 1.0], 2, replacement=False,
                                           generator=ember.Generator().manual_seed(s))) for s in range(4000)]
    assert all(sorted(f) == [0, 1] for f in firsts)
    assert abs(np.mean([f[0] == 0 for f in firsts]) - 0.75) < 0.03


def test_weighted_sampler_is_seeded_by_ember():
    s = D.WeightedRandomSampler([1.0, 2.0, 3.0], 10)
    ember.manual_seed(4)
    a = list(s)
    ember.manual_seed(4)
    assert list(s) == a and isinstance(s.weights, ember.Tensor) and s.weights.dtype == ember.float64


@requires_torch
@pytest.mark.parametrize("weights, n, replacement, match", [
    ([-1.0, 1.0], 2, True, r"probability entry < 0, at index 0"),
    ([float("nan"), 1.0], 2, True, r"infinity or NaN, at index 0"),
    ([1.0, float("inf")], 2, True, r"infinity or NaN, at index 1"),
    ([0.0, 0.0], 2, True, r"sum of probabilities <= 0"),
    ([1.0, 2.0], 3, False, r"num_samples=3 distinct indices without replacement from 2 nonzero"),
    ([[1.0, 2.0]], 2, True, r"1d sequence but given weights have shape \(1, 2\)"),
    ([1.0, 2.0], 0, True, r"num_samples should be a positive integer value, but got num_samples=0"),
    ([1.0, 2.0], True, True, r"num_samples should be a positive integer value, but got num_samples=True"),
    ([1.0, 2.0], 2, 1, r"replacement should be a boolean value, but got replacement=1"),
])
def test_weighted_sampler_errors_match_torch(weights, n, replacement, match):
    _errors_alike(lambda: list(D.WeightedRandomSampler(weights, n, replacement)),
                  lambda: list(torch.utils.data.WeightedRandomSampler(weights, n, replacement)), match)


def test_weighted_sampler_rejects_zero_weights_it_would_need():
    # PyTorch would hand out a zero-weight index here; ember refuses
    with pytest.raises(RuntimeError, match="num_samples=3 distinct indices without replacement from 2 nonzero"):
        D.WeightedRandomSampler([0.0, 1.0, 2.0], 3, replacement=False)
    with pytest.raises(TypeError, match="1d sequence of numbers, but got list"):
        D.WeightedRandomSampler(["a", "b"], 2)


@requires_torch
@pytest.mark.parametrize("n", [0, 1, 9, 10, 11])
@pytest.mark.parametrize("batch_size", [1, 3, 10])
@pytest.mark.parametrize("drop_last", [False, True])
def test_batch_sampler_matches_torch(n, batch_size, drop_last):
    e = D.BatchSampler(D.SequentialSampler(range(n)), batch_size, drop_last)
    t = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(range(n)), batch_size, drop_last)
    assert list(e) == list(t) and len(e) == len(t)


@requires_torch
@pytest.mark.parametrize("batch_size, drop_last, match", [
    (0, False, "batch_size should be a positive integer value, but got batch_size=0"),
    (2.0, False, "batch_size should be a positive integer value, but got batch_size=2.0"),
    (True, False, "batch_size should be a positive integer value, but got batch_size=True"),
    (2, 1, "drop_last should be a boolean value, but got drop_last=1"),
])
def test_batch_sampler_errors_match_torch(batch_size, drop_last, match):
    _errors_alike(lambda: D.BatchSampler(range(4), batch_size, drop_last),
                  lambda: torch.utils.data.BatchSampler(range(4), batch_size, drop_last), match)


# ---------------------------------------------------------------------- collation
def _plain(x):
    """A library-neutral picture of a collated batch: containers by type name, tensors as
    (dtype name, nested lists)."""
    if isinstance(x, ember.Tensor) or (torch is not None and isinstance(x, torch.Tensor)):
        return ("tensor", str(x.dtype).split(".")[-1], x.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, {k: _plain(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v) for v in x])
    if isinstance(x, np.ndarray):
        return ("ndarray", x.tolist())
    return x


def _collate_cases(tensor):
    """Batches over every input kind default_collate knows; `tensor` is ember.tensor or torch.tensor."""
    return [
        [tensor([1.0, 2.0]), tensor([3.0, 4.0])],
        [tensor([[1, 2]]), tensor([[3, 4]])],
        [np.zeros((2, 2), np.float32), np.ones((2, 2), np.float32)],
        [np.arange(3, dtype=np.uint8), np.arange(3, dtype=np.uint8)],
        [np.array(1.5), np.array(2.5)],
        [np.float32(1.5), np.float32(2.0)],
        [np.int64(3), np.int64(4)],
        [np.bool_(True), np.bool_(False)],
        [1.5, 2.0],
        [1, 2],
        [True, False],
        ["a", "b"],
        [b"a", b"b"],
        [np.str_("a"), np.str_("b")],
        [(1, 2.0, "x"), (3, 4.0, "y")],
        [[1, 2.0], [3, 4.0]],
        [{"a": 1, "b": [1.0, 2]}, {"a": 2, "b": [3.0, 4]}],
        [collections.OrderedDict(z=1, a=2.5), collections.OrderedDict(z=3, a=4.5)],
        [Point(1, np.float32(2)), Point(3, np.float32(4))],
        [range(2), range(2)],
        [(tensor([1.0]), {"k": (1, 2)}), (tensor([2.0]), {"k": (3, 4)})],
    ]


@requires_torch
def test_default_collate_matches_torch():
    from torch.utils.data import default_collate as t_collate
    for e_batch, t_batch in zip(_collate_cases(ember.tensor), _collate_cases(torch.tensor)):
        assert _plain(D.default_collate(e_batch)) == _plain(t_collate(t_batch)), e_batch


def test_default_collate_keeps_mapping_and_namedtuple_types():
    out = D.default_collate([collections.OrderedDict(a=1), collections.OrderedDict(a=2)])
    assert type(out) is collections.OrderedDict
    p = D.default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert type(p) is Point and p.x.dtype == ember.int64 and p.y.dtype == ember.float64
    assert D.default_collate([[1, 2], [3, 4]])[0].tolist() == [1, 3]


@requires_torch
def test_default_convert_matches_torch():
    from torch.utils.data import default_convert as t_convert
    cases = [np.zeros(2), np.float64(1.0), np.int32(3), (np.zeros(1), 1), [np.ones(2, np.float32), "s"],
             {"a": np.zeros(1)}, Point(np.zeros(1), 2), "s", 3, 2.5, np.array(["a"]), [1, (2, 3)]]
    for c in cases:
        assert _plain(D.default_convert(c)) == _plain(t_convert(c)), c
    t = ember.ones(2)
    assert D.default_convert(t) is t


def test_default_collate_errors():
    with pytest.raises(RuntimeError, match=r"\[3\] at entry 0 and \[4\] at entry 1"):
        D.default_collate([ember.zeros(3), ember.zeros(4)])
    with pytest.raises(RuntimeError, match=r"\[2, 2\] at entry 0 and \[3\] at entry 2"):
        D.default_collate([np.zeros((2, 2)), np.zeros((2, 2)), np.zeros(3)])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size.*element 1 has "
                                           "length 1"):
        D.default_collate([(1, 2), (3,)])
    with pytest.raises(TypeError, match="found object"):
        D.default_collate([np.array([1, "a"], dtype=object)] * 2)
    with pytest.raises(TypeError, match="found <U1"):
        D.default_collate([np.array(["a"])] * 2)
    with pytest.raises(TypeError, match="found <class 'NoneType'>"):
        D.default_collate([None, None])
    with pytest.raises(TypeError, match="found <class 'set'>"):
        D.default_collate([{1}, {2}])
    with pytest.raises(IndexError, match="empty batch"):
        D.default_collate([])


# ---------------------------------------------------------------------- DataLoader (one process)
def _tensor_ds(n: int = 10):
    return D.TensorDataset(ember.arange(n * 2.0).reshape(n, 2), ember.arange(n))


@requires_torch
@pytest.mark.parametrize("kwargs, match", [
    (dict(num_workers=-1), "num_workers option should be non-negative"),
    (dict(timeout=-1), "timeout option should be non-negative"),
    (dict(prefetch_factor=2), "prefetch_factor option could only be specified in multiprocessing"),
    (dict(num_workers=2, prefetch_factor=-1), "prefetch_factor option should be a positive integer"),
    (dict(persistent_workers=True), "persistent_workers option needs num_workers > 0"),
    (dict(shuffle=True, sampler=[0, 1]), "sampler option is mutually exclusive with shuffle"),
    (dict(batch_sampler=[[0]], batch_size=2), "batch_sampler option is mutually exclusive with batch_size"),
    (dict(batch_sampler=[[0]], shuffle=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], sampler=[0]), "batch_sampler option is mutually exclusive"),
    (dict(batch_sampler=[[0]], drop_last=True), "batch_sampler option is mutually exclusive"),
    (dict(batch_size=None, drop_last=True), "batch_size=None option disables auto-batching"),
    (dict(batch_size=0), "batch_size should be a positive integer value, but got batch_size=0"),
    (dict(multiprocessing_context="fork"), "multiprocessing_context can only be used with multi-process"),
    (dict(num_workers=1, multiprocessing_context="nope"), "should specify a valid start method"),
])
def test_dataloader_option_errors_match_torch(kwargs, match):
    _errors_alike(lambda: D.DataLoader(_tensor_ds(), **kwargs),
                  lambda: torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(10)), **kwargs),
                  match)


@requires_torch
@pytest.mark.parametrize("kwargs, name", [(dict(shuffle=True), "shuffle"), (dict(sampler=[0]), "sampler"),
                                          (dict(batch_sampler=[[0]]), "batch_sampler")])
def test_dataloader_iterable_dataset_option_errors_match_torch(kwargs, name):
    class TStream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(3))

    _errors_alike(lambda: D.DataLoader(Stream(3), **kwargs), lambda: torch.utils.data.DataLoader(TStream(), **kwargs),
                  f"IterableDataset: expected unspecified {name} option")


def test_dataloader_option_errors_beyond_torch():
    with pytest.raises(ValueError, match="timeout=1 needs num_workers > 0"):
        D.DataLoader(_tensor_ds(), timeout=1)
    with pytest.raises(TypeError, match="num_workers should be an int, but got float"):
        D.DataLoader(_tensor_ds(), num_workers=1.5)
    with pytest.raises(TypeError, match="collate_fn should be callable, but got int"):
        D.DataLoader(_tensor_ds(), collate_fn=3)
    with pytest.raises(TypeError, match="worker_init_fn should be callable, but got str"):
        D.DataLoader(_tensor_ds(), worker_init_fn="f")
    with pytest.raises(ValueError, match="prefetch_factor option should be a positive integer, but got "
                                         "prefetch_factor=0"):
        D.DataLoader(_tensor_ds(), num_workers=1, prefetch_factor=0)
    loader = D.DataLoader(_tensor_ds())
    with pytest.raises(ValueError, match="batch_size attribute should not be set after DataLoader is initialized"):
        loader.batch_size = 3
    loader.num_workers = 0  # not frozen, as in PyTorch


def test_dataloader_prefetch_factor_default():
    assert D.DataLoader(_tensor_ds()).prefetch_factor is None
    assert D.DataLoader(_tensor_ds(), num_workers=2).prefetch_factor == 2
    assert D.DataLoader(_tensor_ds(), num_workers=2, prefetch_factor=4).prefetch_factor == 4


@requires_torch
@pytest.mark.parametrize("n", [0, 1, 9, 10, 11, 64])
@pytest.mark.parametrize("batch_size", [None, 1, 3, 10])
@pytest.mark.parametrize("drop_last", [False, True])
def test_len_matches_torch(n, batch_size, drop_last):
    if batch_size is None and drop_last:
        return  # rejected (tested above)

    class TStream(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(n))

        def __len__(self):
            return n

    kw = dict(batch_size=batch_size, drop_last=drop_last)
    assert len(D.DataLoader(list(range(n)), **kw)) == len(torch.utils.data.DataLoader(list(range(n)), **kw))
    assert len(D.DataLoader(Stream(n), **kw)) == len(torch.utils.data.DataLoader(TStream(), **kw))
    if n:
        e = D.DataLoader(list(range(n)), shuffle=True, **kw)
        assert len(e) == len(torch.utils.data.DataLoader(list(range(n)), shuffle=True, **kw)) == len(list(e))


def test_len_needs_sized_sampler_or_dataset():
    with pytest.raises(TypeError, match="Stream has no len"):
        len(D.DataLoader(Stream(4, with_len=False)))
    with pytest.raises(TypeError, match="has no len"):
        len(D.DataLoader(list(range(4)), sampler=iter([0, 1])))
    assert len(D.DataLoader(list(range(10)), batch_sampler=[[0, 1], [2]])) == 2


@requires_torch
def test_batches_match_torch():
    samples = [{"x": np.full(3, i, np.float32), "y": i, "name": f"s{i}", "t": (i, float(i))} for i in range(7)]
    for kw in (dict(batch_size=3), dict(batch_size=3, drop_last=True), dict(batch_size=None),
               dict(batch_sampler=[[6, 0], [2, 3, 4]]), dict(sampler=[5, 1, 1], batch_size=2)):
        e = [_plain(b) for b in D.DataLoader(samples, **kw)]
        t = [_plain(b) for b in torch.utils.data.DataLoader(samples, **kw)]
        assert e == t, kw


def test_tensor_dataset_fast_path_equals_per_sample_collation():
    x = ember.from_numpy(np.random.default_rng(0).random((23, 2, 3), dtype=np.float32))
    y = ember.arange(23)
    ds = D.TensorDataset(x, y)

    class PerSample(D.Dataset):
        def __len__(self):
            return 23

        def __getitem__(self, i):
            return ds[i]

    sub = D.Subset(D.Subset(ds, list(range(22, -1, -1))), [0, 5, 3, 7, 2, 11, 13, 21, 20, 1])
    sub_slow = D.Subset(D.Subset(PerSample(), list(range(22, -1, -1))), sub.indices)
    for fast, slow in ((ds, PerSample()), (sub, sub_slow)):
        for kw in (dict(batch_size=4), dict(batch_size=4, shuffle=True, drop_last=True)):
            ember.manual_seed(1)
            a = list(D.DataLoader(fast, **kw))
            ember.manual_seed(1)
            b = list(D.DataLoader(slow, **kw))
            assert len(a) == len(b)
            for (ax, ay), (bx, by) in zip(a, b):
                assert ax.dtype == bx.dtype and ax.shape == bx.shape and ax.tolist() == bx.tolist()
                assert ay.dtype == by.dtype and ay.tolist() == by.tolist()


def test_tensor_dataset_fast_path_keeps_autograd():
    w = ember.arange(6.0).reshape(3, 2).requires_grad_()
    (xb,) = next(iter(D.DataLoader(D.TensorDataset(w), batch_size=2, sampler=[2, 0])))
    assert xb.requires_grad and xb.tolist() == [[4.0, 5.0], [0.0, 1.0]]
    (xb * ember.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    assert w.grad.tolist() == [[3.0, 4.0], [0.0, 0.0], [1.0, 2.0]]


def test_getitems_is_used_once_per_batch():
    class Batched(Squares):
        def __init__(self):
            self.calls = []

        def __getitems__(self, idx):
            self.calls.append(list(idx))
            return [self[i] for i in idx]

    ds = Batched()
    out = [b.tolist() for b in D.DataLoader(ds, batch_size=3)]
    assert out == [[0, 1, 4], [9, 16, 25], [36]] and ds.calls == [[0, 1, 2], [3, 4, 5], [6]]


def test_batch_size_none_and_custom_collate():
    out = list(D.DataLoader([np.float32(1.5), np.arange(2)], batch_size=None))
    assert out[0].dtype == ember.float32 and out[0].item() == 1.5 and out[1].tolist() == [0, 1]
    seen = []
    loader = D.DataLoader(Squares(), batch_size=4, collate_fn=lambda b: seen.append(b) or len(b))
    assert list(loader) == [4, 3] and seen == [[0, 1, 4, 9], [16, 25, 36]]


def test_shuffle_is_seeded_and_generator_independent():
    ds = list(range(40))
    ember.manual_seed(0)
    a = [b.tolist() for b in D.DataLoader(ds, batch_size=8, shuffle=True)]
    ember.manual_seed(0)
    b = [b.tolist() for b in D.DataLoader(ds, batch_size=8, shuffle=True)]
    ember.manual_seed(1)
    c = [b.tolist() for b in D.DataLoader(ds, batch_size=8, shuffle=True)]
    assert a == b and a != c and sorted(sum(a, [])) == ds
    g = ember.Generator().manual_seed(7)
    state = ember.get_rng_state()
    d = [b.tolist() for b in D.DataLoader(ds, batch_size=8, shuffle=True, generator=g)]
    assert ember.get_rng_state().tolist() == state.tolist()
    assert d == [b.tolist() for b in D.DataLoader(ds, batch_size=8, shuffle=True,
                                                   generator=ember.Generator().manual_seed(7))]


def test_epochs_differ_and_restored_state_replays():
    loader = D.DataLoader(list(range(30)), batch_size=30, shuffle=True)
    ember.manual_seed(3)
    e1 = next(iter(loader)).tolist()
    state = ember.get_rng_state()
    e2 = next(iter(loader)).tolist()
    ember.set_rng_state(state)
    assert next(iter(loader)).tolist() == e2 != e1


def test_iterable_dataset_single_process():
    assert [b.tolist() for b in D.DataLoader(Stream(7), batch_size=3)] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b.tolist() for b in D.DataLoader(Stream(7), batch_size=3, drop_last=True)] == [[0, 1, 2], [3, 4, 5]]
    assert list(D.DataLoader(Stream(3), batch_size=None)) == [0, 1, 2]


def test_pin_memory_is_accepted_on_cpu():
    loader = D.DataLoader(_tensor_ds(3), batch_size=3, pin_memory=True, pin_memory_device="cuda")
    if ember.cuda.is_available():
        (x, y), = list(loader)
        assert x.is_pinned() and y.is_pinned()
    else:  # PyTorch's warning, once per loader, and ordinary batches
        with pytest.warns(UserWarning, match="'pin_memory' argument is set as true but no accelerator is found"):
            (x, y), = list(loader)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            list(loader)
        assert not x.is_pinned()
    assert x.shape == (3, 2) and y.tolist() == [0, 1, 2]


def test_worker_info_is_none_in_main_process():
    assert D.get_worker_info() is None


def test_exports():
    assert set(D.__all__) <= set(dir(D)) and len(D.__all__) == len(set(D.__all__))
