"""The convolution algorithms behind conv2d (ember/ops/nn_conv.py `algorithm`): im2col (a GEMM per image), the
batch-folded GEMM (small maps) and Winograd's F(2×2, 3×3) (ember/ops/winograd.py) are each chosen for the
shapes they serve, and each, forced onto every shape it can take, gives the same values and gradients (every
order) as PyTorch. Forcing them keeps gradcheck cheap (small shapes); the thresholds themselves are checked on
the layer shapes they were measured on."""
import time

import numpy as np
import pytest
from helpers import check_grad, compare_torch, rand, requires_torch, torch
from test_nn_conv import CONV2D

from benchmarks.conv_algos import FORCE  # nn_conv's thresholds that make each algorithm run wherever it can

import ember
import ember.nn.functional as F
from ember.ops import nn_conv, winograd
from ember.ops.windows import Win

TF = torch.nn.functional if torch is not None else None
# (input, weight, bias, padding): even and odd output sizes (a cut last tile), asymmetric 'same'-style
# padding, no padding, batch 1, a single output row
CASES = [
    ((2, 3, 6, 6), (4, 3, 3, 3), True, 1),
    ((1, 2, 5, 7), (3, 2, 3, 3), False, 1),
    ((2, 2, 6, 5), (2, 2, 3, 3), True, 0),
    ((1, 3, 4, 4), (2, 3, 3, 3), True, (2, 0)),
    ((1, 1, 3, 8), (2, 1, 3, 3), True, 0),
]




def force(monkeypatch, algo: str) -> None:
    for name, value in FORCE[algo].items():
        monkeypatch.setattr(nn_conv, name, value)


@pytest.fixture
def everywhere(monkeypatch):
    """Winograd for every 3×3 stride-1 convolution, whatever its channel counts."""
    force(monkeypatch, "winograd")


def _win(p) -> Win:
    p = (p, p) if isinstance(p, int) else p
    return Win((3, 3), (1, 1), (1, 1), ((p[0], p[0]), (p[1], p[1])))


def test_chooses_per_shape():
    x = np.zeros((2, 128, 16, 16), np.float32)
    s2 = Win((3, 3), (2, 2), (1, 1), ((1, 1), (1, 1)))
    one = Win((1, 1), (1, 1), (1, 1), ((0, 0), (0, 0)))
    assert nn_conv.algorithm(x, (128, 128, 3, 3), _win(1), 1) == "winograd"
    assert nn_conv.algorithm(x[:, :16], (32, 16, 3, 3), _win(1), 1) == "im2col"  # W3's conv2: too few channels
    assert nn_conv.algorithm(x[:, :64], (64, 64, 3, 3), _win(1), 1) == "im2col"  # ResNet's first stage
    assert nn_conv.algorithm(x, (64, 128, 3, 3), _win(1), 1) == "im2col"
    assert nn_conv.algorithm(x, (128, 64, 3, 3), _win(1), 2) == "im2col"  # grouped
    assert nn_conv.algorithm(x, (128, 128, 1, 1), one, 1) == "im2col"
    assert nn_conv.algorithm(x.astype(np.float16), (128, 128, 3, 3), _win(1), 1) == "im2col"
    assert nn_conv.algorithm(x, (128, 128, 3, 3), _win(1), 1, ohw=(15, 16)) == "im2col"  # fewer windows than it has
    assert nn_conv.algorithm(x, (64, 64, 3, 3), s2, 1) == "folded"  # onto 8×8: folded
    assert nn_conv.algorithm(x[:, :, :8, :8], (64, 64, 1, 1), one, 1) == "folded"
    assert nn_conv.algorithm(x[:, :, :8, :8], (64, 64, 3, 3), s2, 2) == "im2col"  # grouped: per image
    assert nn_conv.algorithm(x[:1, :, :8, :8], (128, 128, 3, 3), _win(1), 1) == "folded"  # 16 tiles: too few


@pytest.mark.parametrize("algo", list(FORCE))
@pytest.mark.parametrize("case", CONV2D, ids=str)
def test_every_algorithm_on_every_conv2d_case(case, algo, monkeypatch):
    """tests/test_nn_conv.py's conv2d cases (strides, dilations, groups, 'same', unbatched, 1×1) through each
    algorithm: float64 gradients to the second order, and PyTorch parity in float32 and float64."""
    force(monkeypatch, algo)
    xs, ws, bias, kw = case
    arrays = [rand(*xs, seed=1), rand(*ws, seed=2)] + ([rand(ws[0], seed=3)] if bias else [])
    check_grad(lambda *a: F.conv2d(*a, **kw), *arrays)
    if torch is not None:
        for dtype in (np.float64, np.float32):
            compare_torch(lambda *a: F.conv2d(*a, **kw), lambda *a: TF.conv2d(*a, **kw),
                          *[a.astype(dtype) for a in arrays])


@pytest.mark.parametrize("shape", [(4, 64, 8, 8, 64), (2, 64, 7, 9, 72), (3, 80, 5, 5, 65)])
def test_same_as_im2col_at_real_channel_counts(shape, monkeypatch):
    """Float32 layer shapes: Winograd's values and weight gradient equal im2col's to float32 rounding
    (its transforms have entries 0, ±½, ±1: measured at 1-2× im2col's own error against float64)."""
    force(monkeypatch, "winograd")  # (these batches have fewer tiles than the default takes Winograd for)
    n, c, h, w, o = shape
    x, wt, b = rand(n, c, h, w, seed=1, dtype=np.float32), rand(o, c, 3, 3, seed=2, dtype=np.float32), rand(o, seed=3)
    b = b.astype(np.float32)
    win = _win(1)
    exact = nn_conv._conv(x.astype(np.float64), wt.astype(np.float64), b.astype(np.float64), win, 1)[0]
    g = rand(*exact.shape, seed=4, dtype=np.float32)
    exact_dw = nn_conv._conv_weight_grad(x.astype(np.float64), g.astype(np.float64), win, 1, wt.shape)
    y, kept = nn_conv._conv(x, wt, b, win, 1, keep=True)
    assert y.dtype == np.float32 and kept[0] == "winograd"  # Winograd ran, and kept its transformed input
    dw = nn_conv._conv_weight_grad(x, g, win, 1, wt.shape, kept)
    assert np.array_equal(dw, nn_conv._conv_weight_grad(x, g, win, 1, wt.shape))  # kept = recomputed
    force(monkeypatch, "im2col")
    y0 = nn_conv._conv(x, wt, b, win, 1)[0]
    dw0 = nn_conv._conv_weight_grad(x, g, win, 1, wt.shape)
    scale = np.abs(exact).max()
    assert np.abs(y - exact).max() <= 4 * max(np.abs(y0 - exact).max(), 1e-7 * scale)
    assert np.abs(dw - exact_dw).max() <= 4 * max(np.abs(dw0 - exact_dw).max(), 1e-7 * np.abs(exact_dw).max())


def test_float64_is_exact_to_rounding(everywhere):
    x, w = rand(2, 65, 6, 7, seed=1), rand(67, 65, 3, 3, seed=2)
    y = F.conv2d(ember.tensor(x), ember.tensor(w), padding=1).numpy()
    with pytest.MonkeyPatch.context() as mp:
        force(mp, "im2col")
        y0 = F.conv2d(ember.tensor(x), ember.tensor(w), padding=1).numpy()
    np.testing.assert_allclose(y, y0, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradients(case, everywhere):
    """Through Winograd: the input gradient (stride 1: a Winograd convolution again), the weight gradient
    (its adjoint pipeline) and the bias, to the second order."""
    xs, ws, bias, p = case
    arrays = [rand(*xs, seed=1), rand(*ws, seed=2)] + ([rand(ws[0], seed=3)] if bias else [])
    assert nn_conv.algorithm(arrays[0], ws, _win(p), 1) == "winograd"
    check_grad(lambda *a: F.conv2d(*a, padding=p), *arrays)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_parity(case, dtype, everywhere):
    xs, ws, bias, p = case
    arrays = [rand(*xs, seed=1, dtype=dtype), rand(*ws, seed=2, dtype=dtype)] + (
        [rand(ws[0], seed=3, dtype=dtype)] if bias else [])
    compare_torch(lambda *a: F.conv2d(*a, padding=p), lambda *a: TF.conv2d(*a, padding=p), *arrays)


@requires_torch
def test_parity_at_a_resnet_shape():
    """A ResNet-18 stage-2 convolution as it runs by default (Winograd), forward and both gradients, float32."""
    arrays = [rand(8, 128, 8, 8, seed=1, dtype=np.float32), rand(128, 128, 3, 3, seed=2, dtype=np.float32) * 0.05]
    assert nn_conv.algorithm(arrays[0], arrays[1].shape, _win(1), 1) == "winograd"
    compare_torch(lambda x, w: F.conv2d(x, w, padding=1), lambda x, w: TF.conv2d(x, w, padding=1), *arrays,
                  rtol=1e-4, atol=1e-4)


def test_tiles():
    assert winograd.tiles((6, 7), ((1, 1), (1, 1))) == ((6, 7), (3, 4))
    assert winograd.tiles((3, 3), ((0, 0), (0, 0))) == ((1, 1), (1, 1))


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_inf_and_nan_reach_only_their_windows(bad, everywhere):
    """Winograd mixes a tile's entries (inf - inf is NaN), so inputs holding inf or NaN take im2col: the
    forward and both gradients are then exactly what the direct sum gives (PyTorch's values)."""
    x, w = rand(2, 64, 8, 8, seed=1, dtype=np.float32), rand(64, 64, 3, 3, seed=2, dtype=np.float32)
    x[0, 3, 4, 4] = bad
    xt, wt = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    y = F.conv2d(xt, wt, padding=1)
    yn = y.detach().numpy()
    assert np.isfinite(yn[1]).all() and np.isfinite(yn[0, :, :3]).all() and np.isfinite(yn[0, :, 6:]).all()
    assert not np.isfinite(yn[0, :, 3:6, 3:6]).any()
    g = rand(*yn.shape, seed=3, dtype=np.float32)
    g[1, 2, 5, 5] = bad  # and an inf or NaN in the output gradient: dw's Winograd falls back too
    y.backward(ember.tensor(g))
    win = _win(1)
    with pytest.MonkeyPatch.context() as mp:
        force(mp, "im2col")
        np.testing.assert_array_equal(yn, nn_conv._conv(x, w, None, win, 1)[0])
        np.testing.assert_array_equal(wt.grad.numpy(), nn_conv._conv_weight_grad(x, g, win, 1, w.shape))
        np.testing.assert_array_equal(xt.grad.numpy(), nn_conv.conv_transpose_array(g, w, win, 1, (8, 8)))


# ---------------------------------------------------------------------- choosing by measurement (cudnn.benchmark)
@pytest.fixture
def benchmarking(monkeypatch):
    """`ember.backends.cudnn.benchmark = True` with an empty cache of measured choices."""
    monkeypatch.setattr(ember.backends.cudnn, "benchmark", True)
    monkeypatch.setattr(nn_conv, "_TUNED", {})


def test_benchmark_times_every_candidate_once_and_keeps_the_fastest(benchmarking, monkeypatch):
    """The first forward of a shape times each algorithm that can run (twice) and caches the fastest; later calls
    reuse it; the input gradient (a convolution of its own) is tuned at its first use; the weight gradient follows
    its forward. Here im2col and Winograd are slowed down, so the folded GEMM must win where the measured rule
    picks im2col (a 12×12 map: 144 pixels)."""
    runs = []
    conv_by = nn_conv._conv_by

    def slowed(algo, *a):
        runs.append(algo)
        if algo != "folded":
            time.sleep(0.02)
        return conv_by(algo, *a)

    monkeypatch.setattr(nn_conv, "_conv_by", slowed)
    x = rand(2, 8, 12, 12, seed=1)
    w, b = rand(6, 8, 3, 3, seed=2), rand(6, seed=3)
    assert nn_conv.algorithm(x, w.shape, _win(1), 1) == "im2col"  # the rule's choice (nothing measured yet)
    xt, wt = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
    y = F.conv2d(xt, wt, ember.tensor(b), padding=1)
    assert sorted(runs[:6]) == ["folded"] * 2 + ["im2col"] * 2 + ["winograd"] * 2 and runs[6:] == ["folded"]
    assert list(nn_conv._TUNED.values()) == ["folded"]
    y.backward(ember.tensor(rand(*y.shape, seed=4)))
    assert len(nn_conv._TUNED) == 2  # the input gradient's convolution (6 -> 8 channels, flipped kernel): tuned too
    runs.clear()
    y2 = F.conv2d(xt, wt, ember.tensor(b), padding=1)
    assert runs == ["folded"]  # cached
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ember.backends.cudnn, "benchmark", False)
        xr, wr = ember.tensor(x, requires_grad=True), ember.tensor(w, requires_grad=True)
        yr = F.conv2d(xr, wr, ember.tensor(b), padding=1)
        yr.backward(ember.tensor(rand(*y.shape, seed=4)))
    np.testing.assert_allclose(y2.detach().numpy(), yr.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(wt.grad.numpy(), wr.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("how", ["cudnn.deterministic", "use_deterministic_algorithms"])
def test_benchmark_is_off_when_determinism_is_asked_for(benchmarking, monkeypatch, how):
    if how == "cudnn.deterministic":
        monkeypatch.setattr(ember.backends.cudnn, "deterministic", True)
    else:
        ember.use_deterministic_algorithms(True)
    try:
        F.conv2d(ember.tensor(rand(2, 8, 12, 12, seed=1)), ember.tensor(rand(8, 8, 3, 3, seed=2)), padding=1)
    finally:
        ember.use_deterministic_algorithms(False)
    assert nn_conv._TUNED == {}


def test_benchmark_with_real_timings_gives_the_same_values(benchmarking):
    x, w = rand(4, 16, 10, 10, seed=1, dtype=np.float32), rand(16, 16, 3, 3, seed=2, dtype=np.float32)
    y = F.conv2d(ember.tensor(x), ember.tensor(w), padding=1).numpy()
    (choice,) = nn_conv._TUNED.values()
    assert choice in ("im2col", "folded", "winograd")
    exact = nn_conv._conv_by("im2col", x.astype(np.float64), w.astype(np.float64), None, _win(1), 1, False, None)[0]
    np.testing.assert_allclose(y, exact, rtol=1e-4, atol=1e-4)
