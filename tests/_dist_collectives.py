"""Run under `mpiexec -n 2 python tests/_dist_collectives.py CASE [ROUTE]`: checks one family of
ember.distributed's collectives against values computed locally from every rank's inputs.

ROUTE is where the tensors live and how they travel: one of tests/_dist_route.py's ROUTES.

Each rank prints `PASS CASE rank R` at the end; a failed check raises, and ember's excepthook
then aborts the whole job (non-zero exit), which tests/test_distributed.py reports.
"""
from __future__ import annotations

import os
import sys
import time
import warnings

import numpy as np

import ember
import ember.distributed as dist

import _dist_route

ROUTE = sys.argv[2] if len(sys.argv) > 2 else "cpu"
DEV = "cpu"  # set by main()


def tensor(a, **kw):
    return ember.tensor(a, device=DEV, **kw)


def zeros(*shape, **kw):
    return ember.zeros(*shape, device=DEV, **kw)


def ones(*shape, **kw):
    return ember.ones(*shape, device=DEV, **kw)


DTYPES = {"float32": ember.float32, "float64": ember.float64, "int64": ember.int64}
NP_OPS = {dist.ReduceOp.SUM: np.sum, dist.ReduceOp.MAX: np.max, dist.ReduceOp.MIN: np.min,
          dist.ReduceOp.PRODUCT: np.prod, dist.ReduceOp.AVG: np.mean}


def values(rank: int, shape=(3, 4), dtype: str = "float64") -> np.ndarray:
    """Rank-dependent inputs with distinct signs and magnitudes, so every op tells ranks apart."""
    a = (np.arange(int(np.prod(shape))).reshape(shape) % 5 - 2) * (rank + 2) + rank
    return a.astype(dtype)


def expect_raises(exc: type, text: str, fn, *args, **kw) -> None:
    try:
        fn(*args, **kw)
    except exc as e:
        assert text in str(e), f"{exc.__name__} message {str(e)!r} lacks {text!r}"
    else:
        raise AssertionError(f"{fn.__name__} did not raise {exc.__name__}")


def case_all_reduce(rank: int, n: int) -> None:
    for dt in DTYPES:
        for op, npop in NP_OPS.items():
            if op == dist.ReduceOp.AVG and dt == "int64":
                expect_raises(TypeError, "ReduceOp.AVG needs a floating tensor", dist.all_reduce,
                              tensor(values(rank, dtype=dt)), op=op)
                continue
            want = npop(np.stack([values(r, dtype=dt) for r in range(n)]), axis=0).astype(dt)
            # contiguous, blocking
            t = tensor(values(rank, dtype=dt))
            v0 = t._version
            assert dist.all_reduce(t, op=op) is None
            assert t.dtype == DTYPES[dt] and t._version > v0, (t.dtype, dt)
            np.testing.assert_allclose(t.cpu().numpy(), want, rtol=1e-6, err_msg=f"{op} {dt}")
            # non-contiguous: a transposed view and a strided column of a base tensor; the result
            # must land in the view, hence in the base, and nowhere else
            base = tensor(values(rank, dtype=dt).T.copy())
            tv = base.t()
            assert not tv.is_contiguous()
            dist.all_reduce(tv, op=op)
            np.testing.assert_allclose(tv.cpu().numpy(), want, rtol=1e-6, err_msg=f"{op} {dt} transposed")
            np.testing.assert_allclose(base.cpu().numpy(), want.T, rtol=1e-6, err_msg=f"{op} {dt} base of transposed")
            grid = tensor(np.full((4, 5), -7, dt))
            col = grid[:, 2]
            assert not col.is_contiguous()
            col.copy_(tensor(values(rank, (4,), dt)))
            dist.all_reduce(col, op=op)
            want_col = npop(np.stack([values(r, (4,), dt) for r in range(n)]), axis=0).astype(dt)
            g = grid.cpu().numpy()
            np.testing.assert_allclose(g[:, 2], want_col, rtol=1e-6, err_msg=f"{op} {dt} column")
            assert (np.delete(g, 2, axis=1) == -7).all(), f"{op} {dt}: all_reduce of a column wrote outside it"
            # async
            t = tensor(values(rank, dtype=dt))
            work = dist.all_reduce(t, op=op, async_op=True)
            assert isinstance(work, dist.Work)
            assert work.wait() is True and work.is_completed()
            np.testing.assert_allclose(t.cpu().numpy(), want, rtol=1e-6, err_msg=f"{op} {dt} async")
            t = tensor(values(rank, dtype=dt)).t()
            work = dist.all_reduce(t, op=op, async_op=True)
            while not work.is_completed():
                time.sleep(0.001)
            np.testing.assert_allclose(t.cpu().numpy(), want.T, rtol=1e-6, err_msg=f"{op} {dt} async transposed")


def case_broadcast(rank: int, n: int) -> None:
    for src in range(n):
        for dt in DTYPES:
            t = tensor(values(rank, dtype=dt))
            assert dist.broadcast(t, src=src) is None
            np.testing.assert_array_equal(t.cpu().numpy(), values(src, dtype=dt))
            t = tensor(values(rank, dtype=dt)).t()  # non-contiguous
            dist.broadcast(t, src)
            np.testing.assert_array_equal(t.cpu().numpy(), values(src, dtype=dt).T)
        t = tensor(values(rank))
        dist.broadcast(t, src, async_op=True).wait()
        np.testing.assert_array_equal(t.cpu().numpy(), values(src))


def case_all_gather(rank: int, n: int) -> None:
    for dt in DTYPES:
        for async_op in (False, True):
            out = [zeros(3, 4, dtype=DTYPES[dt]) for _ in range(n)]
            work = dist.all_gather(out, tensor(values(rank, dtype=dt)), async_op=async_op)
            if async_op:
                work.wait()
            for r in range(n):
                np.testing.assert_array_equal(out[r].cpu().numpy(), values(r, dtype=dt))
        out = [zeros(4, 3, dtype=DTYPES[dt]) for _ in range(n)]
        dist.all_gather(out, tensor(values(rank, dtype=dt)).t())  # non-contiguous input
        for r in range(n):
            np.testing.assert_array_equal(out[r].cpu().numpy(), values(r, dtype=dt).T)


def case_reduce_scatter(rank: int, n: int) -> None:
    def inputs(r: int, dt: str) -> list[np.ndarray]:
        return [values(r, (2, 3), dt) * (k + 1) + k for k in range(n)]
    for dt in DTYPES:
        for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN):
            for async_op in (False, True):
                out = zeros(2, 3, dtype=DTYPES[dt])
                work = dist.reduce_scatter(out, [tensor(a) for a in inputs(rank, dt)], op=op,
                                           async_op=async_op)
                if async_op:
                    work.wait()
                want = NP_OPS[op](np.stack([inputs(r, dt)[rank] for r in range(n)]), axis=0)
                np.testing.assert_array_equal(out.cpu().numpy(), want, err_msg=f"{op} {dt}")
    out = zeros(2, 3)
    dist.reduce_scatter(out, [tensor(a) for a in inputs(rank, "float32")], op=dist.ReduceOp.AVG)
    want = np.mean(np.stack([inputs(r, "float32")[rank] for r in range(n)]), axis=0)
    np.testing.assert_allclose(out.cpu().numpy(), want, rtol=1e-6)


def case_barrier(rank: int, n: int) -> None:
    # the last rank arrives late: nobody may leave the barrier before it arrives
    delay = 0.5
    for async_op in (False, True):
        dist.barrier()
        start = time.monotonic()
        if rank == n - 1:
            time.sleep(delay)
        work = dist.barrier(async_op=async_op)
        if async_op:
            work.wait()
        else:
            assert work is None
        waited = time.monotonic() - start
        assert waited >= delay * 0.9, f"rank {rank} left the barrier after {waited:.3f}s"


def case_errors(rank: int, n: int) -> None:
    t = zeros(3)
    for src in (n, -1, 1.0):
        expect_raises(ValueError, f"rank {src!r} is out of range for world_size={n}", dist.broadcast, t, src)
    expect_raises(ValueError, f"tensor_list must be a list of world_size={n} tensors", dist.all_gather,
                  [zeros(3)] * (n + 1), t)
    expect_raises(ValueError, f"tensor_list must be a list of world_size={n} tensors", dist.all_gather,
                  [zeros(3)] * (n - 1), t)
    expect_raises(ValueError, "tensor_list[1] must have the input's shape", dist.all_gather,
                  [zeros(3), zeros(4)][:n], t)
    expect_raises(ValueError, f"input_list must be a list of world_size={n} tensors", dist.reduce_scatter,
                  t, [zeros(3)] * (n + 1))
    expect_raises(ValueError, "input_list[0] must have the output's shape", dist.reduce_scatter,
                  t, [zeros(2)] * n)
    expect_raises(ValueError, "unknown reduce op", dist.all_reduce, t, op="mean")
    expect_raises(TypeError, "expected an ember Tensor", dist.all_reduce, np.zeros(3))
    expect_raises(ValueError, "initialize the default process group twice", dist.init_process_group, "mpi")
    # nothing above may have left a collective half-started: one still works
    t = ones(2)
    dist.all_reduce(t)
    np.testing.assert_array_equal(t.cpu().numpy(), [n, n])


def case_dtypes(rank: int, n: int) -> None:
    """Every dtype on every route: int16 has no NCCL type (it goes through the host even beside NCCL)."""
    for dt in ("float16", "float32", "float64", "int8", "uint8", "int16", "int32", "int64"):
        want = np.sum(np.stack([values(r, dtype=dt) for r in range(n)]), axis=0).astype(dt)
        t = tensor(values(rank, dtype=dt))
        dist.all_reduce(t)
        assert t.dtype == getattr(ember, dt) and t.device.type == DEV
        np.testing.assert_array_equal(t.cpu().numpy(), want, err_msg=dt)
        t = tensor(values(rank, dtype=dt))
        dist.broadcast(t, 1)
        np.testing.assert_array_equal(t.cpu().numpy(), values(1, dtype=dt), err_msg=dt)
    expect_raises(TypeError, "bool tensors cannot be reduced", dist.all_reduce, tensor([True, False]))
    empty = zeros(0, 3)
    dist.all_reduce(empty)
    assert empty.shape == (0, 3)


def case_same_gpu(rank: int, n: int) -> None:
    """NCCL needs one GPU per rank: two ranks on one GPU get ember's error naming both, not NCCL's."""
    assert ROUTE == "nccl"
    ember.cuda.set_device(0)
    expect_raises(RuntimeError, "ranks 0 and 1 both use the same GPU (cuda:0 on host", dist.all_reduce,
                  tensor(values(rank)))
    ember.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    t = tensor(values(rank))  # on this rank's own GPU the communicator is made
    dist.all_reduce(t)
    np.testing.assert_array_equal(t.cpu().numpy(), values(0) + values(1))


def case_fake_nccl(rank: int, n: int) -> None:
    """The fake NCCL (tests/_fakecuda.py) that the CUDA routes are tested on is as strict as promised:
    a wrong datatype, a count past the buffer, a dead pointer, another device or an id that is not
    rank 0's are errors, not silent garbage."""
    import _fakecuda
    assert ROUTE == "nccl" and ember.backend.CUDA.fake
    nccl = _fakecuda.cupy.cuda.nccl
    t = tensor(values(rank))
    dist.all_reduce(t)  # makes the communicator
    comm = dist.nccl.communicators[rank]
    a = t._data
    p, s = a.data.ptr, 0
    for call, msg in [
        (lambda: comm.allReduce(p, p, a.size, nccl.NCCL_FLOAT32, nccl.NCCL_SUM, s), "does not match"),
        (lambda: comm.allReduce(p, p, a.size + 1, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, s), "must be contiguous with"),
        (lambda: comm.bcast(p + 8, a.size, nccl.NCCL_FLOAT64, 0, s), "not the data pointer of a live"),
    ]:
        expect_raises(nccl.NcclError, msg, call)
    with _fakecuda.current_device(1 - rank):
        expect_raises(nccl.NcclError, "current on a communicator of device", comm.allReduce,
                      p, p, a.size, nccl.NCCL_FLOAT64, nccl.NCCL_SUM, s)
    expect_raises(nccl.NcclError, "different unique ids", nccl.NcclCommunicator, n, nccl.get_unique_id(), rank)


def main() -> None:
    case = sys.argv[1]
    dist.init_process_group("mpi")
    rank, n = dist.get_rank(), dist.get_world_size()
    assert dist.is_initialized() and dist.get_backend() == "mpi"
    assert os.environ["RANK"] == str(rank) and os.environ["WORLD_SIZE"] == str(n)
    assert os.environ["LOCAL_RANK"] == str(rank) and os.environ["LOCAL_WORLD_SIZE"] == str(n)  # one host
    global DEV
    DEV = _dist_route.setup(ROUTE, rank)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        globals()[f"case_{case}"](rank, n)
    said = [str(w.message) for w in caught if "NCCL is not used" in str(w.message)]
    if DEV == "cuda" and case != "barrier" and ROUTE != "nccl" and rank == 0:
        assert len(said) == 1 and "reduced over MPI through host memory" in said[0], said
    else:
        assert not said, said
    if case not in ("barrier", "errors") or DEV == "cpu":
        _dist_route.check(ROUTE, rank)
    dist.barrier()
    print(f"PASS {case} rank {rank}", flush=True)
    dist.destroy_process_group()
    assert not dist.is_initialized()


if __name__ == "__main__":
    main()
