"""Numerical edge cases behave like PyTorch: inf/NaN propagation, log(0), division by zero, sqrt at 0, exp
overflow, huge logits in softmax/cross-entropy, float16 accumulation, and the gradients at those points
(ReLU, hardtanh, maximum/minimum and max() at NaN). `detect_anomaly` names the op that made a NaN gradient,
with the forward traceback."""
import math
import warnings

import numpy as np
import pytest
from helpers import requires_torch, torch

import ember

NAN, INF = math.nan, math.inf


def _run(lib, fn, values, dtype):
    """fn(lib, *leaves) and each leaf's gradient after backward of the sum, as float64 arrays."""
    xs = [lib.tensor(v, dtype=getattr(lib, dtype), requires_grad=True) for v in values]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        y = fn(lib, *xs)
        y.sum().backward()
    return np.asarray(y.detach().numpy(), np.float64), [np.asarray(x.grad.numpy(), np.float64) for x in xs]


CASES = [  # (name, fn(lib, *xs), inputs, dtype)
    ("relu at nan", lambda L, x: L.relu(x), [[NAN, -1.0, 0.0, 2.0]], "float32"),
    ("hardtanh at nan", lambda L, x: L.nn.functional.hardtanh(x), [[NAN, 0.5, 2.0, -1.0]], "float32"),
    ("log of 0 and negatives", lambda L, x: L.log(x), [[0.0, 1.0, -1.0]], "float32"),
    ("division by zero", lambda L, x, y: x / y, [[1.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, 2.0]], "float32"),
    ("sqrt at 0", lambda L, x: L.sqrt(x), [[0.0, 4.0]], "float32"),
    ("pow 0.5 at 0", lambda L, x: L.pow(x, 0.5), [[0.0, 4.0]], "float32"),
    ("exp overflow", lambda L, x: L.exp(x), [[100.0, 1000.0]], "float32"),
    ("sigmoid saturation", lambda L, x: L.sigmoid(x), [[1000.0, -1000.0]], "float32"),
    ("tanh of inf and nan", lambda L, x: L.tanh(x), [[INF, -INF, NAN]], "float32"),
    ("softmax of huge logits", lambda L, x: L.softmax(x, 0), [[1e30, 0.0, -1e30]], "float32"),
    ("log_softmax with inf", lambda L, x: L.log_softmax(x, 0), [[INF, 0.0, 1.0]], "float32"),
    ("cross_entropy of huge logits", lambda L, x: L.nn.functional.cross_entropy(x.reshape(1, 3), L.tensor([1])),
     [[1e30, 0.0, -1e30]], "float32"),
    ("cross_entropy of large logits", lambda L, x: L.nn.functional.cross_entropy(x.reshape(1, 3), L.tensor([2])),
     [[1e4, 0.0, -1e4]], "float32"),
    ("logsumexp of -inf", lambda L, x: L.logsumexp(x, 0), [[-INF, -INF]], "float32"),
    ("max() with nan", lambda L, x: x.max(), [[NAN, 1.0]], "float32"),
    ("amax over a dim with nan", lambda L, x: L.amax(x.reshape(2, 2), 1), [[NAN, 1.0, 3.0, 2.0]], "float32"),
    ("maximum with nan", lambda L, x, y: L.maximum(x, y), [[NAN, 2.0, 1.0], [0.0, NAN, 1.0]], "float32"),
    ("minimum with nan", lambda L, x, y: L.minimum(x, y), [[NAN, 2.0, 1.0], [0.0, NAN, 1.0]], "float32"),
    ("sum of inf and -inf", lambda L, x: x.sum(), [[INF, -INF]], "float32"),
    ("norm at 0", lambda L, x: L.norm(x), [[0.0, 0.0]], "float32"),
    ("prod with a 0", lambda L, x: x.prod(), [[0.0, 2.0, 3.0]], "float32"),
    ("clamp of nan", lambda L, x: L.clamp(x, 0, 1), [[NAN, 2.0, 0.5]], "float32"),
    ("layer_norm of a constant", lambda L, x: L.nn.functional.layer_norm(x, (2,)), [[1.0, 1.0]], "float32"),
    ("float16 exp", lambda L, x: L.exp(x) * 2, [[10.0, 12.0]], "float16"),
    ("float16 mean past 65504", lambda L, x: x.mean(), [[60000.0, 60000.0]], "float16"),
    ("float16 sum past 65504", lambda L, x: x.sum(), [[60000.0, 60000.0, -60000.0]], "float16"),
    ("float16 softmax", lambda L, x: L.softmax(x, 0), [[10.0, 12.0, 60000.0]], "float16"),
]


@requires_torch
@pytest.mark.parametrize("name,fn,values,dtype", CASES, ids=[c[0] for c in CASES])
def test_edge_case_matches_pytorch(name, fn, values, dtype):
    y, grads = _run(ember, fn, values, dtype)
    ty, tgrads = _run(torch, fn, values, dtype)
    tol = dict(rtol=1e-3, atol=1e-3) if dtype == "float16" else dict(rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(y, ty, equal_nan=True, err_msg=f"{name}: forward", **tol)
    for i, (g, tg) in enumerate(zip(grads, tgrads)):
        np.testing.assert_allclose(g, tg, equal_nan=True, err_msg=f"{name}: gradient of input {i}", **tol)


def test_float16_reductions_accumulate_in_float32():
    x = ember.tensor(np.full(4096, 30.0, np.float16))
    assert x.sum().dtype == ember.float16 and x.mean().dtype == ember.float16
    assert float(x.mean()) == 30.0  # the float16 partial sums would pass 65504 after 2185 terms
    assert float(ember.tensor(np.array([60000, 60000, -60000], np.float16)).sum()) == 60000.0


def test_relu_gradient_passes_nan_and_stops_at_zero():
    x = ember.tensor([NAN, 0.0, -0.0, -2.0, 3.0], requires_grad=True)
    ember.relu(x).backward(ember.ones(5))
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 0.0, 0.0, 1.0])


def test_detect_anomaly_names_the_op_and_its_forward_line():
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    with ember.autograd.detect_anomaly():
        y = ember.sqrt(x)  # d sqrt/dx at 0 is inf, and inf * 0 below is NaN
        loss = (y * 0).sum()
        with pytest.raises(RuntimeError, match=r"(?s)SqrtBackward.*nan.*test_numerics\.py.*ember\.sqrt\(x\)"):
            loss.backward()


def test_without_detect_anomaly_nan_gradients_are_returned():
    x = ember.tensor([0.0, 1.0], requires_grad=True)
    (ember.sqrt(x) * 0).sum().backward()
    assert np.isnan(x.grad.numpy()[0]) and x.grad.numpy()[1] == 0.0
