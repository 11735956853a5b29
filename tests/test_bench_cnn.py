"""The hand-written NumPy W3 CNN in benchmarks/cnn.py computes exactly ember's loss, gradients,
SGD update and logits, and the benchmark cases run."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from benchmarks._harness import IMPLS
from benchmarks.cnn import LR, NumpyCNN, ember_model, infer_cases, train_cases
from helpers import need_torch


def _data(n: int = 8, seed: int = 3):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 1, 28, 28)).astype(np.float32), rng.integers(0, 10, n)


def _ember_grads(model, x, y) -> float:
    model.zero_grad()
    loss = F.cross_entropy(model(ember.from_numpy(x)), ember.from_numpy(y))
    loss.backward()
    return loss.item()


def _assert_grads_match(model, ref: NumpyCNN, x, y) -> None:
    loss = _ember_grads(model, x, y)
    np.testing.assert_allclose(ref.gradients(x, y), loss, rtol=1e-5)
    names = [name for name, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "3.weight", "3.bias", "7.weight", "7.bias", "9.weight", "9.bias"]
    for (name, p), g in zip(model.named_parameters(), ref.g):
        assert g.dtype == np.float32 and g.shape == tuple(p.shape), name
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=2e-3, atol=2e-6, err_msg=name)


def test_numpy_gradients_equal_ember_gradients():
    model = ember_model(0)
    ref = NumpyCNN.from_ember(model)
    x, y = _data()
    _assert_grads_match(model, ref, x, y)
    # a batch larger than the im2col chunks and no multiple of them, in buffers of its own
    x2, y2 = _data(70, seed=4)
    _assert_grads_match(model, ref, x2, y2)
    # buffers are reused across calls: a repeat on other data must not see the last call's state
    _assert_grads_match(model, ref, *_data(seed=5))


def test_max_pool_ties_route_like_ember():
    """Small dyadic inputs and conv weights make the convolutions exact and full of tied maxima;
    the gradient must go to the first maximum of each window in row-major order, as in ember."""
    model = ember_model(1)
    rng = np.random.default_rng(5)
    with ember.no_grad():
        for name in ("0", "3"):
            conv = model[int(name)]
            conv.weight.copy_(ember.from_numpy(rng.integers(-2, 3, tuple(conv.weight.shape)).astype(np.float32) / 4))
            conv.bias.copy_(ember.from_numpy(rng.integers(-1, 3, tuple(conv.bias.shape)).astype(np.float32) / 4))
    ref = NumpyCNN.from_ember(model)
    x = rng.integers(-1, 2, (6, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, 6)
    _assert_grads_match(model, ref, x, y)
    # the data must really contain ties in windows whose maximum survives the ReLU
    with ember.no_grad():
        z1 = model[0](ember.from_numpy(x)).numpy()
        z2 = model[3](model[2](model[1](ember.from_numpy(z1)))).numpy()
    for z in (z1, z2):
        n, c, h, w = z.shape
        win = z.reshape(n, c, h // 2, 2, w // 2, 2)
        top = win.max(axis=(3, 5), keepdims=True)
        tied = ((win == top).sum(axis=(3, 5)) > 1) & (top[:, :, :, 0, :, 0] > 0)
        assert tied.sum() > 50


def test_numpy_sgd_steps_track_ember():
    model = ember_model(2)
    ref = NumpyCNN.from_ember(model)
    opt = ember.optim.SGD(model.parameters(), lr=LR)
    x, y = _data()
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(ember.from_numpy(x)), ember.from_numpy(y)).backward()
        opt.step()
        ref.step(x, y)
    for (name, p), q in zip(model.named_parameters(), ref.p):
        np.testing.assert_allclose(q, p.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    assert not np.allclose(ref.p[6], ember_model(2)[9].weight.detach().numpy())  # the steps moved it


@pytest.mark.parametrize("n", [5, 70])  # 70: more images than one im2col chunk, and no multiple of it
def test_predict_equals_ember_forward(n):
    model = ember_model(3)
    ref = NumpyCNN.from_ember(model)
    x, _ = _data(n)
    with ember.no_grad():
        want = model(ember.from_numpy(x)).numpy()
    got = ref.predict(x)
    assert got.dtype == np.float32 and got.shape == (n, 10)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make", [train_cases, infer_cases])
@pytest.mark.parametrize("use_torch", [False, True])
def test_cases_run_from_the_same_weights(make, use_torch):
    if use_torch:
        need_torch()
    impls = IMPLS if use_torch else ("ember", "numpy")
    cases = make(batch=4, impls=impls)
    assert list(cases) == list(impls)
    assert list(make(batch=4, impls=("numpy",))) == ["numpy"]
    out = {k: fn() for k, fn in cases.items()}
    as_np = {k: np.asarray(v if isinstance(v, (float, np.ndarray)) else v.numpy()) for k, v in out.items()}
    if make is infer_cases:  # the same weights and data: the same logits
        for k, v in as_np.items():
            assert v.shape == (4, 10), k
            np.testing.assert_allclose(v, as_np["ember"], rtol=1e-4, atol=1e-5, err_msg=k)
    else:  # the first step's loss comes before any update
        for k, v in as_np.items():
            np.testing.assert_allclose(float(v), float(as_np["ember"]), rtol=1e-5, err_msg=k)
        assert float(cases["numpy"]()) < float(as_np["numpy"])  # one SGD step on the same batch lowers the loss
