"""The hand-written NumPy ResMLP step in benchmarks/ computes exactly ember's gradients and Adam update."""
from __future__ import annotations

import numpy as np

import ember
import ember.nn.functional as F
from benchmarks.resmlp import NumpyResMLP, ember_model


def _data(n: int = 16):
    rng = np.random.default_rng(3)
    return rng.standard_normal((n, 784)).astype(np.float32), rng.integers(0, 10, n)


def test_numpy_gradients_equal_ember_gradients():
    ember.manual_seed(0)
    model = ember_model(p_drop=0.0)
    ref = NumpyResMLP.from_ember(model, p_drop=0.0)
    x, y = _data()
    loss = F.cross_entropy(model(ember.from_numpy(x)), ember.from_numpy(y))
    loss.backward()
    np_loss = ref.gradients(x, y)
    np.testing.assert_allclose(np_loss, loss.item(), rtol=1e-5)
    for (name, p), g in zip(model.named_parameters(), ref.g):
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=2e-3, atol=2e-6, err_msg=name)


def test_numpy_adam_steps_track_ember():
    ember.manual_seed(1)
    model = ember_model(p_drop=0.0)
    ref = NumpyResMLP.from_ember(model, p_drop=0.0)
    opt = ember.optim.Adam(model.parameters(), lr=1e-3)
    x, y = _data()
    for _ in range(3):
        opt.zero_grad()
        F.cross_entropy(model(ember.from_numpy(x)), ember.from_numpy(y)).backward()
        opt.step()
        ref.step(x, y)
    for (name, p), q in zip(model.named_parameters(), ref.p):
        np.testing.assert_allclose(q, p.detach().numpy(), rtol=1e-3, atol=1e-5, err_msg=name)


def test_numpy_dropout_path_runs_and_scales():
    ember.manual_seed(2)
    model = ember_model()
    ref = NumpyResMLP.from_ember(model, p_drop=0.5)
    x, y = _data()
    masks = [np.ones((16, 50), bool)] * 3
    no_drop = NumpyResMLP.from_ember(model, p_drop=0.0)
    assert np.isfinite(ref.gradients(x, y))
    # all-ones masks with p=0.5 double the bottleneck activations: a different loss from p=0
    assert ref.gradients(x, y, masks) != no_drop.gradients(x, y)
