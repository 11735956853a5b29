"""DistributedDataParallel: one model replica per MPI rank, gradients averaged during backward.

How it works (as PyTorch's reducer, on MPI):
- At wrap time rank 0's parameters and buffers are broadcast, so every rank starts identical.
- Parameters that require grad are grouped, in reverse registration order (roughly the order
  backward produces their gradients), into buckets of about `bucket_cap_mb` MB of one dtype and
  device. Each bucket owns one flat contiguous buffer on that device.
- A post-accumulate-grad hook on every parameter marks it ready; when all of a bucket's parameters
  are ready its gradients are copied into the buffer and a non-blocking in-place `Iallreduce(SUM)`
  starts (NCCL on the CUDA stream for CUDA parameters, when every rank has it; `Iallreduce` over
  MPI otherwise, through host memory for CUDA), overlapping communication with the rest of backward. Buckets are started strictly in
  index order on every rank: MPI matches collectives by order, so the order must not depend on
  which rank's backward reached a bucket first.
- At the end of backward (an engine callback) the remaining buckets are started, all requests are
  waited on, and each `p.grad` receives the sum divided by the world size.

Differences from PyTorch, chosen so that no rank hangs:
- A parameter that got no gradient in a pass (unused) is reduced as zeros whatever
  `find_unused_parameters` says (PyTorch raises when it is False). Each bucket also reduces one
  "had a gradient" flag per parameter: a parameter unused on every rank keeps its `.grad`
  (None stays None); one used on some ranks gets the average on all of them.
- `gradient_as_bucket_view` is accepted and ignored: gradients are always copied out of the
  buckets (same values; only PyTorch's memory saving is missing).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from ... import backend
from ... import distributed as dist
from ..._tensor import Tensor, bump_version, make
from ...backend import writable
from ...autograd import engine
from ...autograd.grad_mode import MODE, no_grad
from ..modules.module import Module

_MB = 1024 * 1024


class _Bucket:
    """Parameters reduced together: their gradients, flat in `buf`, then one flag per parameter."""

    __slots__ = ("params", "offsets", "numel", "buf", "ready", "pending", "req")

    def __init__(self, params: list) -> None:
        self.params = params
        self.offsets = []
        n = 0
        for p in params:
            self.offsets.append(n)
            n += p._data.size
        self.numel = n
        a = params[0]._data
        with backend.on(params[0].device):
            self.buf = backend.array_module(a).zeros(n + len(params), a.dtype)
        self.ready = [False] * len(params)
        self.pending = len(params)
        self.req = None

    def reset(self) -> None:
        self.ready = [False] * len(self.params)
        self.pending = len(self.params)
        self.req = None


class DistributedDataParallel(Module):
    """Data parallelism over the default process group: wrap the model on every rank, feed each
    rank its own part of the batch, and after `loss.backward()` every rank holds the gradients
    averaged over ranks (as if computed on the whole batch with a mean-reduced loss), so identical
    optimizer steps keep the replicas identical.

    `device_ids` and `output_device` are accepted for PyTorch compatibility (the module runs where
    its parameters are). Requires `ember.distributed.init_process_group()` first (ValueError, as in PyTorch).
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None, bucket_cap_mb: float | None = 25,
                 find_unused_parameters: bool = False, check_reduction: bool = False,
                 gradient_as_bucket_view: bool = False, static_graph: bool = False, **unused: Any) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel expects an ember.nn.Module, got {type(module).__name__}")
        if not dist.is_initialized():
            raise dist.ProcessGroupStateError("DistributedDataParallel: Default process group has not been initialized, "
                                              "please make sure to call init_process_group() first (under mpiexec)")
        if bucket_cap_mb is None:
            bucket_cap_mb = 25
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        self.device_ids, self.output_device, self.dim = device_ids, output_device, dim
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.bucket_bytes_cap = int(bucket_cap_mb * _MB)
        self.require_backward_grad_sync = True  # False inside no_sync() (PyTorch's attribute)
        self._comm = dist.group.comm
        self._world = self._comm.Get_size()
        self._check_same_model()
        self._sync_params_and_buffers()

        params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = self._make_buckets(params)
        self._where = {}  # id(param) -> (bucket index, position in the bucket)
        for b, bucket in enumerate(self._buckets):
            for i, p in enumerate(bucket.params):
                self._where[id(p)] = (b, i)
        self._sync_pass = True  # decided at forward: does the coming backward reduce?
        self._active = False    # a reducing backward is in progress (its end callback is queued)
        self._next = 0          # index of the next bucket to start
        self._local = set()     # ids of params that accumulated gradients under no_sync since the last reduction
        self._handles = [p.register_post_accumulate_grad_hook(self._on_grad_ready) for p in params]

    # ------------------------------------------------------------------ setup
    def _check_same_model(self) -> None:
        """Every rank must wrap the same architecture, or the collectives would not match (fail clearly, not hang)."""
        mine = [(n, tuple(t.shape), str(t.dtype)) for n, t in self.module.named_parameters()]
        theirs = self._comm.allgather(mine)  # small metadata, once: pickling is fine here
        for r, other in enumerate(theirs):
            if other != mine:
                raise RuntimeError(f"DistributedDataParallel: rank {self._comm.Get_rank()}'s model differs from "
                                   f"rank {r}'s (parameter names, shapes or dtypes); every rank must wrap the same model")

    def _sync_params_and_buffers(self) -> None:
        with no_grad():
            for t in list(self.module.parameters()) + list(self.module.buffers()):
                dist.broadcast(t, 0)

    def _make_buckets(self, params: list) -> list:
        buckets, cur, size = [], [], 0
        for p in reversed(params):  # backward produces the last layers' gradients first
            nbytes = p._data.size * p._data.dtype.itemsize
            if cur and (p._data.dtype != cur[0]._data.dtype or p.device != cur[0].device
                        or size + nbytes > self.bucket_bytes_cap):
                buckets.append(_Bucket(cur))
                cur, size = [], 0
            cur.append(p)
            size += nbytes
        if cur:
            buckets.append(_Bucket(cur))
        return buckets

    # ------------------------------------------------------------------ forward
    def forward(self, *args, **kwargs):
        if self._active:
            # a backward raised after starting reductions: this rank's collectives are out of step
            raise RuntimeError("DistributedDataParallel: expected to have finished reduction in the prior iteration "
                               "before starting a new one (did the previous backward raise?)")
        if MODE.grad:
            self._sync_pass = self.require_backward_grad_sync
            if self.broadcast_buffers and self._sync_pass and self._world > 1:
                with no_grad():
                    for b in self.module.buffers():
                        dist.broadcast(b, 0)
        return self.module(*args, **kwargs)

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes of forwards run inside this block accumulate gradients locally, with no
        communication; the first reducing backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # ------------------------------------------------------------------ reduction
    def _on_grad_ready(self, p: Tensor) -> None:
        if not self._sync_pass:
            self._local.add(id(p))
            return
        if not self._active:
            self._active = True
            self._next = 0
            for bucket in self._buckets:
                bucket.reset()
            engine.queue_callback(self._finish)
        b, i = self._where[id(p)]
        bucket = self._buckets[b]
        if not bucket.ready[i]:
            bucket.ready[i] = True
            bucket.pending -= 1
            if bucket.pending == 0 and b == self._next:
                self._start_ready()

    def _start_ready(self) -> None:
        buckets = self._buckets
        while self._next < len(buckets) and buckets[self._next].pending == 0:
            self._start(buckets[self._next])
            self._next += 1

    def _start(self, bucket: _Bucket) -> None:
        buf, n = bucket.buf, bucket.numel
        local = self._local
        dev = bucket.params[0].device
        with backend.on(dev):
            for i, p in enumerate(bucket.params):
                o = bucket.offsets[i]
                view = buf[o:o + p._data.size]
                g = p.grad
                if g is not None and (bucket.ready[i] or id(p) in local):
                    view[...] = backend.transfer(g._data, dev).reshape(-1)
                    buf[n + i] = 1
                else:  # unused in this pass (see the module docstring): contribute zeros
                    view[...] = 0
                    buf[n + i] = 0
        bucket.req = dist.collectives.start_all_reduce(buf)

    def _finish(self) -> None:
        """End of backward: start what is left (in order), wait for everything, write the averages back."""
        try:
            for bucket in self._buckets[self._next:]:
                self._start(bucket)
            self._next = len(self._buckets)
            for bucket in self._buckets:
                bucket.req.Wait()
            world = self._world
            for bucket in self._buckets:
                buf, n = bucket.buf, bucket.numel
                dev = bucket.params[0].device
                had = backend.to_host(buf[n:])  # one device-to-host copy per bucket, not one per parameter
                with backend.on(dev):
                    buf[:n] /= world
                    for i, p in enumerate(bucket.params):
                        if had[i] == 0:
                            continue  # no rank had a gradient for p: leave its .grad as it is
                        o = bucket.offsets[i]
                        avg = buf[o:o + p._data.size].reshape(p._data.shape)
                        g = p.grad
                        if g is not None and not g.requires_grad and g._data.shape == avg.shape \
                                and g.device == dev and writable(g._data):
                            g._data[...] = avg
                            bump_version(g)
                        else:
                            with no_grad():
                                p.grad = make(avg.copy())
        finally:
            self._local.clear()
            self._active = False
            for bucket in self._buckets:
                bucket.req = None
