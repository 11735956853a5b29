"""The numba CPU kernels of the optimizer updates (ember/backend/cpu_kernels.py) against their ufunc
references in ember/backend/kernels.py: bit for bit, in float32 and float64, every branch."""
from __future__ import annotations

import numpy as np
import pytest

from ember.backend import cpu_kernels, kernels

pytestmark = pytest.mark.skipif(not cpu_kernels.enabled(), reason="numba is not installed (the compile extra)")

N = cpu_kernels.MIN_SIZE + 37


def _arrays(dtype, k, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(N).astype(dtype) for _ in range(k)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("first", [False, True])
@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("dampening", [0.0, 0.25])
def test_sgd_momentum_matches_reference_bitwise(dtype, first, nesterov, dampening):
    p, d, b = _arrays(dtype, 3)
    p2, b2 = p.copy(), b.copy()
    assert cpu_kernels.sgd_momentum(p, d, b, 0.9, dampening, -0.01, first, nesterov)
    kernels.sgd_momentum_reference(p2, d, b2, 0.9, dampening, -0.01, first, nesterov, np.empty_like(p2))
    np.testing.assert_array_equal(p, p2)
    np.testing.assert_array_equal(b, b2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("w1", [0.1, 0.7])  # the two rounding forms of lerp
def test_adam_matches_reference_bitwise(dtype, amsgrad, w1):
    p, d, m, v = _arrays(dtype, 4, 1)
    v = np.abs(v)
    vmax = np.abs(_arrays(dtype, 1, 2)[0]) if amsgrad else None
    ref = [a.copy() if a is not None else None for a in (p, m, v, vmax)]
    args = (w1, 0.999, (1 - 0.999 ** 3) ** 0.5, 1e-8, -0.001 / (1 - 0.9 ** 3))
    assert cpu_kernels.adam(p, d, m, v, vmax, *args)
    kernels.adam_reference(ref[0], d, ref[1], ref[2], ref[3], *args, np.empty_like(p))
    for a, b in zip((p, m, v, vmax), ref):
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_only_replays_use_the_kernels(monkeypatch):
    """Eager steps keep the ufuncs (numba's import and loading cost a short run more than it saves)."""
    assert not cpu_kernels.usable(np.zeros(N, np.float32))
    monkeypatch.setattr(cpu_kernels, "active", 1)
    assert cpu_kernels.usable(np.zeros(N, np.float32))


def test_small_or_strided_arrays_use_the_reference(monkeypatch):
    monkeypatch.setattr(cpu_kernels, "active", 1)
    small = np.zeros(16, np.float32)
    assert not cpu_kernels.usable(small)
    strided = np.zeros(2 * N, np.float32)[::2]
    assert not cpu_kernels.usable(strided)
    assert not cpu_kernels.usable(np.zeros(N, np.float16))


def test_optimizer_step_uses_the_kernel_and_equals_the_reference(monkeypatch):
    """A whole SGD/Adam step with the kernels equals one with them disabled, bit for bit."""
    import ember
    import ember.nn as nn
    results = []
    monkeypatch.setattr(cpu_kernels, "active", 1)
    for on in (True, False):
        monkeypatch.setitem(cpu_kernels._state, "ok", on)
        ember.manual_seed(0)
        m = nn.Linear(300, 200)
        for opt in (ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), ember.optim.Adam(m.parameters())):
            for _ in range(3):
                opt.zero_grad()
                m(ember.ones(4, 300)).square().sum().backward()
                opt.step()
        results.append(m.weight.detach().numpy().copy())
    np.testing.assert_array_equal(results[0], results[1])


def test_nan_and_inf_propagate_as_in_the_reference():
    """A NaN or inf gradient (a diverged step) gives the ufuncs' result, not an exception or another value."""
    p, d, m, v = _arrays(np.float32, 4, 3)
    v, vmax = np.abs(v), np.abs(_arrays(np.float32, 1, 4)[0])
    d[:5] = [np.nan, np.inf, -np.inf, 0.0, np.nan]
    vmax[4] = np.nan
    ref = [a.copy() for a in (p, m, v, vmax)]
    args = (0.1, 0.999, 0.5, 0.0, -0.01)  # eps 0: a zero denominator where v is 0
    assert cpu_kernels.adam(p, d, m, v, vmax, *args)
    kernels.adam_reference(ref[0], d, ref[1], ref[2], ref[3], *args, np.empty_like(p))
    for a, b in zip((p, m, v, vmax), ref):
        np.testing.assert_array_equal(a, b)


def test_max_autotune_replays_use_the_kernels_and_default_does_not(monkeypatch):
    """mode="max-autotune" runs the optimizer's update with the numba kernel in replays; the default mode
    (no numba import, no extra memory) keeps the ufuncs. Both give the same parameters."""
    import ember
    import ember.nn as nn
    calls = []
    real = cpu_kernels.sgd_momentum
    monkeypatch.setattr(cpu_kernels, "sgd_momentum", lambda *a: calls.append(1) or real(*a))
    weights = []
    for mode in ("default", "max-autotune"):
        ember.manual_seed(0)
        m = nn.Linear(300, 200)
        opt = ember.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        x = ember.ones(4, 300)

        def step():
            opt.zero_grad()
            m(x).square().sum().backward()
            opt.step()

        c = ember.compile(step, mode=mode)
        before = len(calls)
        for _ in range(3):
            c()
        assert (len(calls) > before) is (mode == "max-autotune"), mode
        weights.append(m.weight.detach().numpy().copy())
    np.testing.assert_array_equal(weights[0], weights[1])
