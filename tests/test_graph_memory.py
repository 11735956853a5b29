"""The engine frees every saved buffer after backward.

After `backward()` without `retain_graph`, a graph that is still referenced (by the loss, by an
output kept for logging) must hold no array: not the saved inputs or outputs, and not the
masks, normalised activations, columns or indices an op's forward kept on its node. A second
backward then raises PyTorch's "backward through the graph a second time" error. With
`retain_graph=True` everything stays and a second backward gives the same gradients.
"""
from __future__ import annotations

import gc
import tracemalloc
from typing import Callable

import numpy as np
import pytest

import ember
import ember.nn as nn
import ember.nn.functional as F
from ember._tensor import Slot
from ember.autograd.function import FREED, Node


def _nodes(root: ember.Tensor) -> list[Node]:
    """Every graph node reachable from `root`."""
    seen: dict[int, Node] = {}
    stack = [root.grad_fn]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen[id(n)] = n
        for e in n.next:
            if type(e) is Slot:
                stack.append(e.node)
            elif isinstance(e, Node):
                stack.append(e)
    return list(seen.values())


def _arrays(v, depth: int = 0):
    if isinstance(v, ember.Tensor):
        yield v._data
    elif isinstance(v, np.ndarray):
        yield v
    elif isinstance(v, (tuple, list, dict)) and depth < 3:
        for e in (v.values() if isinstance(v, dict) else v):
            yield from _arrays(e, depth + 1)


def held(node: Node) -> dict[str, int]:
    """{attribute: array bytes} for everything array-like the node references."""
    fields = {"inputs": node.inputs, "out": node.out}
    fields.update(getattr(node, "__dict__", {}))
    sizes = {k: sum(a.nbytes for a in _arrays(v)) for k, v in fields.items()}
    return {k: b for k, b in sizes.items() if b}


def _x(*shape, seed=0):
    return ember.from_numpy(np.random.default_rng(seed).standard_normal(shape)).requires_grad_()


def _conv_net():
    ember.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.BatchNorm2d(4),
                         nn.Conv2d(4, 4, 3), nn.GELU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                         nn.Dropout(0.3), nn.Linear(4, 3)).double()


def _unfused(fn: Callable[[], ember.Tensor]) -> ember.Tensor:
    """`fn()` with Sequential's Conv2d-ReLU-MaxPool2d fusion off (the layers' own nodes)."""
    from ember.nn.modules import _fusion
    _fusion.ENABLED = False
    try:
        return fn()
    finally:
        _fusion.ENABLED = True


def _resmlp():
    from benchmarks import resmlp
    ember.manual_seed(0)
    return resmlp.ember_model().double()


# name -> a function of no arguments returning a scalar loss whose graph covers an op family
PROGRAMS: dict[str, Callable[[], ember.Tensor]] = {
    "resmlp (linear, layer_norm, dropout, residual, cross_entropy)":
        lambda: F.cross_entropy(_resmlp()(_x(8, 784)), ember.tensor([1, 2, 3, 4, 5, 6, 7, 8])),
    "cnn fused (conv-relu-pool, batch_norm, gelu, adaptive pool)":
        lambda: F.cross_entropy(_conv_net()(_x(2, 2, 8, 8)), ember.tensor([0, 2])),
    "cnn unfused": lambda: _unfused(lambda: F.cross_entropy(_conv_net()(_x(2, 2, 8, 8)), ember.tensor([0, 2]))),
    "unary math": lambda: sum(f(_x(3, 4)).sum() for f in (
        ember.exp, ember.tanh, ember.sigmoid, ember.sin, ember.erf, lambda t: t.abs().sqrt(),
        lambda t: (t * t + 1).log(), lambda t: t.clamp(-0.5, 0.5), F.silu, F.mish, F.elu, F.softplus,
        F.leaky_relu, F.selu, F.logsigmoid, F.hardtanh)),
    "binary and pow": lambda: (lambda a, b: (a * b + a / (b * b + 1) - ember.maximum(a, b) + ember.minimum(a, b)
                                             + (a * a + 1) ** b + ember.atan2(a, b) + ember.where(a > b, a, b)).sum())(
        _x(3, 4), _x(4, seed=1)),
    "reductions": lambda: (lambda a: a.max() + a.amax(0).sum() + a.var() + a.std(1).sum() + a.logsumexp(1).sum()
                           + a.prod() + a.norm() + a.max(1)[0].sum() + a.mean())(_x(3, 4)),
    "softmax and losses": lambda: (lambda a, t: F.log_softmax(a, 1).sum() + F.softmax(a, 0).pow(2).sum()
                                   + F.nll_loss(F.log_softmax(a, 1), t) + F.mse_loss(a, a.detach() * 2)
                                   + F.binary_cross_entropy_with_logits(a, (a.detach() > 0).double())
                                   + F.binary_cross_entropy(a.sigmoid(), (a.detach() > 0).double())
                                   + F.smooth_l1_loss(a, a.detach() * 0) + F.kl_div(F.log_softmax(a, 1),
                                                                                   F.softmax(a.detach(), 1),
                                                                                   reduction="batchmean"))(
        _x(5, 4), ember.tensor([0, 1, 2, 3, 0])),
    "matmul and shape": lambda: (lambda a, b: (a @ b).t().reshape(-1).sum() + ember.cat([a, a * 2], 1).sum()
                                 + ember.stack([a, a]).permute(2, 0, 1).flatten()[::2].sum()
                                 + a.unsqueeze(0).expand(3, 3, 4).sum() + ember.bmm(a[None], b[None]).sum())(
        _x(3, 4), _x(4, 2, seed=1)),
    "indexing": lambda: (lambda a, i: a[i].sum() + a[a > 0].sum() + a.gather(1, i[:, None].repeat(1, 2)).sum()
                         + a.index_select(0, i).sum() + ember.take_along_dim(a, i[:, None], 1).sum()
                         + a.masked_fill(a > 1, 0.0).sum() + a[1:, ::2].sum())(
        _x(3, 4), ember.tensor([2, 0, 1])),
    "in-place on non-leaves": lambda: (lambda a: (lambda y: (y.mul_(2), y.add_(1), y.clamp_(-1, 1),
                                                             y.sigmoid_() if hasattr(y, "sigmoid_") else y)[-1])(
        a * 1.0).sum())(_x(3, 4)),
    "conv1d, pools, norms, embedding": lambda: (
        F.conv1d(_x(2, 3, 9), _x(4, 3, 3, seed=1), stride=2).sum()
        + F.avg_pool2d(_x(1, 2, 6, 6), 3, padding=1).sum() + F.max_pool2d(_x(1, 2, 6, 6), 3, stride=2).sum()
        + F.group_norm(_x(2, 4, 3), 2).pow(2).sum() + F.layer_norm(_x(2, 5), (5,)).pow(2).sum()
        + F.conv_transpose2d(_x(1, 2, 3, 3), _x(2, 3, 2, 2, seed=1), stride=2).sum()
        + F.embedding(ember.tensor([[0, 2], [1, 1]]), _x(4, 3)).pow(2).sum()
        + F.interpolate(_x(1, 1, 3, 3), scale_factor=2).pow(2).sum()),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_backward_frees_every_saved_buffer(name: str) -> None:
    loss = PROGRAMS[name]()
    nodes = _nodes(loss)
    before = sum(sum(held(n).values()) for n in nodes)
    assert before > 0, "the program saved nothing: it tests nothing"
    loss.backward()
    kept = {f"{n.name()}.{k}": b for n in nodes for k, b in held(n).items()}
    assert not kept, f"after backward, nodes still hold arrays: {kept}"
    saved = [n for n in nodes if n.inputs is FREED]
    assert saved  # the nodes that saved something are marked freed...
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()  # ... so a second backward says so instead of failing deep inside


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_retain_graph_keeps_buffers(name: str) -> None:
    """With retain_graph=True nothing is freed, and a second backward accumulates the same gradients."""
    ember.manual_seed(0)
    loss = PROGRAMS[name]()
    leaves = [t for n in _nodes(loss) for t in n.next if isinstance(t, ember.Tensor)]
    loss.backward(retain_graph=True)
    first = [t.grad.numpy().copy() for t in leaves]
    assert sum(sum(held(n).values()) for n in _nodes(loss)) > 0
    loss.backward()
    for t, g in zip(leaves, first):
        np.testing.assert_allclose(t.grad.numpy(), 2 * g, rtol=1e-12, atol=1e-12)


def test_user_function_keeps_its_attributes() -> None:
    """A custom Function's saved tensors are freed, but what it stored on ctx is the user's: kept (PyTorch too)."""
    class Scale(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            ctx.note = np.arange(3)
            ctx.save_for_backward(x)
            return x * k

        @staticmethod
        def backward(ctx, g):
            ctx.save_for_backward  # noqa: B018 (attribute access only)
            return g * ctx.k, None

    x = _x(3)
    y = Scale.apply(x, 2.0)
    y.sum().backward()
    assert y.grad_fn.k == 2.0 and list(y.grad_fn.note) == [0, 1, 2]
    assert y.grad_fn.inputs is FREED
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_kept_loss_costs_no_memory() -> None:
    """Keeping the loss (and so the graph) alive after backward holds no more traced memory than
    dropping it: measured with tracemalloc, which sees NumPy's allocations."""
    model = _resmlp()
    x, y = _x(64, 784), ember.randint(0, 10, (64,))

    def step(keep: list | None) -> int:
        model.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if keep is not None:
            keep.append(loss)
        del loss
        gc.collect()
        return tracemalloc.get_traced_memory()[0]

    step(None)  # creates the .grad arrays, so both measurements below include them
    tracemalloc.start()
    try:
        base = step(None)
        kept: list = []
        with_graph = step(kept)
        assert kept[0].grad_fn is not None
    finally:
        tracemalloc.stop()
    # W2 at batch 64 saves ~600 kB of activations in float64; allow 16 kB of Python objects
    assert with_graph - base < 16_384, (base, with_graph)
