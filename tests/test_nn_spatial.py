"""The spatial ops beyond 2-D (ember/ops/nn_spatial.py, nn_interpolate.py, nn_fold.py) and their layers
(ember/nn/modules/spatial.py): 1-D/3-D, adaptive, power-average and fractional pooling, max unpooling, conv3d and
conv_transpose3d, the pixel/channel shuffles, interpolate in every mode, grid_sample, affine_grid, the padding
layers, BatchNorm3d, Upsample, Fold/Unfold.

PyTorch parity of values, indices and gradients (random cotangent, float64 and float32), finite-difference checks
(float64, double backward where smooth), reprs, and PyTorch's exception types for bad input. Each case is a
function of the library module (ember or torch) and the input tensors, so the same code runs on both.
"""
import warnings

import numpy as np
import pytest
from helpers import DEVICE, check_grad, compare_torch, host, noncontig, rand, raises_like_torch, requires_torch, torch

import ember
import ember.nn as nn

DTYPES = [np.float64, np.float32]


def _distinct(*shape, seed=0):
    """Values 0.1 apart in random order: no ties, so finite differences never cross an argmax switch."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.1 - n * 0.05).reshape(shape)


def _positive(*shape, seed=0):
    return rand(*shape, seed=seed, low=0.2, high=1.5)


def _F(m):
    return m.nn.functional


def _parity(fn, arrays, dtype, **tol):
    arrays = [a.astype(dtype) if a.dtype.kind == "f" else a for a in arrays]
    compare_torch(lambda *t: fn(ember, *t), lambda *t: fn(torch, *t), *arrays, **tol)


# ---------------------------------------------------------------------- pooling
SAMPLES = np.random.default_rng(7).uniform(size=(2, 3, 2))


def _samples(m, x, rows: int = 2):
    """fractional_max_pool2d's _random_samples for x (the fixed SAMPLES, x's dtype and device)."""
    return m.tensor(SAMPLES[:rows], dtype=x.dtype, device=x.device)

# name -> (input arrays, fn(m, *tensors)); the inputs have no ties, so every case is differentiable
POOL = {
    "avg_pool1d": ([rand(2, 3, 9)], lambda m, x: _F(m).avg_pool1d(x, 3)),
    "avg_pool1d_pad_ceil_exclude": ([rand(2, 3, 9)], lambda m, x: _F(m).avg_pool1d(
        x, 3, 2, 1, ceil_mode=True, count_include_pad=False)),
    "avg_pool1d_unbatched_overlap": ([rand(3, 8)], lambda m, x: _F(m).avg_pool1d(x, 2, 1, 1)),
    "avg_pool3d": ([rand(2, 2, 4, 5, 6)], lambda m, x: _F(m).avg_pool3d(x, 2)),
    "avg_pool3d_ceil_exclude": ([rand(1, 2, 5, 6, 7)], lambda m, x: _F(m).avg_pool3d(
        x, (2, 3, 2), (1, 2, 3), (1, 1, 0), ceil_mode=True, count_include_pad=False)),
    "avg_pool3d_divisor_unbatched": ([rand(2, 4, 4, 5)], lambda m, x: _F(m).avg_pool3d(
        x, 2, 1, 1, divisor_override=3)),
    "avg_pool3d_ceil_include": ([rand(1, 1, 5, 5, 5)], lambda m, x: _F(m).avg_pool3d(x, 3, 2, 1, ceil_mode=True)),
    "max_pool1d": ([_distinct(2, 3, 9)], lambda m, x: _F(m).max_pool1d(x, 3)),
    "max_pool1d_indices": ([_distinct(2, 3, 11)], lambda m, x: _F(m).max_pool1d(
        x, 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True)),
    "max_pool1d_with_indices_unbatched": ([_distinct(3, 8)], lambda m, x: _F(m).max_pool1d_with_indices(x, 2, 1)),
    "max_pool2d_with_indices": ([_distinct(2, 2, 5, 6)], lambda m, x: _F(m).max_pool2d_with_indices(x, 2)),
    "max_pool3d": ([_distinct(2, 2, 4, 5, 6)], lambda m, x: _F(m).max_pool3d(x, 2)),
    "max_pool3d_overlap_indices": ([_distinct(1, 2, 5, 6, 7)], lambda m, x: _F(m).max_pool3d(
        x, 3, 2, 1, return_indices=True)),
    "max_pool3d_dilation_ceil": ([_distinct(1, 2, 6, 5, 7)], lambda m, x: _F(m).max_pool3d(
        x, (2, 3, 2), (1, 2, 3), (1, 1, 0), (2, 1, 1), ceil_mode=True, return_indices=True)),
    "max_pool3d_with_indices_unbatched": ([_distinct(2, 4, 4, 4)], lambda m, x: _F(m).max_pool3d_with_indices(x, 2)),
    "adaptive_avg_pool1d": ([rand(2, 3, 10)], lambda m, x: _F(m).adaptive_avg_pool1d(x, 4)),
    "adaptive_avg_pool1d_global_unbatched": ([rand(3, 7)], lambda m, x: _F(m).adaptive_avg_pool1d(x, 1)),
    "adaptive_avg_pool3d": ([rand(2, 2, 5, 6, 7)], lambda m, x: _F(m).adaptive_avg_pool3d(x, (2, 4, 3))),
    "adaptive_avg_pool3d_none_unbatched": ([rand(2, 4, 5, 6)], lambda m, x: _F(m).adaptive_avg_pool3d(x, (3, None, 2))),
    "adaptive_avg_pool3d_grow": ([rand(1, 2, 2, 3, 3)], lambda m, x: _F(m).adaptive_avg_pool3d(x, 4)),
    "adaptive_max_pool1d_indices": ([_distinct(2, 3, 10)], lambda m, x: _F(m).adaptive_max_pool1d(x, 4, True)),
    "adaptive_max_pool1d_with_indices": ([_distinct(3, 7)], lambda m, x: _F(m).adaptive_max_pool1d_with_indices(x, 3)),
    "adaptive_max_pool2d_with_indices": ([_distinct(2, 2, 5, 7)], lambda m, x: _F(m).adaptive_max_pool2d_with_indices(
        x, (3, 4))),
    "adaptive_max_pool3d": ([_distinct(2, 2, 5, 6, 7)], lambda m, x: _F(m).adaptive_max_pool3d(x, (2, 4, 3))),
    "adaptive_max_pool3d_indices_none": ([_distinct(2, 4, 5, 6)], lambda m, x: _F(m).adaptive_max_pool3d(
        x, (3, None, 4), return_indices=True)),
    "adaptive_max_pool3d_with_indices": ([_distinct(1, 1, 3, 4, 5)],
                                         lambda m, x: _F(m).adaptive_max_pool3d_with_indices(x, 5)),
    "lp_pool1d": ([_positive(2, 3, 9)], lambda m, x: _F(m).lp_pool1d(x, 2, 3, 2)),
    "lp_pool2d_ceil": ([_positive(2, 5, 7)], lambda m, x: _F(m).lp_pool2d(x, 1.5, (2, 3), ceil_mode=True)),
    "lp_pool3d": ([_positive(1, 2, 4, 5, 4)], lambda m, x: _F(m).lp_pool3d(x, 3, 2, 1)),
    "fractional_max_pool2d": ([_distinct(2, 3, 9, 8)], lambda m, x: _F(m).fractional_max_pool2d(
        x, 2, output_size=(5, 4), return_indices=True, _random_samples=_samples(m, x))),
    "fractional_max_pool2d_ratio": ([_distinct(2, 3, 9, 8)], lambda m, x: _F(m).fractional_max_pool2d(
        x, (3, 2), output_ratio=(0.5, 0.75), _random_samples=_samples(m, x))),
    "fractional_max_pool2d_unbatched": ([_distinct(3, 7, 7)], lambda m, x: _F(m).fractional_max_pool2d(
        x, 3, output_size=3, return_indices=True, _random_samples=_samples(m, x, 1))),
}


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", POOL)
def test_pool_parity(name, dtype):
    arrays, fn = POOL[name]
    _parity(fn, arrays, dtype)


GRAD_POOL = ["avg_pool1d_pad_ceil_exclude", "avg_pool3d_ceil_exclude", "avg_pool3d_divisor_unbatched", "max_pool1d",
             "max_pool3d_overlap_indices", "max_pool3d_dilation_ceil", "adaptive_avg_pool3d_none_unbatched",
             "adaptive_max_pool3d", "adaptive_max_pool1d_indices", "lp_pool2d_ceil", "lp_pool3d",
             "fractional_max_pool2d"]


@pytest.mark.parametrize("name", GRAD_POOL)
def test_pool_gradcheck(name):
    arrays, fn = POOL[name]
    check_grad(lambda x: (lambda r: r[0] if isinstance(r, tuple) else r)(fn(ember, x)), *arrays)


@requires_torch
def test_pool_noncontiguous_and_integer_inputs():
    x = noncontig(_distinct(2, 3, 4, 6, 5))
    _parity(lambda m, t: _F(m).max_pool3d(t, 2, 1, return_indices=True), [x], np.float64)
    _parity(lambda m, t: _F(m).avg_pool3d(t, 2, 1), [x], np.float32)
    xi = np.random.default_rng(3).integers(-50, 50, (2, 3, 9))
    for fn in (lambda m, t: _F(m).avg_pool1d(t, 2, 1, 1), lambda m, t: _F(m).max_pool1d(t, 3, 2, return_indices=True),
               lambda m, t: _F(m).avg_pool3d(t.reshape(1, 2, 3, 3, 3), 2, 1, 1, divisor_override=3),
               lambda m, t: _F(m).max_pool3d(t.reshape(1, 2, 3, 3, 3), 2, 1, 1, return_indices=True)):
        e, t = fn(ember, ember.tensor(xi)), fn(torch, torch.tensor(xi))
        for a, b in zip(e if isinstance(e, tuple) else (e,), t if isinstance(t, tuple) else (t,)):
            assert a.dtype == ember.int64
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@requires_torch
def test_max_pool3d_ties_nan_and_all_minus_inf_windows():
    x = np.maximum(rand(1, 2, 4, 4, 4, seed=4), 0)  # ReLU outputs: windows of zeros
    x[0, 1, 0, 0, 0] = x[0, 1, 1, 1, 1] = np.nan  # two NaNs in one window: PyTorch picks the last
    x[0, 0, :2, :2, :2] = -np.inf  # a window all -inf next to the padding: PyTorch reports its first real entry
    for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1)):
        e = _F(ember).max_pool3d(ember.tensor(x), return_indices=True, **kw)
        t = _F(torch).max_pool3d(torch.tensor(x), return_indices=True, **kw)
        np.testing.assert_array_equal(e[0].numpy(), t[0].numpy())
        np.testing.assert_array_equal(e[1].numpy(), t[1].numpy())


def test_max_pool_no_grad_and_empty_batch():
    x = ember.tensor(_distinct(2, 2, 4, 4, 4), requires_grad=True)
    with ember.no_grad():
        y = _F(ember).max_pool3d(x, 2)
    assert not y.requires_grad and y.shape == (2, 2, 2, 2, 2)
    assert _F(ember).max_pool3d(ember.zeros(0, 2, 4, 4, 4), 2).shape == (0, 2, 2, 2, 2)
    assert _F(ember).avg_pool1d(ember.zeros(0, 2, 4), 2).shape == (0, 2, 2)
    assert _F(ember).adaptive_avg_pool1d(ember.zeros(2, 3, 5), 0).shape == (2, 3, 0)
    v, i = _F(ember).adaptive_max_pool3d(ember.zeros(1, 2, 3, 3, 3), 0, True)
    assert v.shape == i.shape == (1, 2, 0, 0, 0)


def test_fractional_max_pool2d_draws_samples():
    ember.manual_seed(0)
    x = ember.tensor(_distinct(2, 3, 8, 8))
    a = _F(ember).fractional_max_pool2d(x, 2, output_size=4)
    ember.manual_seed(0)
    b = _F(ember).fractional_max_pool2d(x, 2, output_size=4)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert a.shape == (2, 3, 4, 4)


# ---------------------------------------------------------------------- max unpooling
def _pooled(nd, shape, kernel, stride, seed=0):
    """(values, indices) of ember's max pooling (its indices are checked against PyTorch above)."""
    fn = {1: _F(ember).max_pool1d, 2: _F(ember).max_pool2d, 3: _F(ember).max_pool3d}[nd]
    v, i = fn(ember.tensor(_distinct(*shape, seed=seed)), kernel, stride, return_indices=True)
    return v.numpy(), i.numpy()


UNPOOL = {
    "max_unpool1d": (_pooled(1, (2, 3, 9), 2, 2), lambda m, v, i: _F(m).max_unpool1d(v, i, 2, output_size=[9])),
    "max_unpool1d_unbatched": (_pooled(1, (3, 8), 2, 2), lambda m, v, i: _F(m).max_unpool1d(v, i, 2)),
    "max_unpool2d": (_pooled(2, (2, 2, 5, 7), 2, 2),
                     lambda m, v, i: _F(m).max_unpool2d(v, i, 2, output_size=(2, 2, 5, 7))),
    "max_unpool2d_overlap": (_pooled(2, (1, 2, 6, 6), 3, 1), lambda m, v, i: _F(m).max_unpool2d(v, i, 3, 1)),
    "max_unpool3d": (_pooled(3, (1, 2, 4, 5, 6), 2, 2),
                     lambda m, v, i: _F(m).max_unpool3d(v, i, 2, output_size=(5, 5, 6))),
    "max_unpool3d_unbatched": (_pooled(3, (2, 4, 4, 4), 2, 1), lambda m, v, i: _F(m).max_unpool3d(v, i, 2, 1)),
}


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNPOOL)
def test_unpool_parity(name, dtype):
    arrays, fn = UNPOOL[name]
    _parity(fn, list(arrays), dtype)


@pytest.mark.parametrize("name", ["max_unpool1d", "max_unpool2d", "max_unpool3d"])  # (no repeated indices)
def test_unpool_gradcheck(name):
    (v, i), fn = UNPOOL[name]
    check_grad(lambda t: fn(ember, t, ember.tensor(i, device=t.device)), v)


# ---------------------------------------------------------------------- conv3d
CONV = {
    "conv3d": (lambda r: [r(2, 2, 4, 5, 6), r(4, 2, 2, 3, 2), r(4)], lambda m, x, w, b: _F(m).conv3d(x, w, b)),
    "conv3d_stride_pad": (lambda r: [r(1, 2, 5, 5, 6), r(3, 2, 3, 3, 3)],
                          lambda m, x, w: _F(m).conv3d(x, w, None, 2, 1)),
    "conv3d_same_dilation": (lambda r: [r(1, 2, 5, 6, 5), r(3, 2, 2, 3, 2), r(3)], lambda m, x, w, b: _F(m).conv3d(
        x, w, b, padding="same", dilation=(1, 2, 1))),
    "conv3d_mixed_groups_unbatched": (lambda r: [r(4, 6, 5, 7), r(4, 2, 2, 2, 3)], lambda m, x, w: _F(m).conv3d(
        x, w, stride=(1, 2, 3), padding=(1, 0, 1), dilation=2, groups=2)),
    "conv3d_valid": (lambda r: [r(1, 1, 3, 4, 4), r(2, 1, 3, 3, 3)],
                     lambda m, x, w: _F(m).conv3d(x, w, padding="valid")),
    "conv_transpose3d": (lambda r: [r(2, 2, 3, 4, 3), r(2, 3, 2, 3, 2), r(3)],
                         lambda m, x, w, b: _F(m).conv_transpose3d(x, w, b)),
    "conv_transpose3d_stride_outpad": (
        lambda r: [r(1, 2, 3, 3, 4), r(2, 2, 3, 3, 2)],
        lambda m, x, w: _F(m).conv_transpose3d(x, w, stride=2, padding=1, output_padding=1)),
    "conv_transpose3d_groups_dilation_unbatched": (
        lambda r: [r(4, 3, 2, 3), r(4, 1, 2, 2, 3), r(2)],
        lambda m, x, w, b: _F(m).conv_transpose3d(x, w, b, (1, 2, 3), 0, (0, 1, 2), 2, 2)),
}


def _arrays(make, seed=0):
    counter = iter(range(100))
    return make(lambda *s: rand(*s, seed=seed + next(counter)))


@requires_torch
@pytest.mark.filterwarnings("ignore:Using padding='same'")  # (PyTorch's, on the even kernel of one case)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", CONV)
def test_conv3d_parity(name, dtype):
    make, fn = CONV[name]
    _parity(fn, _arrays(make), dtype, **({"rtol": 1e-4, "atol": 1e-4} if dtype == np.float32 else {}))


@pytest.mark.parametrize("name", ["conv3d", "conv3d_mixed_groups_unbatched", "conv_transpose3d_stride_outpad",
                                  "conv_transpose3d_groups_dilation_unbatched"])
def test_conv3d_gradcheck(name):
    make, fn = CONV[name]
    check_grad(lambda *t: fn(ember, *t), *_arrays(make))


@requires_torch
def test_conv3d_layers_as_torch():
    for kw in (dict(), dict(stride=2, padding=1, bias=False), dict(padding="same", padding_mode="reflect"),
               dict(padding=(1, 0, 1), padding_mode="circular", groups=2), dict(padding=1, padding_mode="replicate")):
        ember.manual_seed(0)
        e = nn.Conv3d(4, 6, (2, 3, 2), **kw, dtype=ember.float64)
        t = torch.nn.Conv3d(4, 6, (2, 3, 2), **kw).double()
        assert repr(e) == repr(t)
        assert list(e.state_dict()) == list(t.state_dict())
        bound = 1 / np.sqrt(e.weight[0].numel())
        assert np.abs(e.weight.detach().numpy()).max() <= bound and np.abs(e.weight.detach().numpy()).max() > bound / 2
        e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
        x = rand(2, 4, 4, 5, 4)
        np.testing.assert_allclose(e(ember.tensor(x)).detach().numpy(), t(torch.tensor(x)).detach().numpy(), atol=1e-10)
    e = nn.ConvTranspose3d(4, 2, 3, stride=2, output_padding=1, dtype=ember.float64)
    t = torch.nn.ConvTranspose3d(4, 2, 3, stride=2, output_padding=1).double()
    assert repr(e) == repr(t) and tuple(e.weight.shape) == tuple(t.weight.shape)
    e.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in t.state_dict().items()})
    x = rand(4, 2, 3, 2)
    np.testing.assert_allclose(e(ember.tensor(x), output_size=(6, 7, 5)).detach().numpy(),
                               t(torch.tensor(x), output_size=(6, 7, 5)).detach().numpy(), atol=1e-10)


@requires_torch
def test_batch_norm3d():
    x = rand(3, 2, 3, 4, 2)
    e, t = nn.BatchNorm3d(2), torch.nn.BatchNorm3d(2).double()
    assert repr(e) == repr(t)
    e.double().to(DEVICE)
    compare_torch(e, t, x)
    np.testing.assert_allclose(host(e.running_var), t.running_var.detach().numpy(), rtol=1e-12)
    e.eval(), t.eval()
    np.testing.assert_allclose(host(e(ember.tensor(x, device=DEVICE))), t(torch.tensor(x)).detach().numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="BatchNorm3d.*5D.*4D"):
        e(ember.zeros(2, 2, 3, 3, device=DEVICE))


# ---------------------------------------------------------------------- shuffles
SHUFFLE = {
    "pixel_shuffle": ((2, 8, 3, 2), lambda m, x: _F(m).pixel_shuffle(x, 2)),
    "pixel_shuffle_5d": ((2, 1, 9, 2, 3), lambda m, x: _F(m).pixel_shuffle(x, 3)),
    "pixel_unshuffle": ((2, 2, 4, 6), lambda m, x: _F(m).pixel_unshuffle(x, 2)),
    "pixel_unshuffle_3d": ((1, 6, 3), lambda m, x: _F(m).pixel_unshuffle(x, 3)),
    "channel_shuffle": ((2, 6, 3, 2), lambda m, x: _F(m).channel_shuffle(x, 3)),
    "channel_shuffle_3d_module": ((2, 6, 3), lambda m, x: m.nn.ChannelShuffle(2)(x)),
    "pixel_shuffle_module": ((4, 3, 2), lambda m, x: m.nn.PixelUnshuffle(1)(m.nn.PixelShuffle(2)(x))),
}


@requires_torch
@pytest.mark.parametrize("name", SHUFFLE)
def test_shuffle_parity(name):
    shape, fn = SHUFFLE[name]
    _parity(fn, [rand(*shape)], np.float64)
    xi = np.arange(int(np.prod(shape))).reshape(shape)
    np.testing.assert_array_equal(fn(ember, ember.tensor(xi)).numpy(), fn(torch, torch.tensor(xi)).numpy())


def test_shuffle_gradcheck():
    check_grad(lambda x: _F(ember).pixel_shuffle(x, 2) * 2, rand(1, 4, 2, 3))
    check_grad(lambda x: _F(ember).channel_shuffle(x, 2), rand(1, 4, 3))


# ---------------------------------------------------------------------- interpolate
X3, X4, X5 = rand(2, 2, 7, seed=1), rand(2, 2, 5, 7, seed=2), rand(1, 2, 3, 4, 5, seed=3)
INTERP = {  # name -> (input, kwargs)
    "nearest_3d_size": (X3, dict(size=10)),
    "nearest_4d_scale": (X4, dict(scale_factor=(1.7, 0.6))),
    "nearest_4d_same_size_shortcut": (X4, dict(scale_factor=1.1)),  # PyTorch's 2-D kernel copies a kept axis
    "nearest_5d_recompute": (X5, dict(scale_factor=1.6, recompute_scale_factor=True)),
    "nearest_exact_3d": (X3, dict(scale_factor=1.6)),
    "nearest_exact_4d": (X4, dict(size=(3, 9))),
    "nearest_exact_5d": (X5, dict(scale_factor=(2.0, 0.5, 1.3))),
    "linear": (X3, dict(scale_factor=1.7)),
    "linear_align_down": (X3, dict(size=4, align_corners=True)),
    "linear_same_size_scale": (X3, dict(scale_factor=1.1)),
    "bilinear": (X4, dict(scale_factor=2)),
    "bilinear_align_corners": (X4, dict(size=(8, 3), align_corners=True)),
    "bilinear_recompute": (X4, dict(scale_factor=0.7, recompute_scale_factor=True)),
    "bicubic": (X4, dict(scale_factor=(2.3, 1.6))),
    "bicubic_align_down": (X4, dict(size=(3, 4), align_corners=True)),
    "trilinear": (X5, dict(scale_factor=(1.5, 2, 0.6))),
    "trilinear_align": (X5, dict(size=(5, 3, 6), align_corners=True)),
    "area_3d": (X3, dict(size=3)),
    "area_4d_scale": (X4, dict(scale_factor=0.5)),
    "area_5d_grow": (X5, dict(size=(4, 6, 3))),
    "bilinear_antialias_down": (rand(1, 2, 11, 13, seed=4), dict(size=(4, 5), antialias=True)),
    "bilinear_antialias_align_up": (X4, dict(scale_factor=(1.5, 0.4), antialias=True, align_corners=True)),
    "bicubic_antialias_down": (rand(1, 2, 11, 13, seed=5), dict(scale_factor=0.3, antialias=True)),
    "bicubic_antialias_up": (X4, dict(size=(7, 9), antialias=True)),
}


def _mode(name: str) -> str:
    for m in ("nearest_exact", "nearest", "trilinear", "bilinear", "bicubic", "linear", "area"):
        if name.startswith(m):
            return m.replace("_", "-")


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", INTERP)
def test_interpolate_parity(name, dtype):
    x, kw = INTERP[name]
    _parity(lambda m, t: _F(m).interpolate(t, mode=_mode(name), **kw), [x], dtype,
            **({"rtol": 1e-4, "atol": 2e-5} if dtype == np.float32 else {}))


@pytest.mark.parametrize("name", ["nearest_5d_recompute", "linear_align_down", "bilinear", "bicubic", "trilinear",
                                  "area_4d_scale", "bicubic_antialias_down", "bilinear_antialias_align_up"])
def test_interpolate_gradcheck(name):
    x, kw = INTERP[name]
    check_grad(lambda t: _F(ember).interpolate(t, mode=_mode(name), **kw), x[:1, :1])


@requires_torch
def test_interpolate_where_pytorchs_gradient_is_not_its_forwards_adjoint():
    # An axis that keeps its size under a scale_factor != 1 (and, for 1-D/3-D nearest, one that doubles):
    # PyTorch's forward resamples with the scale, its backward takes the shortcut. ember's forward is PyTorch's and
    # its gradient is that forward's exact adjoint (the finite-difference check).
    for x, kw in ((X3, dict(mode="nearest", scale_factor=1.1)), (X5, dict(mode="nearest", scale_factor=2.3)),
                  (X4, dict(mode="bicubic", scale_factor=1.1))):
        e = _F(ember).interpolate(ember.tensor(x), **kw)
        np.testing.assert_allclose(e.numpy(), _F(torch).interpolate(torch.tensor(x), **kw).numpy(), rtol=1e-12)
        check_grad(lambda t: _F(ember).interpolate(t, **kw), x[:1, :1], gradgrad=False)


@requires_torch
def test_interpolate_uint8_nearest_and_upsample_layers():
    xi = np.arange(40, dtype=np.uint8).reshape(1, 2, 4, 5)
    for kw in (dict(scale_factor=2), dict(size=(3, 7), mode="nearest-exact")):
        np.testing.assert_array_equal(_F(ember).interpolate(ember.tensor(xi), **kw).numpy(),
                                      _F(torch).interpolate(torch.tensor(xi), **kw).numpy())
    for make in (lambda m: m.nn.Upsample(scale_factor=2), lambda m: m.nn.Upsample(size=(3, 4), mode="bilinear"),
                 lambda m: m.nn.Upsample(scale_factor=(2, 1.5), mode="bicubic", align_corners=True),
                 lambda m: m.nn.UpsamplingNearest2d(scale_factor=2), lambda m: m.nn.UpsamplingBilinear2d(size=3)):
        e, t = make(ember), make(torch)
        assert repr(e) == repr(t)
        compare_torch(e, t, X4)
    with pytest.warns(UserWarning, match="upsample.*deprecated"):
        y = _F(ember).upsample_bilinear(ember.tensor(X4), scale_factor=2)
    np.testing.assert_allclose(y.numpy(), _F(torch).interpolate(torch.tensor(X4), scale_factor=2, mode="bilinear",
                                                                 align_corners=True).numpy(), rtol=1e-12)
    for fn in (lambda F: F.upsample(ember.tensor(X3), size=4), lambda F: F.upsample_nearest(ember.tensor(X4), size=3)):
        with pytest.warns(UserWarning, match="deprecated"):
            fn(_F(ember))
    e, t = nn.Upsample(scale_factor=1.7, mode="bicubic", recompute_scale_factor=True), torch.nn.Upsample(
        scale_factor=1.7, mode="bicubic", recompute_scale_factor=True)
    compare_torch(e, t, X4)


def test_interpolate_empty_batch_and_same_size():
    for mode in ("nearest", "bilinear", "bicubic", "area"):
        assert _F(ember).interpolate(ember.zeros(0, 2, 4, 4), scale_factor=2, mode=mode).shape == (0, 2, 8, 8)
    x = ember.tensor(X4)
    y = _F(ember).interpolate(x, size=(5, 7), mode="bilinear")
    assert y is not x and np.array_equal(y.numpy(), X4)  # a copy, as PyTorch's


# ---------------------------------------------------------------------- grid_sample / affine_grid
G4 = np.random.default_rng(8).uniform(-1.3, 1.3, (2, 4, 3, 2))
G5 = np.random.default_rng(9).uniform(-1.3, 1.3, (1, 2, 3, 2, 3))
GRID = [(mode, pm, ac) for mode in ("bilinear", "nearest", "bicubic") for pm in ("zeros", "border", "reflection")
        for ac in (False, True)]


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode,padding_mode,align_corners", GRID)
def test_grid_sample_parity(mode, padding_mode, align_corners, dtype):
    kw = dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    tol = {"rtol": 1e-4, "atol": 5e-5} if dtype == np.float32 else {}
    _parity(lambda m, x, g: _F(m).grid_sample(x, g, **kw), [rand(2, 3, 4, 5), G4], dtype, **tol)
    if mode != "bicubic":
        _parity(lambda m, x, g: _F(m).grid_sample(x, g, **kw), [rand(1, 2, 3, 4, 3), G5], dtype, **tol)


@pytest.mark.parametrize("kw", [dict(), dict(padding_mode="border", align_corners=True),
                                dict(padding_mode="reflection"), dict(mode="bicubic", padding_mode="reflection"),
                                dict(mode="nearest")], ids=str)
def test_grid_sample_gradcheck(kw):
    kw = dict(dict(align_corners=False), **kw)
    check_grad(lambda x, g: _F(ember).grid_sample(x, g, **kw), rand(1, 2, 3, 4), G4[:1, :2])
    if kw.get("mode") != "bicubic":
        check_grad(lambda x, g: _F(ember).grid_sample(x, g, **kw), rand(1, 1, 2, 3, 2), G5[:, :1], gradgrad=False)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (2, 1, 1, 3), (2, 3, 2, 4, 3)], ids=str)
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_parity(size, align_corners, dtype):
    theta = rand(2, 2, 3) if len(size) == 4 else rand(2, 3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (PyTorch's warning for unit-size grids with align_corners)
        _parity(lambda m, t: _F(m).affine_grid(t, size, align_corners=align_corners), [theta], dtype)
    check_grad(lambda t: _F(ember).affine_grid(t, size, align_corners=align_corners), theta)


def test_grid_sample_and_affine_grid_warn_without_align_corners():
    x, g = ember.tensor(rand(1, 1, 3, 3)), ember.tensor(G4[:1])
    with pytest.warns(UserWarning, match="align_corners=False"):
        _F(ember).grid_sample(x, g)
    with pytest.warns(UserWarning, match="align_corners=False"):
        _F(ember).affine_grid(ember.tensor(rand(1, 2, 3)), (1, 1, 2, 2))


# ---------------------------------------------------------------------- padding layers, fold/unfold
PAD_LAYERS = [(f"{kind}{nd}d", nd) for kind in ("ConstantPad", "ZeroPad", "ReflectionPad", "ReplicationPad",
                                                "CircularPad") for nd in (1, 2, 3)]


@requires_torch
@pytest.mark.parametrize("name,nd", PAD_LAYERS)
def test_padding_layers(name, nd):
    args = (lambda p: (p, 2.5)) if name.startswith("Constant") else (lambda p: (p,))
    for padding, batched in ((1, True), (tuple(range(1, 2 * nd + 1)), False), ((-1, 2) * nd, True)):
        e, t = getattr(nn, name)(*args(padding)), getattr(torch.nn, name)(*args(padding))
        assert repr(e) == repr(t)
        shape = (2, 3) + (5,) * nd if batched else (3,) + (7,) * nd
        compare_torch(e, t, rand(*shape))
    if name.startswith("Circular"):
        raises_like_torch(lambda m: getattr(m.nn, name)(1)(m.zeros((4,) * nd)), ember, ValueError, f"{name}.*{nd}D")


FOLD = [dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=(2, 1), padding=(1, 2), stride=(2, 1)),
        dict(kernel_size=3, stride=2, padding=1)]


@requires_torch
@pytest.mark.parametrize("kw", FOLD, ids=str)
@pytest.mark.parametrize("shape", [(2, 3, 7, 8), (3, 7, 8)], ids=str)
def test_fold_unfold_layers(kw, shape):
    e, t = nn.Unfold(**kw), torch.nn.Unfold(**kw)
    assert repr(e) == repr(t)
    compare_torch(e, t, rand(*shape))
    cols = torch.nn.functional.unfold(torch.tensor(rand(*shape)), **kw).numpy()
    e, t = nn.Fold((7, 8), **kw), torch.nn.Fold((7, 8), **kw)
    assert repr(e) == repr(t)
    compare_torch(e, t, cols)


# ---------------------------------------------------------------------- layers: attributes and repr
LAYERS = [
    "AvgPool1d(3)", "AvgPool1d(2, 1, 1, True, False)", "AvgPool3d(2, stride=1, padding=1)", "MaxPool1d(3)",
    "MaxPool3d(2, return_indices=True)", "MaxPool3d((2, 1, 2), 1, 1, 2, ceil_mode=True)", "AdaptiveAvgPool1d(3)",
    "AdaptiveAvgPool3d((2, None, 3))", "AdaptiveMaxPool1d(3)", "AdaptiveMaxPool3d(2, True)", "LPPool1d(2, 3)",
    "LPPool2d(2.0, (2, 3))", "LPPool3d(1, 2, stride=1)", "MaxUnpool1d(2)", "MaxUnpool2d(2, stride=1)",
    "MaxUnpool3d(3, padding=1)", "FractionalMaxPool2d(2, output_size=3)", "PixelShuffle(2)", "PixelUnshuffle(3)",
    "ChannelShuffle(2)", "ConstantPad1d((1, 2), 3)", "ZeroPad3d(1)",
]


@requires_torch
@pytest.mark.parametrize("text", LAYERS)
def test_layer_repr_and_attributes(text):
    e, t = eval("nn." + text), eval("torch.nn." + text)
    assert repr(e) == repr(t)
    for k, v in vars(t).items():
        if not k.startswith("_"):
            assert getattr(e, k) == v, k


@requires_torch
@pytest.mark.parametrize("text,shape", [
    ("AvgPool1d(3, 2)", (2, 3, 8)), ("MaxPool3d(2, return_indices=True)", (1, 2, 4, 4, 4)),
    ("AdaptiveMaxPool1d(3, True)", (3, 8)), ("AdaptiveAvgPool3d(2)", (2, 3, 4, 5)), ("LPPool1d(2, 3)", (2, 3, 9)),
    ("LPPool3d(2, 2)", (1, 2, 4, 4, 4)), ("AvgPool3d(2, divisor_override=5)", (1, 1, 4, 4, 4))], ids=str)
def test_pool_layers_run_as_torch(text, shape):
    x = _positive(*shape) if text.startswith("LP") else _distinct(*shape)
    compare_torch(eval("nn." + text), eval("torch.nn." + text), x)


@requires_torch
def test_unpool_and_fractional_layers():
    v, i = _pooled(2, (1, 2, 5, 6), 2, 2)
    compare_torch(lambda a, b: nn.MaxUnpool2d(2)(a, b, output_size=[5, 6]),
                  lambda a, b: torch.nn.MaxUnpool2d(2)(a, b, output_size=[5, 6]), v, i)
    s = SAMPLES.astype(np.float64)
    e = nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True, _random_samples=ember.tensor(s)).to(DEVICE)
    t = torch.nn.FractionalMaxPool2d(2, output_ratio=0.5, return_indices=True, _random_samples=torch.tensor(s))
    assert [k for k, _ in e.named_buffers()] == [k for k, _ in t.named_buffers()] == ["_random_samples"]
    compare_torch(e, t, _distinct(2, 3, 8, 9))


# ---------------------------------------------------------------------- errors
X = {3: lambda m: m.zeros(2, 3, 8), 4: lambda m: m.zeros(1, 2, 5, 5), 5: lambda m: m.zeros(1, 2, 4, 5, 6)}
ERRORS = {  # name -> (fn(m), exception, what ember's message names)
    "avg_pool1d_rank": (lambda m: _F(m).avg_pool1d(m.zeros(8), 2), RuntimeError, r"avg_pool1d.*2D.*3D.*\[8\]"),
    "avg_pool1d_pad": (lambda m: _F(m).avg_pool1d(X[3](m), 2, padding=2), RuntimeError,
                       r"avg_pool1d.*half.*padding=\[2\]"),
    "avg_pool1d_too_small": (lambda m: _F(m).avg_pool1d(X[3](m), 9), RuntimeError,
                             r"avg_pool1d.*output size.*too small"),
    "avg_pool1d_kernel_pair": (lambda m: _F(m).avg_pool1d(X[3](m), (2, 2)), RuntimeError, r"avg_pool1d.*kernel_size"),
    "avg_pool1d_stride0": (lambda m: _F(m).avg_pool1d(X[3](m), 2, 0), RuntimeError, r"avg_pool1d.*stride"),
    "avg_pool3d_pad": (lambda m: _F(m).avg_pool3d(X[5](m), 2, padding=2), RuntimeError, r"avg_pool3d.*half"),
    "avg_pool3d_small": (lambda m: _F(m).avg_pool3d(X[5](m), 5), RuntimeError, r"avg_pool3d.*too small"),
    "avg_pool3d_divisor0": (lambda m: _F(m).avg_pool3d(X[5](m), 2, divisor_override=0), RuntimeError, r"divisor"),
    "avg_pool3d_zero_channels": (lambda m: _F(m).avg_pool3d(m.zeros(1, 0, 4, 4, 4), 2), RuntimeError,
                                 r"avg_pool3d.*0, 4"),
    "max_pool1d_rank": (lambda m: _F(m).max_pool1d(X[4](m), 2), RuntimeError, r"max_pool1d.*\[1, 2, 5, 5\]"),
    "max_pool1d_dilation0": (lambda m: _F(m).max_pool1d(X[3](m), 2, dilation=0), RuntimeError, r"max_pool1d.*dilation"),
    "max_pool1d_small": (lambda m: _F(m).max_pool1d(X[3](m), 9), RuntimeError, r"max_pool1d.*too small"),
    "max_pool3d_rank": (lambda m: _F(m).max_pool3d(X[3](m), 2), RuntimeError, r"max_pool3d.*4D.*5D"),
    "max_pool3d_pad": (lambda m: _F(m).max_pool3d(X[5](m), 2, padding=2), RuntimeError, r"max_pool3d.*half"),
    "max_pool3d_small": (lambda m: _F(m).max_pool3d(X[5](m), 5), RuntimeError, r"max_pool3d.*too small"),
    "adaptive_avg_pool1d_rank": (lambda m: _F(m).adaptive_avg_pool1d(X[4](m), 2), RuntimeError, r"adaptive_avg_pool1d"),
    "adaptive_avg_pool1d_pair": (lambda m: _F(m).adaptive_avg_pool1d(X[3](m), (2, 3)), RuntimeError, r"output_size"),
    "adaptive_avg_pool1d_none": (lambda m: _F(m).adaptive_avg_pool1d(X[3](m), None), TypeError, r"output_size"),
    "adaptive_avg_pool1d_int": (lambda m: _F(m).adaptive_avg_pool1d(X[3](m).long(), 2), NotImplementedError,
                                r"Long|int64"),
    "adaptive_avg_pool3d_rank": (lambda m: _F(m).adaptive_avg_pool3d(X[3](m), 2), RuntimeError, r"4D or 5D"),
    "adaptive_avg_pool3d_negative": (lambda m: _F(m).adaptive_avg_pool3d(X[5](m), -1), RuntimeError,
                                     r"greater than or equal"),
    "adaptive_max_pool3d_int": (lambda m: _F(m).adaptive_max_pool3d(X[5](m).long(), 2), NotImplementedError, r"int64"),
    "adaptive_max_pool1d_rank": (lambda m: _F(m).adaptive_max_pool1d(X[4](m), 2), RuntimeError, r"adaptive_max_pool1d"),
    "lp_pool1d_rank": (lambda m: _F(m).lp_pool1d(X[4](m), 2, 3), RuntimeError, r"lp_pool1d.*\[1, 2, 5, 5\]"),
    "unpool_indices_dtype": (lambda m: _F(m).max_unpool1d(X[3](m), X[3](m), 2), RuntimeError, r"int64"),
    "unpool_indices_shape": (lambda m: _F(m).max_unpool1d(X[3](m), m.zeros(2, 3, 4, dtype=m.long), 2), RuntimeError,
                             r"shape of indices"),
    "unpool_index_range": (lambda m: _F(m).max_unpool1d(X[3](m), m.full((2, 3, 8), 40, dtype=m.long), 2), RuntimeError,
                           r"invalid max index: 40"),
    "unpool_output_size": (lambda m: _F(m).max_unpool1d(X[3](m), m.zeros(2, 3, 8, dtype=m.long), 2, output_size=(30,)),
                           ValueError, r"output_size.*between 14 and 18"),
    "unpool_output_size_len": (lambda m: _F(m).max_unpool1d(X[3](m), m.zeros(2, 3, 8, dtype=m.long), 2,
                                                            output_size=(3, 4, 5, 6)), ValueError, r"1 or 3 elements"),
    "unpool3d_rank": (lambda m: _F(m).max_unpool3d(X[3](m), m.zeros(2, 3, 8, dtype=m.long), 2), RuntimeError,
                      r"max_unpool3d.*4D.*5D"),
    "fractional_no_size": (lambda m: _F(m).fractional_max_pool2d(X[4](m), 2), ValueError,
                           r"output_size or an output_ratio"),
    "fractional_too_big": (lambda m: _F(m).fractional_max_pool2d(X[4](m), 2, output_size=5), RuntimeError,
                           r"pool height 2 too large"),
    "fractional_samples_dtype": (lambda m: _F(m).fractional_max_pool2d(X[4](m), 2, output_size=2,
                                                                        _random_samples=m.zeros(1, 2, 2).double()),
                                 RuntimeError, r"same dtype"),
    "fractional_ratio_layer": (lambda m: m.nn.FractionalMaxPool2d(2, output_ratio=1.5), ValueError, r"between 0 and 1"),
    "fractional_layer_both": (lambda m: m.nn.FractionalMaxPool2d(2, 3, 0.5), ValueError, r"only one"),
    "conv3d_rank": (lambda m: _F(m).conv3d(m.zeros(2, 5, 5), m.zeros(4, 2, 3, 3, 3)), RuntimeError, r"4D.*5D.*conv3d"),
    "conv3d_weight_rank": (lambda m: _F(m).conv3d(X[5](m), m.zeros(4, 2, 3, 3)), RuntimeError, r"conv3d.*weight"),
    "conv3d_small": (lambda m: _F(m).conv3d(m.zeros(1, 2, 2, 5, 5), m.zeros(4, 2, 3, 3, 3)), RuntimeError,
                     r"Kernel size can't be greater"),
    "conv3d_channels": (lambda m: _F(m).conv3d(m.zeros(1, 3, 5, 5, 5), m.zeros(4, 2, 3, 3, 3)), RuntimeError,
                        r"3 channels"),
    "conv3d_same_strided": (lambda m: _F(m).conv3d(X[5](m), m.zeros(4, 2, 3, 3, 3), padding="same", stride=2),
                            RuntimeError, r"same.*strided"),
    "conv_transpose3d_outpad": (lambda m: _F(m).conv_transpose3d(m.zeros(1, 4, 3, 3, 3), m.zeros(4, 2, 3, 3, 3),
                                                                 stride=2, output_padding=2), RuntimeError,
                                r"output padding must be smaller"),
    "pixel_shuffle_rank": (lambda m: _F(m).pixel_shuffle(m.zeros(8, 3), 2), RuntimeError, r"at least 3 dimensions"),
    "pixel_shuffle_channels": (lambda m: _F(m).pixel_shuffle(m.zeros(2, 6, 3, 3), 2), RuntimeError, r"divisible by 4"),
    "pixel_shuffle_factor": (lambda m: _F(m).pixel_shuffle(m.zeros(2, 8, 3, 3), 0), RuntimeError, r"positive"),
    "pixel_shuffle_float": (lambda m: _F(m).pixel_shuffle(m.zeros(2, 8, 3, 3), 2.0), TypeError,
                            r"upscale_factor.*float"),
    "pixel_unshuffle_width": (lambda m: _F(m).pixel_unshuffle(m.zeros(2, 2, 4, 5), 2), RuntimeError, r"width.*5"),
    "channel_shuffle_rank": (lambda m: _F(m).channel_shuffle(m.zeros(2, 6), 3), RuntimeError, r"> 2 dims"),
    "channel_shuffle_groups": (lambda m: _F(m).channel_shuffle(m.zeros(2, 6, 3), 4), RuntimeError, r"6 channels and 4"),
    "interpolate_rank": (lambda m: _F(m).interpolate(m.zeros(2, 5), scale_factor=2), NotImplementedError, r"got 2D"),
    "interpolate_mode_rank": (lambda m: _F(m).interpolate(X[4](m), scale_factor=2, mode="linear"), NotImplementedError,
                              r"linear mode needs 3D"),
    "interpolate_bicubic_rank": (lambda m: _F(m).interpolate(X[5](m), scale_factor=2, mode="bicubic"),
                                 NotImplementedError, r"5D"),
    "interpolate_unknown_mode": (lambda m: _F(m).interpolate(X[4](m), scale_factor=2, mode="cubic"),
                                 NotImplementedError, r"'cubic'"),
    "interpolate_size_len": (lambda m: _F(m).interpolate(X[4](m), size=(3,)), ValueError, r"spatial dimensions"),
    "interpolate_size_float": (lambda m: _F(m).interpolate(X[4](m), size=(2.5, 4)), TypeError, r"expected size"),
    "interpolate_zero_output": (lambda m: _F(m).interpolate(X[4](m), scale_factor=0.1), RuntimeError, r"\[0, 0\]"),
    "interpolate_recompute_size": (lambda m: _F(m).interpolate(X[4](m), size=3, recompute_scale_factor=True),
                                   ValueError, r"recompute_scale_factor"),
    "interpolate_antialias_nearest": (lambda m: _F(m).interpolate(X[4](m), scale_factor=0.5, antialias=True),
                                      ValueError, r"Anti-alias"),
    "interpolate_align_nearest": (lambda m: _F(m).interpolate(X[4](m), scale_factor=2, align_corners=False), ValueError,
                                  r"align_corners"),
    "interpolate_long_linear": (lambda m: _F(m).interpolate(X[3](m).long(), scale_factor=2, mode="linear"),
                                NotImplementedError, r"int64"),
    "grid_sample_mode": (lambda m: _F(m).grid_sample(X[4](m), m.zeros(1, 2, 2, 2), mode="area"), ValueError, r"'area'"),
    "grid_sample_padding": (lambda m: _F(m).grid_sample(X[4](m), m.zeros(1, 2, 2, 2), padding_mode="circular"),
                            ValueError, r"'circular'"),
    "grid_sample_batch": (lambda m: _F(m).grid_sample(X[4](m), m.zeros(2, 2, 2, 2), align_corners=True), RuntimeError,
                          r"same batch size"),
    "grid_sample_last_dim": (lambda m: _F(m).grid_sample(X[4](m), m.zeros(1, 2, 2, 3), align_corners=True),
                             RuntimeError, r"size 2 in last dimension"),
    "grid_sample_bicubic_5d": (lambda m: _F(m).grid_sample(X[5](m), m.zeros(1, 2, 2, 2, 3), mode="bicubic",
                                                           align_corners=True), RuntimeError, r"bicubic.*4D"),
    "grid_sample_dtypes": (lambda m: _F(m).grid_sample(X[4](m), m.zeros(1, 2, 2, 2).double(), align_corners=True),
                           RuntimeError, r"same dtype"),
    "affine_grid_theta_shape": (lambda m: _F(m).affine_grid(m.zeros(2, 3, 3), (2, 3, 5, 6), align_corners=True),
                                ValueError, r"Nx2x3"),
    "affine_grid_size": (lambda m: _F(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 5), align_corners=True),
                         NotImplementedError, r"4D and 5D"),
    "affine_grid_int": (lambda m: _F(m).affine_grid(m.zeros(2, 2, 3).long(), (2, 3, 5, 6), align_corners=True),
                        ValueError, r"floating point"),
    "affine_grid_zero": (lambda m: _F(m).affine_grid(m.zeros(2, 2, 3), (2, 3, 0, 6), align_corners=True), ValueError,
                         r"positive output size"),
    "affine_grid_batch": (lambda m: _F(m).affine_grid(m.zeros(3, 2, 3), (2, 3, 5, 6), align_corners=True), RuntimeError,
                          r"3 affine matrices.*batch of 2"),
    "pad_layer_rank": (lambda m: m.nn.ReflectionPad3d(1)(m.zeros(3, 3, 3)), NotImplementedError, r"pad"),
    "upsample_layer_rank": (lambda m: m.nn.UpsamplingBilinear2d(scale_factor=2)(X[5](m)), NotImplementedError,
                            r"bilinear mode needs 4D"),
    "unfold_int": (lambda m: _F(m).unfold(m.zeros(1, 1, 4, 5, dtype=m.long), 2), NotImplementedError, r"unfold.*int64"),
    "fold_int": (lambda m: _F(m).fold(m.zeros(1, 4, 12, dtype=m.long), (4, 5), 2), NotImplementedError, r"fold.*int64"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors(name):
    fn, exc, match = ERRORS[name]
    raises_like_torch(fn, ember, exc, match)
    if torch is not None:
        raises_like_torch(fn, torch, exc)  # the same exception type in PyTorch
