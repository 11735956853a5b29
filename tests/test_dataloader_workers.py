"""DataLoader with worker processes: order, seeding, errors carried back, dead and slow workers,
shutdown without leftover processes, iterable datasets, persistent workers."""
from __future__ import annotations

import gc
import os
import pickle
import random
import re
import signal
import sys
import time
import warnings

import numpy as np
import pytest

import ember
import ember.utils.data as D

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="worker tests use fork and read child processes from /proc")


def _children() -> list[tuple[int, str]]:
    """(pid, state) of this process's children, zombies included (state 'Z')."""
    me, out = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
            except OSError:
                continue
            if int(ppid) == me:
                out.append((int(entry), state))
    return out


@pytest.fixture(autouse=True)
def no_leftover_workers():
    """Every test must leave no worker process behind, running or zombie."""
    yield
    gc.collect()
    assert _children() == []


class Delayed(D.Dataset):
    """Items of even pairs are slow: worker 0's batches finish after worker 1's later ones."""

    def __len__(self):
        return 12

    def __getitem__(self, i):
        if (i // 2) % 2 == 0:
            time.sleep(0.02)
        return i


class Seeds(D.Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, i):
        info = D.get_worker_info()
        return {"i": i, "id": info.id, "num_workers": info.num_workers, "seed": info.seed,
                "same_dataset": info.dataset is self, "ember": ember.rand(1).item(), "py": random.random(),
                "init": INIT_CALLS[:], "pid": os.getpid()}


INIT_CALLS: list[int] = []


def _record_init(worker_id: int) -> None:
    INIT_CALLS.append(worker_id)


class BadSample(Exception):
    """A custom exception type: rebuilt in the main process from its message."""


class TwoArgError(Exception):
    def __init__(self, a, b):
        super().__init__(a, b)


class Failing(D.Dataset):
    def __init__(self, exc):
        self.exc = exc

    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 5:
            raise self.exc
        return i


class Dies(D.Dataset):
    def __init__(self, how: str):
        self.how = how

    def __len__(self):
        return 10

    def __getitem__(self, i):
        if i == 3:
            if self.how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            os._exit(3)
        return i


class Slow(D.Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        time.sleep(5 if i == 1 else 0)
        return i


class Sharded(D.IterableDataset):
    def __init__(self, n: int, shard: bool = True):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = D.get_worker_info()
        if info is None or not self.shard:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))


class Pids(D.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        return os.getpid()


def test_batches_arrive_in_sampler_order_despite_uneven_delays():
    out = [b.tolist() for b in D.DataLoader(Delayed(), batch_size=2, num_workers=2)]
    assert out == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9], [10, 11]]
    out = [b.tolist() for b in D.DataLoader(Delayed(), batch_size=2, num_workers=2, sampler=range(11, -1, -1))]
    assert out == [[11, 10], [9, 8], [7, 6], [5, 4], [3, 2], [1, 0]]


def test_work_is_shared_round_robin():
    pids = [b.tolist() for b in D.DataLoader(Pids(), batch_size=1, num_workers=2)]
    assert len(set(sum(pids, []))) == 2 and pids[0] != pids[1] and pids[0] == pids[2]


def test_shuffled_batches_are_those_of_one_process_and_follow_the_seed():
    ds = D.TensorDataset(ember.arange(40.0), ember.arange(40))

    def epoch(seed, workers):
        ember.manual_seed(seed)
        return [y.tolist() for _, y in D.DataLoader(ds, batch_size=6, shuffle=True, num_workers=workers)]

    a = epoch(0, 2)
    assert a == epoch(0, 2) == epoch(0, 0)
    assert a != epoch(1, 2) and sorted(sum(a, [])) == list(range(40))


def test_worker_seeds_info_and_init_fn():
    def run(seed):
        ember.manual_seed(seed)
        loader = D.DataLoader(Seeds(), batch_size=None, num_workers=2, worker_init_fn=_record_init)
        return {s["i"]: s for s in loader}

    first = run(10)
    by_worker = {s["id"]: s for s in first.values()}
    assert sorted(by_worker) == [0, 1] and by_worker[1]["seed"] == by_worker[0]["seed"] + 1
    for wid, s in by_worker.items():
        assert s["num_workers"] == 2 and s["same_dataset"] and s["init"] == [wid]
    for s in (first[0], first[1]):  # each worker's first sample: its generators freshly seeded
        ember.manual_seed(s["seed"])
        random.seed(s["seed"])
        assert s["ember"] == ember.rand(1).item() and s["py"] == random.random()
    again, other = run(10), run(11)
    assert [s["seed"] for s in again.values()] == [s["seed"] for s in first.values()]
    assert [s["ember"] for s in again.values()] == [s["ember"] for s in first.values()]
    assert by_worker[0]["seed"] != {s["id"]: s for s in other.values()}[0]["seed"]
    assert D.get_worker_info() is None and INIT_CALLS == []


def test_generator_argument_fixes_worker_seeds():
    def seeds():
        loader = D.DataLoader(Seeds(), batch_size=None, num_workers=2, generator=ember.Generator().manual_seed(4))
        return sorted({s["seed"] for s in loader})

    assert seeds() == seeds()


def test_worker_info_is_read_only():
    info = D.WorkerInfo(0, 2, 5, None)
    with pytest.raises(RuntimeError, match="Cannot assign attributes to WorkerInfo"):
        info.id = 1


@pytest.mark.parametrize("exc, expected", [(KeyError("no such key"), KeyError), (BadSample("bad!"), BadSample),
                                           (TwoArgError(1, 2), RuntimeError), (StopIteration(), StopIteration)])
def test_worker_exception_is_reraised_with_worker_and_indices(exc, expected):
    it = iter(D.DataLoader(Failing(exc), batch_size=2, num_workers=2))
    assert next(it).tolist() == [0, 1] and next(it).tolist() == [2, 3]
    with pytest.raises(expected) as err:
        next(it)
    msg = str(err.value)
    assert f"Caught {type(exc).__name__} in DataLoader worker process 0 while fetching the batch of sample " \
           f"indices [4, 5]" in msg
    assert "Traceback (most recent call last)" in msg and "raise self.exc" in msg
    assert next(it).tolist() == [6, 7] and next(it).tolist() == [8, 9]  # the iterator goes on, as PyTorch's
    with pytest.raises(StopIteration):
        next(it)


def test_worker_exception_without_batching_names_the_index():
    with pytest.raises(BadSample, match="worker process 1 while fetching sample index 5"):
        list(D.DataLoader(Failing(BadSample("x")), batch_size=None, num_workers=2))


def test_worker_init_fn_error_is_reported():
    def bad_init(worker_id):
        raise ValueError(f"cannot set up worker {worker_id}")

    with pytest.raises(ValueError, match="(?s)worker process 0 while starting.*cannot set up worker 0"):
        list(D.DataLoader(Pids(), num_workers=2, worker_init_fn=bad_init))


def test_unpicklable_batch_is_an_error_not_a_hang():
    class Local:  # not importable: cannot be pickled
        pass

    with pytest.raises(Exception) as expected:
        pickle.dumps(Local())
    with pytest.raises(expected.type, match="worker process 0 while sending its batch"):
        list(D.DataLoader([Local()] * 4, batch_size=None, num_workers=2, collate_fn=lambda x: x))


@pytest.mark.parametrize("how, code", [("kill", "exit code -9 (killed by signal SIGKILL)"), ("exit", "exit code 3")])
def test_dead_worker_raises_promptly(how, code):
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"worker 1 \(pid \d+\) exited unexpectedly with {re.escape(code)}"):
        list(D.DataLoader(Dies(how), batch_size=3, num_workers=2))
    assert time.monotonic() - start < 10  # detected, not hung


def test_timeout():
    with pytest.raises(RuntimeError, match=r"DataLoader timed out after 0.3 seconds"):
        list(D.DataLoader(Slow(), batch_size=1, num_workers=2, timeout=0.3))


def test_workers_leave_when_exhausted_deleted_or_failed():
    loader = D.DataLoader(Pids(), batch_size=2, num_workers=2)
    list(loader)
    assert _children() == []
    it = iter(loader)
    next(it)
    assert len(_children()) == 2
    del it
    gc.collect()
    assert _children() == []
    with pytest.raises(BadSample):
        for _ in D.DataLoader(Failing(BadSample("x")), batch_size=2, num_workers=2):
            pass
    gc.collect()
    assert _children() == []


def test_iterable_dataset_sharded_with_worker_info():
    out = [b.tolist() for b in D.DataLoader(Sharded(11), batch_size=2, num_workers=2)]
    assert out == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9]]  # batches alternate between the workers
    assert [b.tolist() for b in D.DataLoader(Sharded(11), batch_size=2, num_workers=2, drop_last=True)] == \
        [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10]]
    assert sorted(D.DataLoader(Sharded(7), batch_size=None, num_workers=2)) == list(range(7))
    # an unsharded stream is read whole by every worker, as in PyTorch
    assert sorted(sum((b.tolist() for b in D.DataLoader(Sharded(5, shard=False), batch_size=2, num_workers=2)),
                      [])) == sorted(list(range(5)) * 2)


def test_uneven_shards_end_independently():
    class Uneven(D.IterableDataset):
        def __iter__(self):
            return iter(range(7) if D.get_worker_info().id == 0 else range(100, 102))

    out = [b.tolist() for b in D.DataLoader(Uneven(), batch_size=2, num_workers=2, prefetch_factor=1)]
    assert out == [[0, 1], [100, 101], [2, 3], [4, 5], [6]]


def test_persistent_workers_live_across_epochs():
    loader = D.DataLoader(Pids(), batch_size=2, num_workers=2, persistent_workers=True)
    first = [b.tolist() for b in loader]
    assert len(_children()) == 2
    it = iter(loader)
    next(it)  # an abandoned epoch
    second = [b.tolist() for b in loader]
    assert first == second and len(set(sum(first, []))) == 2
    seq = D.DataLoader(Sharded(6), batch_size=2, num_workers=2, persistent_workers=True)
    assert [b.tolist() for b in seq] == [[0, 2], [1, 3], [4], [5]] == [b.tolist() for b in seq]
    del loader, it, seq
    gc.collect()
    assert _children() == []


def test_transferred_tensors_are_plain():
    class Grad(D.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return ember.ones(3, requires_grad=True) * i, np.float32(i)

    for x, y in D.DataLoader(Grad(), batch_size=2, num_workers=2):
        assert type(x) is ember.Tensor and x.grad_fn is None and not x.requires_grad and x.is_leaf
        assert isinstance(x._data, np.ndarray) and x._data.flags.writeable and x.dtype == ember.float32
        assert y.dtype == ember.float32
    with warnings.catch_warnings():  # pin_memory without CUDA warns (tests/test_cuda_train.py checks it)
        warnings.simplefilter("ignore", UserWarning)
        x, _ = next(iter(D.DataLoader(Grad(), batch_size=None, num_workers=2, pin_memory=True)))
    assert x.grad_fn is None and not x.requires_grad and x.tolist() == [0.0, 0.0, 0.0]


def test_tensor_dataset_with_workers_matches_main_process():
    ds = D.TensorDataset(ember.from_numpy(np.arange(60, dtype=np.float32).reshape(20, 3)), ember.arange(20))
    one = [[t.tolist() for t in b] for b in D.DataLoader(ds, batch_size=7)]
    many = D.DataLoader(ds, batch_size=7, num_workers=2, prefetch_factor=3)
    assert [[t.tolist() for t in b] for b in many] == one and len(many) == 3


class Big(D.Dataset):
    """Batches far larger than a pipe's buffer: a worker that has one ready blocks sending it."""

    def __len__(self):
        return 40

    def __getitem__(self, i):
        return np.full(200_000, i, np.float32)


def test_abandoned_epoch_with_blocked_senders_shuts_down_without_waiting():
    from ember.utils.data import dataloader
    other = iter(D.DataLoader(Pids(), num_workers=1))  # a live loader started first: its pipe reaches the forks
    it = iter(D.DataLoader(Big(), batch_size=2, num_workers=2))
    assert next(it).shape == (2, 200_000)
    time.sleep(0.2)  # let both workers block on sending their next batches
    start = time.monotonic()
    del it
    gc.collect()
    # the workers saw their pipes close and left on their own, before the join timeout would kill them
    assert time.monotonic() - start < dataloader._JOIN_S
    assert len(_children()) == 1
    del other


_ORPHAN_SCRIPT = r"""
import os, sys, time
import ember
from ember.utils.data import DataLoader, Dataset

class Slow(Dataset):  # a worker busy inside __getitem__ long after its main process is gone
    def __len__(self): return 64
    def __getitem__(self, i):
        time.sleep(60)
        return i

it = iter(DataLoader(Slow(), batch_size=8, num_workers=2))
time.sleep(1.0)
print(" ".join(str(p.pid) for p in it._workers), flush=True)
time.sleep(60)
"""


def test_workers_die_with_a_killed_main_process():
    import signal
    import subprocess
    import sys
    import time
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=root))
    try:
        pids = [int(p) for p in proc.stdout.readline().split()]
        assert len(pids) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while any(os.path.exists(f"/proc/{p}") and "Z" not in _proc_state(p) for p in pids):
        assert time.monotonic() < deadline, f"workers {pids} outlived their killed main process"
        time.sleep(0.05)


def _proc_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"
