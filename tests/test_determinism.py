"""Determinism and concurrency guarantees.

- The same seed gives bitwise-identical weights after 1,000 training steps with shuffling, dropout
  and random augmentation in ``__getitem__`` (ember, Python and NumPy generators, an ember
  transform), whatever ``num_workers`` is (0, 1, 2); a different seed gives different weights.
- Batch t of an epoch is fetched with the generators seeded from ``base_seed + t`` in the main
  process and in every worker; the caller's generators do not advance while the main process fetches.
- Grad mode is per thread; two threads training two models at once give bitwise the results of
  training them one after the other.
"""
from __future__ import annotations

import random
import sys
import threading

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.utils.data as D
from ember.datasets import transforms

workers_need_fork = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                       reason="DataLoader worker tests use fork")

_rs = np.random.RandomState(0)
_X = _rs.standard_normal((200, 6)).astype(np.float32)
_Y = _rs.randint(0, 3, 200).astype(np.int64)


class Augmented(D.Dataset):
    """A map-style dataset whose every sample is randomly augmented, drawing from all three global
    generators a user might reach for: ember's (`ember.randn` and a transform), `random` and NumPy's."""

    flip = transforms.RandomHorizontalFlip(0.5)

    def __init__(self, x: np.ndarray = _X, y: np.ndarray = _Y) -> None:
        self.x, self.y = ember.tensor(x), ember.tensor(y)

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        x = self.x[i] + 0.1 * ember.randn(6)
        x = self.flip(x.view(1, 2, 3)).reshape(6)
        if random.random() < 0.3:
            x = x * 0.5
        x = x + ember.tensor(np.random.uniform(-0.05, 0.05, 6).astype(np.float32))
        return x, self.y[i]


def _model() -> nn.Module:
    # dropout draws from ember's generator in the main process: the loader must not shift that stream
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Dropout(0.2), nn.Linear(16, 3))


def _train(seed: int, num_workers: int, steps: int = 1000, persistent: bool = True) -> list[np.ndarray]:
    """Weights after `steps` SGD steps; the loader's epochs follow one another until then."""
    ember.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    model = _model()
    opt = ember.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    loader = D.DataLoader(Augmented(), batch_size=8, shuffle=True, num_workers=num_workers,
                          persistent_workers=persistent and num_workers > 0)
    step = 0
    while step < steps:
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            step += 1
            if step == steps:
                break
    if num_workers and persistent:
        loader._iterator._shutdown()  # stop the persistent workers now, not at garbage collection
    return [p.detach().numpy().copy() for p in model.parameters()]


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))


@pytest.fixture(scope="module")
def reference() -> list[np.ndarray]:
    return _train(0, num_workers=0)


def test_same_seed_same_weights_in_one_process(reference):
    assert _same(_train(0, num_workers=0), reference)


def test_different_seed_different_weights(reference):
    other = _train(1, num_workers=0)
    assert not _same(other, reference)
    assert all(np.isfinite(p).all() for p in other + reference)


@workers_need_fork
@pytest.mark.parametrize("num_workers", [1, 2])
def test_same_weights_whatever_num_workers(reference, num_workers):
    # 1,000 steps are 25 epochs of persistent workers: each epoch's base seed is drawn as without them
    assert _same(_train(0, num_workers=num_workers), reference)


@workers_need_fork
def test_fresh_workers_each_epoch_match_too(reference):
    short = _train(0, num_workers=0, steps=60)
    assert _same(_train(0, num_workers=2, steps=60, persistent=False), short)
    assert not _same(short, reference)


def _epoch(num_workers: int, **kw) -> list:
    ember.manual_seed(3)
    loader = D.DataLoader(Augmented(), num_workers=num_workers, **kw)
    return [[t.numpy().tobytes() for t in b] for b in loader]


@workers_need_fork
@pytest.mark.parametrize("kw", [dict(batch_size=16, shuffle=True),
                                dict(batch_size=None, sampler=range(0, 200, 9)),
                                dict(batch_size=5, drop_last=True, generator=ember.Generator().manual_seed(1))])
def test_batches_bitwise_identical_whatever_worker_loads_them(kw):
    def fresh() -> dict:  # a generator advances as it is used: each run gets a new one
        return dict(kw, generator=ember.Generator().manual_seed(1)) if "generator" in kw else kw

    one = _epoch(0, **fresh())
    assert _epoch(1, **fresh()) == one and _epoch(2, **fresh()) == one
    assert len(set(map(str, one))) == len(one)  # augmentation differs from batch to batch


def test_main_process_fetch_leaves_callers_generators_alone():
    ember.manual_seed(7)
    random.seed(7)
    np.random.seed(7)
    loader = D.DataLoader(Augmented(), batch_size=10, generator=ember.Generator().manual_seed(2))
    states = (ember.get_rng_state().tolist(), random.getstate(), np.random.get_state()[1].tolist())
    batches = list(loader)
    assert len(batches) == 20
    assert (ember.get_rng_state().tolist(), random.getstate(), np.random.get_state()[1].tolist()) == states
    assert ember.initial_seed() == 7


class Draws(D.Dataset):
    def __len__(self) -> int:
        return 5

    def __getitem__(self, i: int):
        info = D.get_worker_info()
        return {"e": ember.rand(1).item(), "py": random.random(), "seed": None if info is None else info.seed}


def _init_marks_worker(worker_id: int) -> None:
    # a worker_init_fn still runs (after the worker's seeding) and may configure its dataset copy
    D.get_worker_info().dataset.init_id = worker_id


@pytest.mark.parametrize("num_workers", [0, pytest.param(2, marks=workers_need_fork)])
def test_batch_t_is_fetched_with_base_seed_plus_t(num_workers):
    """The documented contract: base seed drawn from `generator`; batch t sees seed base + t."""
    base = int(ember.Generator().manual_seed(5).np.integers(0, 1 << 63))
    loader = D.DataLoader(Draws(), batch_size=None, num_workers=num_workers,
                          generator=ember.Generator().manual_seed(5),
                          worker_init_fn=_init_marks_worker if num_workers else None)
    out = list(loader)
    for t, s in enumerate(out):
        ember.manual_seed(base + t)
        random.seed(base + t)
        assert s["e"] == ember.rand(1).item() and s["py"] == random.random()
    if num_workers:  # worker i starts at batch i's seed: PyTorch's base_seed + worker_id
        assert [s["seed"] for s in out] == [base, base + 1, base, base + 1, base]


def test_transform_draws_follow_the_batch_seed():
    img = ember.arange(6.0).view(1, 2, 3)
    loader = D.DataLoader([img] * 64, batch_size=None, generator=ember.Generator().manual_seed(0),
                          collate_fn=transforms.RandomHorizontalFlip(0.5))
    flips = [bool((b != img).any()) for b in loader]
    again = [bool((b != img).any()) for b in D.DataLoader([img] * 64, batch_size=None,
                                                          generator=ember.Generator().manual_seed(0),
                                                          collate_fn=transforms.RandomHorizontalFlip(0.5))]
    assert flips == again and 10 < sum(flips) < 54  # random, yet reproducible


# ---------------------------------------------------------------------- concurrency

def test_grad_mode_is_per_thread():
    entered, checked = threading.Event(), threading.Event()
    seen = {}

    def other():
        x = ember.ones(2, requires_grad=True)
        with ember.no_grad():
            entered.set()
            checked.wait(10)
            seen["other_enabled"] = ember.is_grad_enabled()
            seen["other_records"] = (x * 2).requires_grad
        seen["other_after"] = ember.is_grad_enabled()

    t = threading.Thread(target=other)
    t.start()
    assert entered.wait(10)
    # the other thread is inside no_grad right now: this one is unaffected
    x = ember.ones(2, requires_grad=True)
    assert ember.is_grad_enabled() and (x * 2).grad_fn is not None
    checked.set()
    t.join(10)
    assert seen == {"other_enabled": False, "other_records": False, "other_after": True}

    # and the reverse: a thread started inside no_grad begins with grad on
    with ember.no_grad():
        t = threading.Thread(target=lambda: seen.update(fresh=ember.is_grad_enabled(),
                                                        fresh_records=(x * 2).requires_grad))
        t.start()
        t.join(10)
        assert not ember.is_grad_enabled()
    assert seen["fresh"] and seen["fresh_records"] and ember.is_grad_enabled()


def _fit(seed: int, steps: int, start: threading.Barrier | None = None) -> list[np.ndarray]:
    """Train a model with no draws from the global generators outside the loader: its data order
    comes from its own generator, its augmentation from the per-batch seeding."""
    g = ember.Generator().manual_seed(seed)
    rs = np.random.RandomState(seed)
    x, y = rs.standard_normal((64, 6)).astype(np.float32), rs.randint(0, 3, 64).astype(np.int64)
    model = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3))
    with ember.no_grad():
        for p in model.parameters():
            p.copy_(ember.tensor(rs.uniform(-0.3, 0.3, tuple(p.shape)).astype(np.float32)))
    opt = ember.optim.Adam(model.parameters(), lr=0.01)
    loader = D.DataLoader(Augmented(x, y), batch_size=8, shuffle=True, generator=g)
    if start is not None:
        start.wait(10)
    step = 0
    while step < steps:
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            step += 1
    return [p.detach().numpy().copy() for p in model.parameters()]


def test_two_threads_training_match_sequential_runs():
    steps = 160
    sequential = [_fit(1, steps), _fit(2, steps)]
    results: dict[int, list[np.ndarray]] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def run(seed: int) -> None:
        try:
            results[seed] = _fit(seed, steps, start)
        except BaseException as e:  # surfaced below: an exception in a thread would pass unseen
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: the two trainings really interleave
    try:
        threads = [threading.Thread(target=run, args=(s,)) for s in (1, 2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(old)
    assert not errors, errors
    assert _same(results[1], sequential[0]) and _same(results[2], sequential[1])
    assert not _same(sequential[0], sequential[1])
