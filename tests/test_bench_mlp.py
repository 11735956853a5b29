"""The hand-written NumPy W1 step in benchmarks/ computes exactly ember's loss, gradients and SGD-momentum update."""
from __future__ import annotations

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from benchmarks._harness import IMPLS
from benchmarks.mlp import LR, MOMENTUM, NumpyMLP, cases, ember_model, step_flops
from helpers import need_torch


def _data(n: int = 16):
    rng = np.random.default_rng(3)
    return rng.standard_normal((n, 784)).astype(np.float32), rng.integers(0, 10, n)


def test_numpy_gradients_equal_ember_gradients():
    ember.manual_seed(0)
    model = ember_model(64)
    ref = NumpyMLP.from_ember(model)
    x, y = _data()
    loss = F.cross_entropy(model(ember.from_numpy(x)), ember.from_numpy(y))
    loss.backward()
    np.testing.assert_allclose(ref.gradients(x, y), loss.item(), rtol=1e-5)
    for (name, p), g in zip(model.named_parameters(), ref.g):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=2e-3, atol=2e-6, err_msg=name)


def test_numpy_momentum_steps_track_ember():
    ember.manual_seed(1)
    model = ember_model(64)
    ref = NumpyMLP.from_ember(model)
    opt = ember.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    x, y = _data()
    start = [p.detach().numpy().copy() for p in model.parameters()]
    for _ in range(4):  # the first step initialises the momentum buffer; later ones use it
        opt.zero_grad()
        F.cross_entropy(model(ember.from_numpy(x)), ember.from_numpy(y)).backward()
        opt.step()
        ref.step(x, y)
    for (name, p), q, p0 in zip(model.named_parameters(), ref.p, start):
        assert not np.allclose(q, p0), name  # the steps moved the weights
        np.testing.assert_allclose(q, p.detach().numpy(), rtol=1e-4, atol=1e-6, err_msg=name)


def test_step_flops_counts_the_products():
    # forward 3 layers + weight grads 3 layers + input grads of layers 2 and 3, at 2 flops per multiply-add
    b, w = 4, 8
    assert step_flops(b, w) == 2 * b * (2 * (784 * w + w * w + w * 10) + w * w + w * 10)


@pytest.mark.parametrize("use_torch", [False, True])
def test_cases_run_and_train(use_torch):
    if use_torch:
        need_torch()
    steps = cases(batch=8, width=32, impls=IMPLS if use_torch else ("ember", "numpy"))
    assert set(steps) == ({"ember", "numpy", "pytorch"} if use_torch else {"ember", "numpy"})
    for name, step in steps.items():
        first = float(step())
        for _ in range(20):
            last = float(step())
        assert last < first, name  # a fixed batch: every implementation fits it
