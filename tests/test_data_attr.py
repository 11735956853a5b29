"""`Tensor.data` with PyTorch's semantics: a Tensor sharing storage, outside the graph, whose in-place
changes autograd does not see; assigning it swaps the storage. Each idiom is run on ember and, where
PyTorch is installed, on torch with the same numbers."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from helpers import raises_like_torch, requires_torch, torch

LIBS = [ember] + ([torch] if torch is not None else [])


def _param(lib, values=(1.0, -2.0, 3.0)):
    return lib.nn.Parameter(lib.tensor(list(values), dtype=lib.float64))


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_data_is_a_detached_tensor_sharing_storage(lib):
    p = _param(lib)
    d = p.data
    assert type(d) is lib.Tensor and not isinstance(d, lib.nn.Parameter)
    assert not d.requires_grad and d.is_leaf and d.grad_fn is None
    assert d is not p.data  # a new Tensor each time, over the same storage
    d[0] = 7.0
    assert p[0].item() == 7.0
    assert d.size() == p.size() and p.data.size() == (3,) and p.data.dtype == p.dtype


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_in_place_idioms_write_through(lib):
    p = _param(lib)
    p.data.mul_(0.5)
    np.testing.assert_array_equal(p.detach().numpy(), [0.5, -1.0, 1.5])
    p.data.zero_()
    np.testing.assert_array_equal(p.detach().numpy(), [0.0, 0.0, 0.0])
    lib.manual_seed(0)
    p.data.normal_()
    assert (p.detach().numpy() != 0).all()
    p.data.fill_(2.0)
    p.data.clamp_(max=1.5)
    np.testing.assert_array_equal(p.detach().numpy(), [1.5, 1.5, 1.5])


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_hand_written_sgd_step(lib):
    """The classic loop: `p.data -= lr * p.grad.data`, no no_grad needed."""
    p = _param(lib)
    (p * p).sum().backward()
    before = p.detach().numpy().copy()
    p.data -= 0.1 * p.grad.data
    np.testing.assert_allclose(p.detach().numpy(), before - 0.1 * 2 * before)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    p.data.add_(p.grad.data, alpha=-0.1)  # the other spelling (the gradient is still 2·before)
    np.testing.assert_allclose(p.detach().numpy(), before * 0.6, rtol=1e-15)


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_changes_through_data_do_not_bump_the_version(lib):
    """Autograd does not see them: a saved tensor modified through `.data` is used as modified (PyTorch's
    documented hazard), where the same change made directly raises at backward."""
    w = lib.tensor([0.0, 1.0], dtype=lib.float64, requires_grad=True)
    e = w.exp()
    v = e._version
    e.data.add_(1.0)
    assert e._version == v
    e.sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), np.exp([0.0, 1.0]) + 1.0)
    w2 = lib.tensor([0.0, 1.0], dtype=lib.float64, requires_grad=True)
    e2 = w2.exp()
    e2.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        e2.sum().backward()


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_data_of_a_non_leaf_leaves_the_graph_alone(lib):
    x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
    y = x * 3
    d = y.data
    assert not d.requires_grad and d.grad_fn is None and y.grad_fn is not None
    (d * 2).sum()  # no graph, no error
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_assigning_data_swaps_the_storage(lib):
    p = _param(lib)
    new = lib.arange(5, dtype=lib.float32)
    p.data = new
    assert p.shape == (5,) and p.dtype == lib.float32 and p.requires_grad and p.is_leaf
    new[0] = 9.0
    assert p[0].item() == 9.0  # shares new's storage
    x = lib.ones(2, dtype=lib.int64)
    x.data = lib.zeros(3, dtype=lib.int64)
    assert x.shape == (3,)


@pytest.mark.parametrize("lib", LIBS, ids=lambda m: m.__name__)
def test_assigning_data_refuses_what_pytorch_refuses(lib):
    raises_like_torch(lambda m: setattr(_param(m), "data", np.zeros(3)), lib, TypeError, r"has to be a tensor.*ndarray")
    raises_like_torch(lambda m: setattr(_param(m), "data", 3), lib, TypeError, r"has to be a tensor.*int")
    raises_like_torch(lambda m: setattr(_param(m), "data", None), lib, TypeError, r"has to be a tensor.*NoneType")
    raises_like_torch(lambda m: setattr(_param(m), "data", m.zeros(3, dtype=m.int64)), lib, RuntimeError,
                      r"floating point")
    raises_like_torch(lambda m: delattr(_param(m), "data"), lib, RuntimeError, r"Deleting tensor data")


def test_module_init_idioms():
    """What real scripts write in `__init__` / `init_weights`."""
    ember.manual_seed(0)
    lin = ember.nn.Linear(4, 3)
    lin.weight.data.normal_(0.0, 0.02)
    lin.bias.data.zero_()
    lin.weight.data.uniform_(-0.1, 0.1)
    assert float(lin.weight.detach().abs().max()) <= 0.1 and float(lin.bias.detach().abs().sum()) == 0.0
    emb = ember.nn.Embedding(5, 2)
    emb.weight.data[0] = 0  # zero the padding row
    np.testing.assert_array_equal(emb.weight.detach().numpy()[0], [0.0, 0.0])
    lin.weight.data.copy_(ember.ones(3, 4))
    assert lin.weight.sum().item() == 12.0


@requires_torch
def test_training_with_data_updates_matches_torch():
    """A hand-written training loop using `.data` everywhere gives PyTorch's numbers."""
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((8, 4)), rng.standard_normal((8, 1))
    w0, b0 = rng.standard_normal((4, 1)), rng.standard_normal(1)
    res = []
    for lib in (ember, torch):
        w = lib.tensor(w0, requires_grad=True)
        b = lib.tensor(b0, requires_grad=True)
        xs, ts = lib.tensor(x), lib.tensor(t)
        for _ in range(5):
            loss = ((xs @ w + b - ts) ** 2).mean()
            loss.backward()
            w.data -= 0.1 * w.grad.data
            b.data.sub_(0.1 * b.grad.data)
            w.grad.data.zero_()
            b.grad.zero_()
        res.append((w.detach().numpy().copy(), b.detach().numpy().copy(), loss.item()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
