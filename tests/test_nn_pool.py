"""Pooling (ember/ops/nn_pool.py) and the pooling layers (ember/nn/modules/pooling.py): gradients, PyTorch parity in
float64 and float32 (values, indices, gradients, ties and NaNs), layers, errors."""
import numpy as np
import pytest
from helpers import check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember
import ember.nn as nn
import ember.nn.functional as F

TF = torch.nn.functional if torch is not None else None
DTYPES = [np.float64, np.float32]


def _distinct(*shape, seed=0, dtype=np.float64):
    """Values 0.1 apart in random order: no ties, so finite differences never cross an argmax switch."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.1 - n * 0.05).reshape(shape).astype(dtype)


def _fn(mod, name, kw):
    f = getattr(mod, name)
    return lambda *a: f(*a, **kw)


# ---------------------------------------------------------------------- max_pool2d
MAXPOOL = [
    ((2, 3, 6, 6), dict(kernel_size=2)),
    ((2, 3, 7, 5), dict(kernel_size=2)),  # odd sizes: the last row/column is dropped
    ((1, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1)),  # overlapping windows
    ((1, 2, 6, 7), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 1), dilation=(2, 1))),
    ((1, 2, 7, 6), dict(kernel_size=3, stride=2, ceil_mode=True)),
    ((1, 2, 6, 8), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 0), ceil_mode=True)),
    ((2, 5, 5), dict(kernel_size=2, stride=1)),  # unbatched
    ((1, 1, 9, 9), dict(kernel_size=4, stride=3, dilation=2, padding=2)),
]


@requires_torch
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=1, padding=1)], ids=str)
def test_max_pool2d_ties_pick_the_first_maximum(kw):
    # ReLU outputs: whole windows of zeros; the gradient must go to one entry per window, PyTorch's
    x = np.maximum(rand(2, 3, 6, 6, seed=3), 0).astype(np.float32)
    x[0, 0, :2, :2] = 0.5
    kw = dict(kw, return_indices=True)
    compare_torch(_fn(F, "max_pool2d", kw), _fn(TF, "max_pool2d", kw), x)


@requires_torch
@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)], ids=str)
def test_max_pool2d_nan_as_pytorch(kw):
    x = rand(1, 2, 6, 6, seed=4)
    x[0, 0, 0, 0] = x[0, 0, 1, 0] = x[0, 1, 3, 4] = np.nan  # two NaNs in one window: PyTorch picks the last
    kw = dict(kw, return_indices=True)
    e, i = F.max_pool2d(ember.tensor(x), **kw)
    te, ti = TF.max_pool2d(torch.tensor(x), **kw)
    np.testing.assert_array_equal(e.numpy(), te.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@requires_torch
def test_max_pool2d_noncontiguous_and_no_grad():
    x = noncontig(rand(2, 3, 8, 6, seed=5))
    compare_torch(_fn(F, "max_pool2d", dict(kernel_size=2)), _fn(TF, "max_pool2d", dict(kernel_size=2)), x)
    with ember.no_grad():
        y = F.max_pool2d(ember.tensor(x, requires_grad=True), 2)
    assert not y.requires_grad
    np.testing.assert_array_equal(y.numpy(), TF.max_pool2d(torch.tensor(x), 2).numpy())


def test_max_pool2d_float32_and_integers():
    y = F.max_pool2d(ember.tensor(rand(1, 2, 4, 4, dtype=np.float32), requires_grad=True), 2)
    assert y.dtype == ember.float32
    y.sum().backward()
    xi = ember.tensor(np.arange(32).reshape(1, 2, 4, 4))
    v, i = F.max_pool2d(xi, 2, padding=1, return_indices=True)
    assert v.dtype == ember.int64 and i.dtype == ember.int64
    assert v.numpy()[0, 0, 0, 0] == 0 and v.numpy()[0, 1, -1, -1] == 31


def test_empty_batch():
    x = ember.zeros(0, 2, 6, 6, requires_grad=True)
    for y in (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, 2, 1), F.adaptive_avg_pool2d(x, 4), F.adaptive_max_pool2d(x, 4)):
        assert y.shape[:2] == (0, 2)
        y.sum().backward()
        assert x.grad.shape == x.shape


# ---------------------------------------------------------------------- avg_pool2d
AVGPOOL = [
    ((2, 3, 6, 6), dict(kernel_size=2)),
    ((1, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1)),
    ((1, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
    ((1, 2, 7, 6), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 8, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True, count_include_pad=False)),
    ((1, 2, 6, 5), dict(kernel_size=2, stride=1, padding=1, divisor_override=3)),
    ((2, 5, 5), dict(kernel_size=2)),  # unbatched
]


# ---------------------------------------------------------------------- adaptive pooling
ADAPTIVE = [((2, 3, 6, 6), 3), ((1, 2, 7, 5), (3, 2)), ((1, 2, 5, 7), (1, 1)), ((1, 2, 5, 6), (None, 4)),
            ((2, 4, 3), (5, 7)), ((1, 1, 4, 4), (4, 4))]


@requires_torch
def test_adaptive_max_pool2d_ties():
    x = np.maximum(rand(2, 3, 7, 5, seed=6), 0)
    compare_torch(lambda t: F.adaptive_max_pool2d(t, (3, 2), True), lambda t: TF.adaptive_max_pool2d(t, (3, 2), True), x)


# ---------------------------------------------------------------------- every pooling op: gradients, PyTorch parity
# (op, input shape, keyword arguments)
POOL = ([("max_pool2d", xs, kw) for xs, kw in MAXPOOL] + [("avg_pool2d", xs, kw) for xs, kw in AVGPOOL]
        + [(op, xs, dict(output_size=out)) for op in ("adaptive_avg_pool2d", "adaptive_max_pool2d")
           for xs, out in ADAPTIVE])


@pytest.mark.parametrize("op, xs, kw", POOL, ids=str)
def test_pool_gradcheck(op, xs, kw):
    check_grad(_fn(F, op, kw), _distinct(*xs))  # no ties: a finite difference never crosses a max's switch


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op, xs, kw", POOL, ids=str)
def test_pool_torch(op, xs, kw, dtype):
    compare_torch(_fn(F, op, kw), _fn(TF, op, kw), rand(*xs, dtype=dtype))
    if "max" in op:  # the indices too
        kw = dict(kw, return_indices=True)
        compare_torch(_fn(F, op, kw), _fn(TF, op, kw), rand(*xs, seed=1, dtype=dtype))


# ---------------------------------------------------------------------- layers
LAYERS = [
    ("MaxPool2d", (2,), {}),
    ("MaxPool2d", ((3, 2),), dict(stride=(2, 1), padding=1, dilation=(1, 2), ceil_mode=True)),
    ("MaxPool2d", (3,), dict(stride=2, return_indices=True)),
    ("AvgPool2d", (2,), {}),
    ("AvgPool2d", (3, 2, 1, True, False, None), {}),
    ("AvgPool2d", (2,), dict(stride=1, divisor_override=3)),
    ("AdaptiveAvgPool2d", ((2, None),), {}),
    ("AdaptiveMaxPool2d", (3,), dict(return_indices=True)),
]


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name, args, kw", LAYERS, ids=str)
def test_layer_parity(name, args, kw, dtype):
    m, tm = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert repr(m) == repr(tm)
    assert list(m.state_dict()) == list(tm.state_dict()) == []
    compare_torch(m, tm, rand(2, 3, 7, 6, dtype=dtype))
    compare_torch(m, tm, rand(3, 7, 6, dtype=dtype))  # unbatched


def test_layer_attributes_default_stride():
    m = nn.MaxPool2d((2, 3))
    assert m.kernel_size == m.stride == (2, 3) and m.padding == 0 and m.dilation == 1 and not m.ceil_mode
    a = nn.AvgPool2d(3, stride=1)
    assert a.stride == 1 and a.count_include_pad and a.divisor_override is None


# ---------------------------------------------------------------------- bad inputs
def test_output_too_small():
    with pytest.raises(RuntimeError, match=r"max_pool2d\(\): Given input size \[3, 3\], kernel_size=\[4, 4\].*output "
                                           r"size \[0, 0\] is too small"):
        F.max_pool2d(ember.zeros(1, 1, 3, 3), 4)
    with pytest.raises(RuntimeError, match=r"avg_pool2d\(\).*output size \[0, 0\] is too small"):
        F.avg_pool2d(ember.zeros(1, 1, 3, 3), 4)


def test_pad_more_than_half_the_kernel():
    with pytest.raises(RuntimeError, match=r"pad should be at most half of effective kernel size, but got pad=\[2, 2\], "
                                           r"kernel_size=\[2, 2\] and dilation=\[1, 1\]"):
        F.max_pool2d(ember.zeros(1, 1, 5, 5), 2, padding=2)
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.avg_pool2d(ember.zeros(1, 1, 5, 5), 3, padding=2)


def test_bad_kernel_and_stride():
    with pytest.raises(RuntimeError, match=r"kernel_size must be greater than zero, but got \[0, 0\]"):
        F.max_pool2d(ember.zeros(1, 1, 5, 5), 0)
    with pytest.raises(RuntimeError, match=r"stride must be greater than zero"):
        F.avg_pool2d(ember.zeros(1, 1, 5, 5), 2, stride=0)
    with pytest.raises(RuntimeError, match=r"expected kernel_size to be a single integer value or a list of 2 values"):
        F.max_pool2d(ember.zeros(1, 1, 5, 5), (2, 2, 2))
    with pytest.raises(RuntimeError, match=r"divisor must be not zero"):
        F.avg_pool2d(ember.zeros(1, 1, 5, 5), 2, divisor_override=0)


def test_wrong_rank_names_op_and_layer():
    with pytest.raises(RuntimeError, match=r"max_pool2d\(\): Expected 3D \(unbatched\) or 4D \(batched\).*got input of "
                                           r"size: \[5, 5\]"):
        F.max_pool2d(ember.zeros(5, 5), 2)
    with pytest.raises(RuntimeError, match=r"MaxPool2d\(kernel_size=2, .*expected input of shape \(N, C, H, W\) or "
                                           r"\(C, H, W\), got input of shape \[5, 5\]"):
        nn.MaxPool2d(2)(ember.zeros(5, 5))
    with pytest.raises(RuntimeError, match=r"AdaptiveAvgPool2d\(output_size=2\): expected input of shape"):
        nn.AdaptiveAvgPool2d(2)(ember.zeros(1, 1, 1, 5, 5))


def test_adaptive_bad_output_size():
    with pytest.raises(ValueError, match=r"adaptive_avg_pool2d\(\): output_size must hold non-negative ints"):
        F.adaptive_avg_pool2d(ember.zeros(1, 1, 4, 4), (-1, 2))
    with pytest.raises(ValueError, match=r"output_size must be an int or a pair"):
        F.adaptive_max_pool2d(ember.zeros(1, 1, 4, 4), (1, 2, 3))
    with pytest.raises(RuntimeError, match=r"adaptive_avg_pool2d\(\).*non-zero spatial sizes.*\[1, 1, 0, 3\]"):
        F.adaptive_avg_pool2d(ember.zeros(1, 1, 0, 3), 2)


@requires_torch
def test_max_pool_backward_with_inf_gradient_matches_torch():
    """An inf upstream gradient reaches only its window's argmax (no inf·0 = NaN elsewhere)."""
    x = np.random.default_rng(0).standard_normal((1, 1, 4, 4))
    for k, s in ((2, 2), (3, 1)):
        g = np.ones((1, 1) + ((2, 2) if k == 2 else (2, 2)))
        g[0, 0, 0, 0] = np.inf
        ex = ember.tensor(x, requires_grad=True)
        ember.nn.functional.max_pool2d(ex, k, s).backward(ember.tensor(g))
        tx = torch.tensor(x, requires_grad=True)
        torch.nn.functional.max_pool2d(tx, k, s).backward(torch.tensor(g))
        np.testing.assert_array_equal(ex.grad.numpy(), tx.grad.numpy())


# ---------------------------------------------------------------------- chunks of images (nn_pool internals)
from ember.ops import windows as _windows  # noqa: E402

CHUNKED = [
    ((5, 3, 6, 8), dict(kernel_size=2)),  # windows tile the input: the gradient buffer needs no zeroing
    ((5, 3, 7, 5), dict(kernel_size=2)),  # odd sizes: the last row/column gets no gradient
    ((5, 2, 6, 6), dict(kernel_size=2, padding=1)),  # tiles the padded input
    ((5, 2, 7, 6), dict(kernel_size=3, stride=1, padding=1)),  # overlapping windows
    ((5, 2, 7, 6), dict(kernel_size=3, stride=2, ceil_mode=True)),
]


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs, kw", CHUNKED, ids=str)
def test_max_pool2d_in_chunks_of_images(monkeypatch, xs, kw, dtype):
    """Two images per chunk, the batch no multiple of it: values, indices and gradients equal PyTorch's, with
    ties (ReLU zeros: the first maximum) and NaNs in the last chunk."""
    n, c, h, w = xs
    monkeypatch.setattr(_windows, "_CHUNK_BYTES", 2 * c * (h + 2) * (w + 2) * np.dtype(dtype).itemsize)
    x = np.maximum(rand(*xs, seed=7, dtype=dtype), 0)
    x[-1, 0, 0, :2] = np.nan
    with_idx = dict(kw, return_indices=True)
    compare_torch(_fn(F, "max_pool2d", with_idx), _fn(TF, "max_pool2d", with_idx), x)
    with ember.no_grad():  # the scan without positions
        y = F.max_pool2d(ember.tensor(x), **kw)
    np.testing.assert_array_equal(y.numpy(), TF.max_pool2d(torch.tensor(x), **kw).numpy())


def test_max_pool2d_gradient_in_chunks_equals_one_chunk(monkeypatch):
    """float32 stays float32, and chunking changes nothing."""
    x = rand(7, 2, 8, 6, seed=2, dtype=np.float32)
    g = rand(7, 2, 4, 3, seed=3, dtype=np.float32)

    def run():
        ex = ember.tensor(x, requires_grad=True)
        y = F.max_pool2d(ex, 2)
        y.backward(ember.tensor(g))
        return y.detach().numpy(), ex.grad.numpy()

    y1, g1 = run()
    monkeypatch.setattr(_windows, "_CHUNK_BYTES", 3 * 2 * 8 * 6 * 4)
    y3, g3 = run()
    assert y3.dtype == g3.dtype == np.float32
    np.testing.assert_array_equal(y1, y3)
    np.testing.assert_array_equal(g1, g3)
