"""Run under `mpiexec -n 2 python tests/_dist_ddp.py [--route ROUTE] SCENARIO...`: DistributedDataParallel
scenarios named on the command line, with the model on the CPU or on CUDA (ROUTE: one of
tests/_dist_route.py's ROUTES, default cpu).

Each scenario asserts on every rank; rank 0 prints "OK <scenario>". Any failure raises, and
ember.distributed's excepthook aborts the whole job (non-zero exit, no hang).
"""
import sys

import numpy as np

import ember as torch
import ember.distributed as dist
import ember.nn as nn
import ember.nn.functional as F
from ember.nn.parallel import DistributedDataParallel as DDP

import _dist_route

DEV = "cpu"  # set in __main__ from --route


def make_model(seed: int, dtype) -> nn.Module:
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 3))
    return m.to(dtype).to(DEV)


def batches(n_steps: int, global_batch: int, dtype, seed: int = 123):
    rng = np.random.default_rng(seed)  # same stream on every rank: the global batches
    for _ in range(n_steps):
        x = rng.standard_normal((global_batch, 6))
        y = rng.integers(0, 3, global_batch)
        yield torch.tensor(x, dtype=dtype, device=DEV), torch.tensor(y, device=DEV)


def flat_params(m: nn.Module) -> np.ndarray:
    return np.concatenate([p.detach().cpu().numpy().reshape(-1) for p in m.parameters()])


def same_on_all_ranks(m: nn.Module) -> None:
    """Parameters bitwise identical across ranks (gathered to rank 0, compared as bytes)."""
    mine = flat_params(m).tobytes()
    got = dist.group.comm.gather(mine, root=0)
    if dist.get_rank() == 0:
        for r, b in enumerate(got):
            assert b == got[0], f"rank {r}'s parameters differ from rank 0's"


def make_opt(name: str, params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9) if name == "sgd" else torch.optim.Adam(params, lr=0.01)


def local_half(x, y):
    r, n = dist.get_rank(), dist.get_world_size()
    k = x.shape[0] // n
    return x[r * k:(r + 1) * k], y[r * k:(r + 1) * k]


def train_ddp(dtype, opt_name: str, steps: int = 5, bucket_cap_mb=25, micro: int = 1) -> nn.Module:
    ddp = DDP(make_model(0, dtype), bucket_cap_mb=bucket_cap_mb)
    opt = make_opt(opt_name, ddp.parameters())
    for x, y in batches(steps, 8 * micro, dtype):
        xs, ys = local_half(x, y)
        opt.zero_grad()
        k = xs.shape[0] // micro
        for j in range(micro):  # the first micro-1 micro-batches accumulate locally (no_sync)
            xm, ym = xs[j * k:(j + 1) * k], ys[j * k:(j + 1) * k]
            if j < micro - 1:
                with ddp.no_sync():
                    (F.cross_entropy(ddp(xm), ym) / micro).backward()
            else:
                (F.cross_entropy(ddp(xm), ym) / micro).backward()
        opt.step()
    return ddp.module


def train_single(dtype, opt_name: str, steps: int = 5, micro: int = 1) -> nn.Module:
    m = make_model(0, dtype)
    opt = make_opt(opt_name, m.parameters())
    for x, y in batches(steps, 8 * micro, dtype):
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()
    return m


def check_close(a: nn.Module, b: nn.Module, rtol: float, atol: float) -> None:
    for (n, p), q in zip(a.named_parameters(), b.parameters()):
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), rtol=rtol, atol=atol, err_msg=n)


def scenario_train() -> None:
    for dtype, rtol, atol in ((torch.float64, 1e-10, 1e-12), (torch.float32, 1e-5, 1e-6)):
        for opt_name in ("sgd", "adam"):
            m = train_ddp(dtype, opt_name)
            same_on_all_ranks(m)
            check_close(m, train_single(dtype, opt_name), rtol, atol)


def scenario_broadcast() -> None:
    ddp = DDP(make_model(100 + dist.get_rank(), torch.float32))  # different weights on every rank
    same_on_all_ranks(ddp.module)
    np.testing.assert_array_equal(flat_params(ddp.module), flat_params(make_model(100, torch.float32)))
    assert list(ddp.state_dict())[0] == "module.0.weight"
    assert len(list(ddp.parameters())) == 6
    ddp.eval()
    assert not ddp.module.training and not ddp.module[0].training


def scenario_nosync() -> None:
    for opt_name in ("sgd", "adam"):
        m = train_ddp(torch.float64, opt_name, steps=3, micro=2)
        same_on_all_ranks(m)
        check_close(m, train_single(torch.float64, opt_name, steps=3, micro=2), 1e-10, 1e-12)


def scenario_nosync_silent() -> None:
    """Inside no_sync, gradients stay local (they differ across ranks)."""
    ddp = DDP(make_model(0, torch.float64))
    x, y = next(batches(1, 8, torch.float64))
    xs, ys = local_half(x, y)
    with ddp.no_sync():
        F.cross_entropy(ddp(xs), ys).backward()
    g = ddp.module[0].weight.grad.cpu().numpy()
    got = dist.group.comm.allgather(g.tobytes())
    assert got[0] != got[1], "no_sync still communicated"


def scenario_buckets() -> None:
    ddp = DDP(make_model(0, torch.float32), bucket_cap_mb=1e-4)  # ~100 bytes: one bucket per parameter
    assert len(ddp._buckets) == 6, len(ddp._buckets)
    assert [p.shape for p in ddp._buckets[0].params] == [(3,)]  # reverse registration order
    assert len(DDP(make_model(0, torch.float32))._buckets) == 1
    # overlap: when the first layer's weight (the last gradient) is ready, earlier buckets are already in flight
    started = []
    ddp.module[0].weight.register_post_accumulate_grad_hook(
        lambda p: started.append([b.req is not None for b in ddp._buckets]))
    x, y = next(batches(1, 8, torch.float32))
    F.cross_entropy(ddp(x), y).backward()
    assert len(started) == 1 and started[0][:4] == [True] * 4, started  # the later layers' buckets
    assert all(b.req is None for b in ddp._buckets)  # all completed at the end of backward
    for opt_name in ("sgd", "adam"):
        many = train_ddp(torch.float32, opt_name, bucket_cap_mb=1e-4)
        one = train_ddp(torch.float32, opt_name, bucket_cap_mb=25)
        same_on_all_ranks(many)
        assert flat_params(many).tobytes() == flat_params(one).tobytes()


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.a = nn.Linear(4, 1)
        self.b = nn.Linear(4, 1)

    def forward(self, x, use_b: bool):
        h = self.body(x)
        return self.b(h) if use_b else self.a(h)


def scenario_unused() -> None:
    """Head b is used on rank 1 only, head a on rank 0 only: no hang, averages include zeros."""
    torch.manual_seed(0)
    ddp = DDP(TwoHeads().double().to(DEV), bucket_cap_mb=1e-4)
    ref = TwoHeads().double().to(DEV)
    ref.load_state_dict(ddp.module.state_dict())
    x = torch.ones(2, 4, dtype=torch.float64, device=DEV)
    rank = dist.get_rank()
    ddp(x, use_b=rank == 1).sum().backward()
    # expected: each head's gradient is its single user's gradient / world size
    ref(x, use_b=False).sum().backward()
    ga = ref.a.weight.grad.cpu().numpy().copy()
    ref.zero_grad()
    ref(x, use_b=True).sum().backward()
    gb = ref.b.weight.grad.cpu().numpy().copy()
    np.testing.assert_allclose(ddp.module.a.weight.grad.cpu().numpy(), ga / 2, rtol=1e-12)
    np.testing.assert_allclose(ddp.module.b.weight.grad.cpu().numpy(), gb / 2, rtol=1e-12)
    # a parameter no rank uses keeps grad None on every rank
    ddp.zero_grad()
    ddp(x, use_b=False).sum().backward()
    assert ddp.module.b.weight.grad is None and ddp.module.a.weight.grad is not None


def scenario_crash() -> None:
    """Rank 1 raises inside backward while rank 0 waits in the reduction: the job must abort."""
    ddp = DDP(make_model(0, torch.float32))
    if dist.get_rank() == 1:
        def boom(g):
            raise ValueError("rank-local failure inside backward")
        ddp.module[0].weight.register_hook(boom)
    x, y = next(batches(1, 8, torch.float32))
    F.cross_entropy(ddp(*local_half(x, y)[:1]), local_half(x, y)[1]).backward()
    dist.barrier()
    print("UNREACHABLE", flush=True)


def scenario_devices() -> None:
    """Buckets hold one dtype on one device, and their buffers live on the parameters' device."""
    ddp = DDP(make_model(0, torch.float32))
    for b in ddp._buckets:
        assert torch.backend.device_of(b.buf) == b.params[0].device
        assert len({(p.device, p.dtype) for p in b.params}) == 1
    mixed = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 3).double())
    assert len(DDP(mixed.to(DEV))._buckets) == 2


if __name__ == "__main__":
    args = sys.argv[1:]
    route = "cpu"
    if args[:1] == ["--route"]:
        route, args = args[1], args[2:]
    dist.init_process_group("mpi")
    assert dist.get_world_size() == 2
    DEV = _dist_route.setup(route, dist.get_rank())
    for name in args:
        globals()["scenario_" + name]()
        dist.barrier()
        if dist.get_rank() == 0:
            print("OK", name, flush=True)
    if args != ["crash"]:
        _dist_route.check(route, dist.get_rank())
    dist.destroy_process_group()
