"""The remaining activations, dropouts, losses and normalisations (ember/ops/nn_more.py) and their layers
(ember/nn/modules/more.py): float64 gradchecks, PyTorch parity of values and gradients (random cotangent, float64 and
float32), PyTorch's errors, printed forms and parameters, the random ops' statistics, and CTC against a brute-force
sum over alignments."""
import itertools
import math
import warnings

import numpy as np
import pytest
from helpers import check_grad, compare_torch, noncontig, rand, raises_like_torch, requires_torch, torch

import ember
import ember.nn as nn
import ember.nn.functional as F

if torch is not None:
    import torch.nn.functional as TF


def _lib(m):
    """The functional namespace of `m` (ember or torch)."""
    return m.nn.functional


def _sign(*shape, seed=0):
    return np.where(np.random.default_rng(seed).random(shape) < 0.5, -1, 1)


# ---------------------------------------------------------------------- elementwise and small activations
# name -> (fn(F, *tensors), inputs(dtype)): the same call runs on ember.nn.functional and torch.nn.functional
ACTS = {
    "celu": (lambda f, x: f.celu(x), lambda d: [rand(3, 4, low=-3, high=3, dtype=d)]),
    "celu_alpha": (lambda f, x: f.celu(x, alpha=0.5), lambda d: [rand(3, 4, low=-3, high=3, dtype=d)]),
    "hardshrink": (lambda f, x: f.hardshrink(x, 0.4), lambda d: [rand(3, 4, low=-2, high=2, dtype=d)]),
    "softshrink": (lambda f, x: f.softshrink(x, 0.4), lambda d: [rand(3, 4, low=-2, high=2, dtype=d)]),
    "hardsigmoid": (lambda f, x: f.hardsigmoid(x), lambda d: [rand(3, 4, low=-5, high=5, dtype=d)]),
    "hardswish": (lambda f, x: f.hardswish(x), lambda d: [rand(3, 4, low=-5, high=5, dtype=d)]),
    "softsign": (lambda f, x: f.softsign(x), lambda d: [rand(3, 4, low=-3, high=3, dtype=d)]),
    "tanhshrink": (lambda f, x: f.tanhshrink(x), lambda d: [rand(3, 4, low=-3, high=3, dtype=d)]),
    "threshold": (lambda f, x: f.threshold(x, 0.2, -1.5), lambda d: [rand(3, 4, dtype=d)]),
    "rrelu_eval": (lambda f, x: f.rrelu(x, 0.1, 0.3), lambda d: [rand(3, 4, dtype=d)]),
    "glu": (lambda f, x: f.glu(x, 1), lambda d: [rand(3, 4, low=-3, high=3, dtype=d)]),
    "glu_last_3d": (lambda f, x: f.glu(x), lambda d: [rand(2, 3, 6, low=-3, high=3, dtype=d)]),
    "softmin": (lambda f, x: f.softmin(x, dim=1), lambda d: [rand(3, 4, low=-3, high=3, dtype=d)]),
    "softmin_dim0": (lambda f, x: f.softmin(x, 0), lambda d: [rand(3, 4, low=-3, high=3, dtype=d)]),
    "prelu_channels": (lambda f, x, w: f.prelu(x, w), lambda d: [rand(2, 3, 4, dtype=d), rand(3, seed=1, dtype=d)]),
    "prelu_shared": (lambda f, x, w: f.prelu(x, w), lambda d: [rand(3, 4, dtype=d), rand(1, seed=1, dtype=d)]),
    "prelu_0d": (lambda f, x, w: f.prelu(x, w), lambda d: [np.array(-0.7, d), rand(1, seed=1, dtype=d)]),
    "pairwise_distance": (lambda f, a, b: f.pairwise_distance(a, b),
                          lambda d: [rand(4, 5, dtype=d), rand(4, 5, seed=1, dtype=d)]),
    "pairwise_distance_p1_keepdim": (lambda f, a, b: f.pairwise_distance(a, b, 1, keepdim=True),
                                     lambda d: [rand(4, 5, dtype=d), rand(4, 5, seed=1, dtype=d)]),
    "pairwise_distance_p3_broadcast": (lambda f, a, b: f.pairwise_distance(a, b, p=3.0, eps=1e-3),
                                       lambda d: [rand(3, 1, 5, dtype=d), rand(2, 5, seed=1, dtype=d)]),
    "pairwise_distance_inf_1d": (lambda f, a, b: f.pairwise_distance(a, b, p=math.inf),
                                 lambda d: [rand(5, dtype=d), rand(5, seed=1, dtype=d)]),
    "pairwise_distance_0d": (lambda f, a, b: f.pairwise_distance(a, b), lambda d: [np.array(0.3, d), np.array(-1.2, d)]),
    "rms_norm": (lambda f, x, w: f.rms_norm(x, [4], w), lambda d: [rand(2, 3, 4, dtype=d), rand(4, seed=1, dtype=d)]),
    "rms_norm_two_dims_eps": (lambda f, x: f.rms_norm(x, (3, 4), eps=1e-3), lambda d: [rand(2, 3, 4, dtype=d)]),
    "local_response_norm_3d": (lambda f, x: f.local_response_norm(x, 3, alpha=0.1, beta=0.6, k=2.0),
                               lambda d: [rand(2, 5, 4, dtype=d)]),
    "local_response_norm_4d_even": (lambda f, x: f.local_response_norm(x, 2, alpha=0.2),
                                    lambda d: [rand(2, 5, 3, 2, dtype=d)]),
    "local_response_norm_5d_wide": (lambda f, x: f.local_response_norm(x, 7, alpha=0.3, beta=1.1),
                                    lambda d: [rand(1, 4, 2, 3, 2, dtype=d)]),
    "instance_norm": (lambda f, x: f.instance_norm(x), lambda d: [rand(2, 3, 5, dtype=d)]),
    "instance_norm_affine_2d": (lambda f, x, w, b: f.instance_norm(x, weight=w, bias=b, eps=1e-3),
                                lambda d: [rand(2, 3, 4, 2, dtype=d), rand(3, seed=1, dtype=d),
                                           rand(3, seed=2, dtype=d)]),
}


@pytest.mark.parametrize("name", sorted(ACTS))
def test_gradcheck(name):
    fn, inputs = ACTS[name]
    check_grad(lambda *t: fn(F, *t), *inputs(np.float64))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(ACTS))
def test_parity(name, dtype):
    fn, inputs = ACTS[name]
    compare_torch(lambda *t: fn(F, *t), lambda *t: fn(TF, *t), *inputs(dtype))


@requires_torch
def test_empty_and_0d_inputs_as_pytorch():
    e = np.zeros((0, 4))
    for fn in (lambda f, x: f.hardswish(x), lambda f, x: f.glu(x), lambda f, x: f.softmin(x, 1),
               lambda f, x: f.rms_norm(x, [4]), lambda f, x: f.celu(x), lambda f, x: f.softsign(x),
               lambda f, x: f.threshold(x, 0.1, 2.0), lambda f, x: f.local_response_norm(x.reshape(0, 2, 2), 2),
               lambda f, x: f.pairwise_distance(x, x)):
        compare_torch(lambda x: fn(F, x), lambda x: fn(TF, x), e)
    for fn in (lambda f, x: f.hardswish(x), lambda f, x: f.tanhshrink(x), lambda f, x: f.softshrink(x, 0.1),
               lambda f, x: f.softmin(x, 0), lambda f, x: f.celu(x)):
        compare_torch(lambda x: fn(F, x), lambda x: fn(TF, x), np.array(-0.7))


@pytest.mark.parametrize("name", ["hardswish", "glu", "softmin", "rms_norm", "instance_norm", "celu"])
def test_gradcheck_noncontiguous(name):
    fn, inputs = ACTS[name]
    check_grad(lambda *t: fn(F, *t), *[noncontig(a) for a in inputs(np.float64)], gradgrad=False)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kinks_and_nan_as_pytorch(dtype):
    """Values and one-sided gradients at the corners of the piecewise functions, and NaN propagation."""
    a = np.array([-4.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 4.0, np.nan], dtype)
    for fn in (lambda f, x: f.hardsigmoid(x), lambda f, x: f.hardswish(x), lambda f, x: f.hardshrink(x),
               lambda f, x: f.softshrink(x), lambda f, x: f.threshold(x, 0.5, 9.0), lambda f, x: f.rrelu(x),
               lambda f, x: f.prelu(x, x.new_full((1,), 0.3))):
        compare_torch(lambda x: fn(F, x), lambda x: fn(TF, x), a)
    # (CELU runs nn_activation's ELU op, whose gradient at NaN is NaN; PyTorch passes the upstream gradient)
    compare_torch(lambda x: F.celu(x), lambda x: TF.celu(x), a[:-1])


INPLACE = {  # name -> the in-place call, the same on ember.nn.functional and torch.nn.functional
    "celu_": lambda f, y: f.celu_(y, 0.7),
    "celu_inplace": lambda f, y: f.celu(y, 0.7, inplace=True),
    "selu_": lambda f, y: f.selu_(y),
    "hardsigmoid": lambda f, y: f.hardsigmoid(y, inplace=True),
    "hardswish": lambda f, y: f.hardswish(y, True),
    "threshold_": lambda f, y: f.threshold_(y, 0.1, 2.0),
    "threshold_inplace": lambda f, y: f.threshold(y, 0.1, 2.0, True),
    "rrelu_eval": lambda f, y: f.rrelu_(y, 0.2, 0.4),
}


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_inplace_matches_pytorch(name, dtype):
    fn = INPLACE[name]

    def ember_fn(t):
        y = t * 1  # a non-leaf: in place on a leaf that requires grad is an error
        assert fn(F, y) is y
        return y

    compare_torch(ember_fn, lambda t: fn(TF, t * 1), rand(3, 4, seed=7, low=-4, high=4, dtype=dtype))


def test_inplace_without_grad_writes_into_input():
    for fn in (lambda x: F.celu(x, inplace=True), lambda x: F.hardswish(x, True), lambda x: F.threshold_(x, 0, 5.0),
               lambda x: F.rrelu_(x, training=True), lambda x: F.selu_(x), lambda x: F.hardsigmoid(x, inplace=True)):
        x = ember.tensor(rand(3, 4, seed=5, dtype=np.float32))
        before = x.numpy().copy()
        assert fn(x) is x and not np.array_equal(x.numpy(), before)


def test_dtypes_like_pytorch():
    xi = ember.tensor([-2, 0, 3, 9])
    r = F.threshold(xi, 0.5, 2.7)  # integers stay integers; the value is cast (2.7 -> 2), as PyTorch
    assert r.dtype == ember.int64 and r.tolist() == [2, 2, 3, 9]
    for fn in (F.softsign, F.tanhshrink):  # promoted to the default float
        assert fn(xi).dtype == ember.float32
    for name in ("celu", "hardshrink", "softshrink", "hardsigmoid", "hardswish", "glu", "rrelu", "selu_"):
        with pytest.raises(NotImplementedError, match=f"{name}.*int64"):
            getattr(F, name)(xi)
    with pytest.raises(NotImplementedError, match="threshold.*bool"):
        F.threshold(ember.tensor([True]), 0, 1)
    for dtype in (ember.float32, ember.float64):
        x = ember.zeros(2, 4, dtype=dtype)
        for fn in (F.celu, F.hardshrink, F.softshrink, F.hardsigmoid, F.hardswish, F.softsign, F.tanhshrink, F.glu,
                   lambda t: F.softmin(t, 1), lambda t: F.rms_norm(t, [4]), F.gumbel_softmax):
            assert fn(x).dtype == dtype


@requires_torch
def test_double_backward_matches_pytorch():
    a = rand(3, 4, seed=11, low=-4, high=4)
    for fn in (lambda f, x: f.hardswish(x), lambda f, x: f.glu(x, 1), lambda f, x: f.softsign(x),
               lambda f, x: f.tanhshrink(x), lambda f, x: f.celu(x, 0.5), lambda f, x: f.rms_norm(x, [4]),
               lambda f, x: f.local_response_norm(x.reshape(3, 2, 2), 2, alpha=0.5)):
        x = ember.tensor(a, requires_grad=True)
        out = fn(F, x)
        v = np.random.default_rng(12).standard_normal(out.shape)
        (g,) = ember.autograd.grad(out, x, ember.tensor(v), create_graph=True)
        (gg,) = ember.autograd.grad((g * g).sum(), x)
        tx = torch.tensor(a, requires_grad=True)
        tout = fn(TF, tx)
        (tg,) = torch.autograd.grad(tout, tx, torch.tensor(v), create_graph=True)
        (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
        np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-9, atol=1e-11)


def test_rms_norm_eps_default_and_formula():
    a = rand(3, 5, seed=2, dtype=np.float32)
    r = F.rms_norm(ember.tensor(a), [5]).numpy()
    eps = np.finfo(np.float32).eps
    np.testing.assert_allclose(r, a / np.sqrt((a * a).mean(-1, keepdims=True) + eps), rtol=1e-6)
    z = F.rms_norm(ember.zeros(2, 3, dtype=ember.float64), [3])  # eps keeps an all-zero row finite
    assert np.isfinite(z.numpy()).all()


@requires_torch
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_cross_map_lrn2d_values_as_pytorch(size):
    """PyTorch's legacy CrossMapLRN2d values (its running window keeps channel 0's square); ember's gradient is the
    exact derivative of those values (PyTorch's hand-written backward is not: it fails gradcheck)."""
    a = rand(2, 7, 3, 2, seed=size, dtype=np.float64) * 2
    e = nn.CrossMapLRN2d(size, 0.1, 0.6, 1.5)(ember.tensor(a)).numpy()
    t = torch.nn.CrossMapLRN2d(size, 0.1, 0.6, 1.5)(torch.tensor(a)).numpy()
    np.testing.assert_allclose(e, t, rtol=1e-12)
    check_grad(lambda x: nn.CrossMapLRN2d(size, 0.1, 0.6, 1.5)(x), a[:1, :, :2, :1], gradgrad=False)


@requires_torch
def test_softmin_implicit_dim_warns_like_softmax():
    a = rand(2, 3, seed=1)
    with pytest.warns(UserWarning, match="softmin.*implicit dimension") as rec:
        r = F.softmin(ember.tensor(a))
    assert rec[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_allclose(r.numpy(), TF.softmin(torch.tensor(a)).numpy(), rtol=1e-12)
    assert F.softmin(ember.tensor([1, 2, 3]), 0, dtype=ember.float64).dtype == ember.float64


# ---------------------------------------------------------------------- random activations and dropouts
def test_rrelu_training_draws_slopes_in_range():
    ember.manual_seed(3)
    a = rand(200, 300, seed=4)
    x = ember.tensor(a, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    y.backward(ember.ones_like(y))
    yv, g = y.detach().numpy(), x.grad.numpy()
    neg = a < 0
    np.testing.assert_array_equal(yv[~neg], a[~neg])
    np.testing.assert_array_equal(g[~neg], 1.0)
    slopes = yv[neg] / a[neg]
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and abs(slopes.mean() - 0.2) < 0.005
    np.testing.assert_allclose(g[neg], slopes, rtol=1e-12)  # the gradient is the drawn slope
    ember.manual_seed(3)
    np.testing.assert_array_equal(F.rrelu(ember.tensor(a), 0.1, 0.3, training=True).numpy(), yv)
    check_grad(lambda t: F.rrelu(t, 0.1, 0.3, training=False), a[:2, :3])


def test_rrelu_module_train_and_eval():
    m = nn.RReLU(0.2, 0.4)
    x = ember.tensor([-1.0, 2.0])
    m.eval()
    np.testing.assert_allclose(m(x).numpy(), [-0.3, 2.0], rtol=1e-6)
    m.train()
    assert -0.4 <= m(x).numpy()[0] <= -0.2


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_alpha_dropout_keeps_zero_mean_unit_variance(p):
    ember.manual_seed(0)
    x = ember.randn(400, 500)
    y = F.alpha_dropout(x, p, training=True).numpy()
    assert abs(y.mean()) < 0.02 and abs(y.std() - 1) < 0.02
    alpha = 1.7580993408473766
    a = 1 / math.sqrt((alpha ** 2 * p + 1) * (1 - p))
    dropped = np.isclose(y, -a * alpha * (1 - p), rtol=1e-6)
    assert abs(dropped.mean() - p) < 0.01
    np.testing.assert_allclose(y[~dropped], a * (x.numpy()[~dropped] + alpha * p), rtol=1e-5, atol=1e-6)


def test_alpha_dropouts_gradients_and_edges():
    ember.manual_seed(1)
    x = ember.randn(6, 4, 5, requires_grad=True)
    y = F.feature_alpha_dropout(x, 0.5, training=True)
    y.backward(ember.ones_like(y))
    g = x.grad.numpy()
    per_channel = g.reshape(6, 4, -1)
    assert (per_channel == per_channel[..., :1]).all()  # one draw per (sample, channel)
    assert np.isclose(g, 0).sum() + np.isclose(g, g.max()).sum() == g.size  # the mask: 0 or a
    x.grad = None
    F.alpha_dropout(x, 0.3, training=True).sum().backward()
    assert ((x.grad.numpy() == 0) | np.isclose(x.grad.numpy(), x.grad.numpy().max())).all()
    assert F.alpha_dropout(x, 0.5) is x  # training=False by default, as PyTorch
    assert F.feature_alpha_dropout(x, 0.5, training=False) is x
    assert F.alpha_dropout(x, 0.0, training=True) is x
    np.testing.assert_array_equal(F.alpha_dropout(x, 1.0, training=True).detach().numpy(), 0)
    assert F.alpha_dropout(ember.tensor([1, 2]), 0.5) is not None  # integers pass through outside training
    y = x.detach().clone()
    assert F.alpha_dropout(y, 0.5, True, inplace=True) is y


def test_channel_dropouts_drop_whole_channels():
    ember.manual_seed(2)
    for fn, shape, keep in ((F.dropout1d, (8, 6, 5), 2), (F.dropout1d, (6, 5), 1), (F.dropout3d, (4, 3, 2, 3, 2), 2),
                            (F.dropout3d, (3, 2, 3, 2), 1)):
        y = fn(ember.ones(*shape), 0.5).numpy().reshape(shape[:keep] + (-1,))
        assert set(np.unique(y)) <= {0.0, 2.0}
        assert (y == y[..., :1]).all() and (y == 0).any() and (y == 2).any()
        x = ember.ones(*shape)
        assert fn(x, 0.5, training=False) is x
    with pytest.warns(UserWarning, match="dropout3d.*3-D input"):
        F.dropout3d(ember.ones(2, 3, 4), 0.5)


@pytest.mark.parametrize("cls,shape", [(nn.AlphaDropout, (4, 5)), (nn.FeatureAlphaDropout, (4, 3, 5)),
                                       (nn.Dropout1d, (4, 3, 5)), (nn.Dropout3d, (2, 3, 2, 2, 2))])
def test_dropout_modules_train_and_eval(cls, shape):
    ember.manual_seed(4)
    m = cls(0.4)
    x = ember.randn(*shape)
    assert not np.array_equal(m(x).numpy(), x.numpy())
    m.eval()
    assert m(x) is x


def test_gumbel_softmax_samples_and_straight_through():
    logits = ember.tensor(np.log([[0.2, 0.5, 0.3]]).repeat(4000, 0), requires_grad=True)
    ember.manual_seed(5)
    y = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(y.detach().numpy().sum(-1), 1.0, rtol=1e-6)
    ember.manual_seed(5)
    h = F.gumbel_softmax(logits, tau=0.5, hard=True)
    hv = h.detach().numpy()
    assert set(np.unique(hv)) == {0.0, 1.0} and (hv.sum(-1) == 1).all()
    assert (hv.argmax(-1) == y.detach().numpy().argmax(-1)).all()  # the same noise: the hard sample is the soft argmax
    np.testing.assert_allclose(hv.mean(0), [0.2, 0.5, 0.3], atol=0.03)  # argmax of Gumbel-perturbed logits ~ softmax
    c = ember.tensor(rand(4000, 3, seed=1))
    (gs,) = ember.autograd.grad((y * c).sum(), logits)
    (gh,) = ember.autograd.grad((h * c).sum(), logits)
    np.testing.assert_allclose(gh.numpy(), gs.numpy(), rtol=1e-5, atol=1e-7)  # straight-through: the soft gradient
    with pytest.warns(UserWarning, match="eps.*deprecated"):
        F.gumbel_softmax(logits, eps=1e-5)
    assert F.gumbel_softmax(ember.zeros(2, 3, 4), dim=1).sum(1).numpy() == pytest.approx(np.ones((2, 4)))
    h1 = F.gumbel_softmax(ember.zeros(2, 3, 4), hard=True, dim=1).numpy()  # one-hot along dim 1
    assert (h1.sum(1) == 1).all() and set(np.unique(h1)) == {0.0, 1.0}


# ---------------------------------------------------------------------- losses
LOSSES = {
    "cosine_embedding": (lambda f, a, b, t, r: f.cosine_embedding_loss(a, b, t, 0.2, reduction=r),
                         lambda d: [rand(4, 5, dtype=d), rand(4, 5, seed=1, dtype=d), np.array([1, -1, 1, -1])]),
    "cosine_embedding_1d": (lambda f, a, b, t, r: f.cosine_embedding_loss(a, b, t, -0.5, reduction=r),
                            lambda d: [rand(5, dtype=d), rand(5, seed=1, dtype=d), np.array(-1)]),
    "margin_ranking": (lambda f, a, b, t, r: f.margin_ranking_loss(a, b, t, 0.1, reduction=r),
                       lambda d: [rand(6, dtype=d), rand(6, seed=1, dtype=d), _sign(6).astype(d)]),
    "hinge_embedding": (lambda f, x, t, r: f.hinge_embedding_loss(x, t, 0.5, reduction=r),
                        lambda d: [rand(4, 5, low=-2, high=2, dtype=d), np.array([1.0, -1.0, 0.0, 1.0, -1.0], d)]),
    "soft_margin": (lambda f, x, t, r: f.soft_margin_loss(x, t, reduction=r),
                    lambda d: [rand(4, 5, low=-3, high=3, dtype=d), _sign(4, 5)]),
    "triplet_margin": (lambda f, a, p, n, r: f.triplet_margin_loss(a, p, n, margin=2.0, reduction=r),
                       lambda d: [rand(4, 5, dtype=d), rand(4, 5, seed=1, dtype=d), rand(4, 5, seed=2, dtype=d)]),
    "triplet_margin_p1_swap": (lambda f, a, p, n, r: f.triplet_margin_loss(a, p, n, 1.5, 1, swap=True, reduction=r),
                               lambda d: [rand(4, 5, dtype=d), rand(4, 5, seed=1, dtype=d),
                                          rand(4, 5, seed=2, dtype=d) * 0.1]),
    "triplet_distance": (lambda f, a, p, n, r: f.triplet_margin_with_distance_loss(a, p, n, margin=2.0, reduction=r),
                         lambda d: [rand(4, 5, dtype=d), rand(4, 5, seed=1, dtype=d), rand(4, 5, seed=2, dtype=d)]),
    "triplet_distance_cosine_swap": (
        lambda f, a, p, n, r: f.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda u, v: 1.0 - f.cosine_similarity(u, v), margin=0.8, swap=True,
            reduction=r),
        lambda d: [rand(4, 5, dtype=d), rand(4, 5, seed=1, dtype=d), rand(4, 5, seed=2, dtype=d)]),
    "multilabel_margin": (lambda f, x, t, r: f.multilabel_margin_loss(x, t, reduction=r),
                          lambda d: [rand(3, 4, dtype=d),
                                     np.array([[0, 1, -1, 2], [3, -1, 0, 0], [1, 1, 2, 0]], np.int64)]),
    "multilabel_margin_1d": (lambda f, x, t, r: f.multilabel_margin_loss(x, t, reduction=r),
                             lambda d: [rand(5, dtype=d), np.array([4, 0, -1, 1, 2], np.int64)]),
    "multilabel_soft_margin": (lambda f, x, t, w, r: f.multilabel_soft_margin_loss(x, t, w, reduction=r),
                               lambda d: [rand(3, 4, low=-3, high=3, dtype=d),
                                          (rand(3, 4, seed=1) > 0).astype(d), rand(4, seed=2, high=2, dtype=d)]),
    "multi_margin": (lambda f, x, t, r: f.multi_margin_loss(x, t, margin=0.7, reduction=r),
                     lambda d: [rand(4, 5, dtype=d), np.array([0, 4, 2, 2])]),
    "multi_margin_p2_weight": (
        lambda f, x, t, r: f.multi_margin_loss(x, t, p=2, weight=x.new_tensor([0.5, 1.0, 2.0, 1.5, 0.1]),
                                               reduction=r),
        lambda d: [rand(4, 5, dtype=d), np.array([1, 4, 0, 3])]),
    "multi_margin_1d": (lambda f, x, t, r: f.multi_margin_loss(x, t, reduction=r),
                        lambda d: [rand(5, dtype=d), np.array(3)]),
    "poisson_nll": (lambda f, x, t, r: f.poisson_nll_loss(x, t, reduction=r),
                    lambda d: [rand(3, 4, dtype=d), rand(3, 4, seed=1, low=0, high=4, dtype=d)]),
    "poisson_nll_rate_full": (lambda f, x, t, r: f.poisson_nll_loss(x, t, log_input=False, full=True, reduction=r),
                              lambda d: [rand(3, 4, low=0.1, high=3, dtype=d),
                                         rand(3, 4, seed=1, low=0.5, high=4, dtype=d)]),
    "gaussian_nll": (lambda f, x, t, v, r: f.gaussian_nll_loss(x, t, v, reduction=r),
                     lambda d: [rand(3, 4, dtype=d), rand(3, 4, seed=1, dtype=d),
                                rand(3, 4, seed=2, low=0.1, high=2, dtype=d)]),
    "gaussian_nll_full_shared_var": (lambda f, x, t, v, r: f.gaussian_nll_loss(x, t, v, full=True, reduction=r),
                                     lambda d: [rand(3, 4, dtype=d), rand(3, 4, seed=1, dtype=d),
                                                rand(3, seed=2, low=0.1, high=2, dtype=d)]),
    "gaussian_nll_var_dim1": (lambda f, x, t, v, r: f.gaussian_nll_loss(x, t, v, eps=0.3, reduction=r),
                              lambda d: [rand(3, 4, dtype=d), rand(3, 4, seed=1, dtype=d),
                                         rand(1, 4, seed=2, low=0.4, high=2, dtype=d)]),
}
REDUCTIONS = ["none", "mean", "sum"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_gradcheck(name, reduction):
    fn, inputs = LOSSES[name]
    check_grad(lambda *t: fn(F, *t, reduction), *inputs(np.float64), gradgrad=reduction == "sum")


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_parity(name, reduction, dtype):
    fn, inputs = LOSSES[name]
    compare_torch(lambda *t: fn(F, *t, reduction), lambda *t: fn(TF, *t, reduction), *inputs(dtype))


@requires_torch
def test_loss_scalar_var_and_broadcast_target():
    a, t = rand(3, 4), rand(4, seed=1)
    # variances below eps are clamped in value, their gradient passed through unchanged (as PyTorch)
    compare_torch(lambda x, y, v: F.gaussian_nll_loss(x, y, v, eps=0.3),
                  lambda x, y, v: TF.gaussian_nll_loss(x, y, v, eps=0.3), a, a[::-1].copy(), np.abs(a))
    compare_torch(lambda x, y: F.gaussian_nll_loss(x, y, 0.5), lambda x, y: TF.gaussian_nll_loss(x, y, 0.5), a, t)
    compare_torch(lambda x, y: F.poisson_nll_loss(x, y), lambda x, y: TF.poisson_nll_loss(x, y), a, np.abs(t))
    compare_torch(lambda x, y: F.hinge_embedding_loss(x, y), lambda x, y: TF.hinge_embedding_loss(x, y), a,
                  np.sign(t))
    compare_torch(lambda x, y: F.margin_ranking_loss(x, y, x.new_ones(1)),
                  lambda x, y: TF.margin_ranking_loss(x, y, x.new_ones(1)), a[0], t[:1])


@requires_torch
def test_losses_legacy_size_average_and_reduce():
    a, b = rand(4, 5), rand(4, 5, seed=1)
    tg = np.array([1, -1, 1, 1])
    for sa, rd in ((False, None), (None, False), (True, True)):
        with pytest.warns(UserWarning, match="size_average and reduce"):
            e = F.cosine_embedding_loss(ember.tensor(a), ember.tensor(b), ember.tensor(tg), size_average=sa, reduce=rd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = TF.cosine_embedding_loss(torch.tensor(a), torch.tensor(b), torch.tensor(tg), size_average=sa,
                                         reduce=rd)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-12)
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.MultiLabelMarginLoss(size_average=False).reduction == "sum"


def _ctc_brute_force(lp, target, length):
    """−ln Σ over every path of `length` frames (classes C^length) that collapses to `target` (repeats merged,
    blanks 0 removed) of Π_t p_t(path_t): the definition of the CTC loss, by enumeration."""
    total = 0.0
    for path in itertools.product(range(lp.shape[1]), repeat=length):
        merged = [c for i, c in enumerate(path) if (i == 0 or c != path[i - 1]) and c != 0]
        if merged == list(target):
            total += math.exp(sum(lp[t, c] for t, c in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


def test_ctc_loss_is_minus_log_sum_over_alignments():
    lp = np.log(np.random.default_rng(0).dirichlet(np.ones(3), (5, 4)))  # (T, N, C)
    targets = np.array([[1, 2], [1, 1], [2, 0], [1, 1]])
    il, tl = np.array([5, 5, 4, 2]), np.array([2, 2, 1, 2])
    r = F.ctc_loss(ember.tensor(lp), ember.tensor(targets), ember.tensor(il), ember.tensor(tl), reduction="none")
    expected = [_ctc_brute_force(lp[:, n], targets[n, :tl[n]], il[n]) for n in range(4)]
    np.testing.assert_allclose(r.numpy(), expected, rtol=1e-10)  # the last: "1 1" needs 3 frames, has 2: inf


def test_ctc_loss_gradient():
    """PyTorch's gradient is d(loss)/d(logits) when log_probs = log_softmax(logits): gradcheck through it."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 2, 4))
    tg, il, tl = ember.tensor([[1, 2, 2], [3, 3, 0]]), ember.tensor([6, 5]), ember.tensor([3, 2])
    for red in ("mean", "none"):
        check_grad(lambda t: F.ctc_loss(t.log_softmax(2), tg, il, tl, blank=0, reduction=red), x, gradgrad=False)
    lpt = ember.tensor(x, requires_grad=True)
    loss = F.ctc_loss(lpt.log_softmax(2), tg, il, tl)
    (g,) = ember.autograd.grad(loss, lpt, create_graph=True)
    with pytest.raises(RuntimeError, match="ctc_loss.*double backward.*not implemented"):
        ember.autograd.grad(g.sum(), lpt)


CTC = {  # name -> (targets, input_lengths, target_lengths, options), on log_probs (T=7, N=3, C=5)
    "padded": (np.array([[1, 2, 2], [3, 1, 0], [4, 4, 1]]), np.array([7, 5, 6]), np.array([3, 2, 1]), {}),
    "concatenated_lists": (np.array([1, 2, 2, 3, 1, 4]), [7, 5, 6], (3, 2, 1), {}),
    "blank_last": (np.array([[1, 2, 2], [3, 1, 0], [0, 0, 1]]), np.array([7, 7, 7]), np.array([3, 2, 3]),
                   {"blank": 4}),
    "empty_targets_and_input": (np.array([[1, 2, 2], [3, 1, 0], [4, 4, 1]]), np.array([7, 0, 3]),
                                np.array([0, 0, 2]), {}),
    "impossible": (np.array([[1, 1, 1], [3, 1, 0], [4, 4, 1]]), np.array([4, 5, 1]), np.array([3, 2, 1]), {}),
    "impossible_zero_infinity": (np.array([[1, 1, 1], [3, 1, 0], [4, 4, 1]]), np.array([4, 5, 1]),
                                 np.array([3, 2, 1]), {"zero_infinity": True}),
}


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(CTC))
def test_ctc_loss_parity(name, reduction, dtype):
    tg, il, tl, kw = CTC[name]
    lp = np.random.default_rng(2).standard_normal((7, 3, 5)).astype(dtype)

    def wrap(lib, v):
        return lib.tensor(v) if isinstance(v, np.ndarray) else v

    def run(lib, f):
        return lambda x: f.ctc_loss(x, wrap(lib, tg), wrap(lib, il), wrap(lib, tl), reduction=reduction, **kw)

    compare_torch(run(ember, F), run(torch, TF), lp)  # raw log_probs: PyTorch's gradient, e^lp term included
    compare_torch(lambda x: run(ember, F)(x.log_softmax(2)), lambda x: run(torch, TF)(x.log_softmax(2)), lp)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ctc_loss_unbatched_parity(dtype):
    lp = np.random.default_rng(3).standard_normal((6, 4)).astype(dtype)
    # the target as a (target_length,) sequence with 0-d tensor lengths, or padded (1, S) with list lengths
    for tg, il, tl in (([1, 3, 3], 6, 3), ([[1, 3, 3, 2]], [5], [2])):
        for red in ("mean", "none"):
            compare_torch(lambda x: F.ctc_loss(x, ember.tensor(tg), *_lengths(ember, il, tl), reduction=red),
                          lambda x: TF.ctc_loss(x, torch.tensor(tg), *_lengths(torch, il, tl), reduction=red), lp)


def _lengths(lib, il, tl):
    return (il, tl) if isinstance(il, list) else (lib.tensor(il), lib.tensor(tl))


def test_ctc_loss_module_and_int32_lengths():
    lp = ember.tensor(np.log(np.full((5, 2, 3), 1 / 3)))
    m = nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    assert repr(m) == "CTCLoss()" and (m.blank, m.reduction, m.zero_infinity) == (0, "sum", True)
    r = m(lp, ember.tensor([[1, 2], [2, 0]], dtype=ember.int32), ember.tensor([5, 4], dtype=ember.int32),
          ember.tensor([2, 1], dtype=ember.int32))
    expected = _ctc_brute_force(lp.numpy()[:, 0], [1, 2], 5) + _ctc_brute_force(lp.numpy()[:, 1], [2], 4)
    assert r.item() == pytest.approx(expected, rel=1e-10)


# ---------------------------------------------------------------------- normalisation
@requires_torch
@pytest.mark.parametrize("momentum", [0.1, 0.6])
def test_instance_norm_running_stats_and_eval_as_pytorch(momentum):
    a = rand(4, 3, 6, 2, seed=3, dtype=np.float32) * 3 + 1
    rm, rv = ember.zeros(3), ember.ones(3)
    trm, trv = torch.zeros(3), torch.ones(3)
    for _ in range(2):
        e = F.instance_norm(ember.tensor(a), rm, rv, momentum=momentum)
        t = TF.instance_norm(torch.tensor(a), trm, trv, momentum=momentum)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rm.numpy(), trm.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(rv.numpy(), trv.numpy(), rtol=1e-5, atol=1e-6)
    w, b = rand(3, seed=4, dtype=np.float32), rand(3, seed=5, dtype=np.float32)
    compare_torch(lambda x, w_, b_: F.instance_norm(x, rm, rv, w_, b_, use_input_stats=False),
                  lambda x, w_, b_: TF.instance_norm(x, trm, trv, w_, b_, use_input_stats=False), a, w, b)


@requires_torch
@pytest.mark.parametrize("cls,shape", [("InstanceNorm1d", (2, 3, 5)), ("InstanceNorm1d", (3, 5)),
                                       ("InstanceNorm2d", (2, 3, 4, 2)), ("InstanceNorm2d", (3, 4, 2)),
                                       ("InstanceNorm3d", (2, 3, 2, 2, 3)), ("InstanceNorm3d", (3, 2, 2, 3))])
@pytest.mark.parametrize("affine,track", [(False, False), (True, True)])
def test_instance_norm_modules_as_pytorch(cls, shape, affine, track):
    e, t = getattr(nn, cls)(3, affine=affine, track_running_stats=track), getattr(torch.nn, cls)(3, affine=affine,
                                                                                                 track_running_stats=track)
    assert repr(e) == repr(t) and list(e.state_dict()) == list(t.state_dict())
    if affine:
        with ember.no_grad():
            e.weight.copy_(ember.tensor([0.5, 2.0, -1.0]))
            e.bias.copy_(ember.tensor([0.1, 0.0, 0.3]))
        with torch.no_grad():
            t.weight.copy_(torch.tensor([0.5, 2.0, -1.0]))
            t.bias.copy_(torch.tensor([0.1, 0.0, 0.3]))
    a = rand(*shape, seed=6, dtype=np.float32) * 2
    for mode in ("train", "eval"):
        getattr(e, mode)(), getattr(t, mode)()
        compare_torch(lambda x: e(x), lambda x: t(x), a)
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(e.state_dict()[k].numpy(), v.numpy(), rtol=1e-5, atol=1e-6, err_msg=k)


def test_instance_norm_module_checks():
    with pytest.warns(UserWarning, match="InstanceNorm1d.*dim=1 does not match num_features"):
        nn.InstanceNorm1d(3)(ember.randn(2, 4, 5))
    with pytest.raises(ValueError, match="InstanceNorm1d.*num_features \\(3\\), but got: 4"):
        nn.InstanceNorm1d(3, affine=True)(ember.randn(2, 4, 5))
    with pytest.raises(ValueError, match="InstanceNorm2d.*3D or 4D input \\(got 2D"):
        nn.InstanceNorm2d(3)(ember.randn(3, 5))
    m = nn.InstanceNorm2d(3, track_running_stats=True, momentum=None)  # momentum None: the stats stay put, as PyTorch
    m(ember.randn(2, 3, 4, 4))
    np.testing.assert_array_equal(m.running_mean.numpy(), 0)
    assert m.num_batches_tracked.item() == 0


def test_rms_norm_module():
    m = nn.RMSNorm([2, 3], eps=1e-5)
    assert repr(m) == "RMSNorm((2, 3), eps=1e-05, elementwise_affine=True)" and m.weight.shape == (2, 3)
    np.testing.assert_array_equal(m.weight.detach().numpy(), 1)
    x = ember.randn(4, 2, 3)
    with ember.no_grad():
        m.weight.mul_(2)
    np.testing.assert_allclose(m(x).detach().numpy(), 2 * F.rms_norm(x, (2, 3), eps=1e-5).numpy(), rtol=1e-6)
    m = nn.RMSNorm(3, elementwise_affine=False, dtype=ember.float64)
    assert m.weight is None and list(m.state_dict()) == [] and repr(m) == "RMSNorm((3,), eps=None, elementwise_affine=False)"


# ---------------------------------------------------------------------- layers: printed form, parameters, parity
MODULE_REPRS = [
    (lambda m: m.CELU(), "CELU(alpha=1.0)"), (lambda m: m.CELU(2.0, inplace=True), "CELU(alpha=2.0, inplace=True)"),
    (lambda m: m.GLU(), "GLU(dim=-1)"), (lambda m: m.Hardshrink(), "Hardshrink(0.5)"),
    (lambda m: m.Softshrink(0.2), "Softshrink(0.2)"), (lambda m: m.Hardsigmoid(True), "Hardsigmoid()"),
    (lambda m: m.Hardswish(), "Hardswish()"), (lambda m: m.PReLU(3, 0.1), "PReLU(num_parameters=3)"),
    (lambda m: m.RReLU(), "RReLU(lower=0.125, upper=0.3333333333333333)"),
    (lambda m: m.RReLU(0.1, 0.3, True), "RReLU(lower=0.1, upper=0.3, inplace=True)"),
    (lambda m: m.Softmin(), "Softmin(dim=None)"), (lambda m: m.Softmin(1), "Softmin(dim=1)"),
    (lambda m: m.Softsign(), "Softsign()"), (lambda m: m.Tanhshrink(), "Tanhshrink()"),
    (lambda m: m.Threshold(0.1, 20), "Threshold(threshold=0.1, value=20)"),
    (lambda m: m.Threshold(0.1, 20, True), "Threshold(threshold=0.1, value=20, inplace=True)"),
    (lambda m: m.Softmax2d(), "Softmax2d()"), (lambda m: m.AlphaDropout(), "AlphaDropout(p=0.5, inplace=False)"),
    (lambda m: m.FeatureAlphaDropout(0.2), "FeatureAlphaDropout(p=0.2, inplace=False)"),
    (lambda m: m.Dropout1d(), "Dropout1d(p=0.5, inplace=False)"),
    (lambda m: m.Dropout3d(inplace=True), "Dropout3d(p=0.5, inplace=True)"),
    (lambda m: m.CosineEmbeddingLoss(0.5), "CosineEmbeddingLoss()"),
    (lambda m: m.TripletMarginWithDistanceLoss(), "TripletMarginWithDistanceLoss(\n  (distance_function): "
                                                  "PairwiseDistance()\n)"),
    (lambda m: m.InstanceNorm1d(3), "InstanceNorm1d(3, eps=1e-05, momentum=0.1, affine=False, bias=False, "
                                    "track_running_stats=False)"),
    (lambda m: m.InstanceNorm3d(4, affine=True, bias=False, momentum=None),
     "InstanceNorm3d(4, eps=1e-05, momentum=None, affine=True, bias=False, track_running_stats=False)"),
    (lambda m: m.LocalResponseNorm(2), "LocalResponseNorm(2, alpha=0.0001, beta=0.75, k=1.0)"),
    (lambda m: m.CrossMapLRN2d(3), "CrossMapLRN2d(3, alpha=0.0001, beta=0.75, k=1)"),
    (lambda m: m.RMSNorm(4), "RMSNorm((4,), eps=None, elementwise_affine=True)"),
    (lambda m: m.CosineSimilarity(0), "CosineSimilarity()"), (lambda m: m.PairwiseDistance(1), "PairwiseDistance()"),
]


@pytest.mark.parametrize("make,expected", MODULE_REPRS)
def test_module_repr(make, expected):
    assert repr(make(nn)) == expected
    if torch is not None:
        assert repr(make(torch.nn)) == expected


def test_module_attributes_and_state_dicts():
    p = nn.PReLU(3, 0.1, dtype=ember.float64)
    assert (p.num_parameters, p.init) == (3, 0.1) and list(p.state_dict()) == ["weight"]
    np.testing.assert_array_equal(p.weight.detach().numpy(), [0.1] * 3)
    assert p.weight.dtype == ember.float64 and p.weight.requires_grad
    d = nn.PairwiseDistance(1, 1e-3, True)
    assert (d.norm, d.eps, d.keepdim) == (1, 1e-3, True)
    assert list(nn.MultiMarginLoss(weight=ember.ones(3)).state_dict()) == ["weight"]
    assert list(nn.MultiLabelSoftMarginLoss().state_dict()) == []
    m = nn.TripletMarginLoss(margin=0.5, p=1, swap=True)
    assert (m.margin, m.p, m.eps, m.swap, m.reduction) == (0.5, 1, 1e-6, True, "mean")
    g = nn.GaussianNLLLoss(full=True, eps=1e-3, reduction="sum")
    assert (g.full, g.eps, g.reduction) == (True, 1e-3, "sum")
    q = nn.PoissonNLLLoss(log_input=False, full=True, eps=1e-4)
    assert (q.log_input, q.full, q.eps) == (False, True, 1e-4)


@requires_torch
def test_modules_forward_as_pytorch():
    x, y, z = (rand(4, 6, seed=s, dtype=np.float32) for s in (1, 2, 3))  # (the layers' parameters are float32)
    sign = _sign(4).astype(np.float32)
    cases = [
        (lambda m: m.CELU(0.8), [x]), (lambda m: m.GLU(0), [x]), (lambda m: m.Hardshrink(0.3), [x]),
        (lambda m: m.Softshrink(0.3), [x]), (lambda m: m.Hardsigmoid(), [x * 4]), (lambda m: m.Hardswish(), [x * 4]),
        (lambda m: m.PReLU(), [x]), (lambda m: m.Softmin(1), [x]), (lambda m: m.Softsign(), [x]),
        (lambda m: m.Tanhshrink(), [x]), (lambda m: m.Threshold(0.1, -3.0), [x]),
        (lambda m: m.Softmax2d(), [rand(2, 3, 2, 2)]), (lambda m: m.Softmax2d(), [rand(3, 2, 2)]),
        (lambda m: m.CosineSimilarity(0), [x, y]), (lambda m: m.PairwiseDistance(3, keepdim=True), [x, y]),
        (lambda m: m.LocalResponseNorm(3, 0.1), [rand(2, 4, 3)]), (lambda m: m.RMSNorm(6), [x]),
        (lambda m: m.CosineEmbeddingLoss(0.1, reduction="sum"), [x, y, _sign(4)]),
        (lambda m: m.MarginRankingLoss(0.2), [x[:, 0], y[:, 0], sign]), (lambda m: m.HingeEmbeddingLoss(), [x, _sign(4, 6)]),
        (lambda m: m.SoftMarginLoss(), [x, _sign(4, 6)]), (lambda m: m.TripletMarginLoss(p=1, swap=True), [x, y, z]),
        (lambda m: m.TripletMarginWithDistanceLoss(swap=True), [x, y, z]),
        (lambda m: m.MultiLabelMarginLoss(), [x, np.array([[0, 5, -1, 0, 0, 0]] * 4)]),
        (lambda m: m.MultiLabelSoftMarginLoss(), [x, (y > 0).astype(np.float32)]),
        (lambda m: m.MultiMarginLoss(p=2, margin=0.5), [x, np.array([0, 5, 3, 3])]),
        (lambda m: m.PoissonNLLLoss(full=True), [x, np.abs(y) * 3]), (lambda m: m.GaussianNLLLoss(), [x, y, np.abs(z)]),
    ]
    for make, arrays in cases:
        e, t = make(nn), make(torch.nn)
        compare_torch(lambda *a: e(*a), lambda *a: t(*a), *arrays)


# ---------------------------------------------------------------------- errors: PyTorch's types, named culprits
ERRORS = [
    (lambda m: _lib(m).celu(m.ones(2), 0.0), RuntimeError, "alpha cannot be 0"),
    (lambda m: _lib(m).softshrink(m.ones(2), -1.0), RuntimeError, "lambd?a? .*-1"),
    (lambda m: _lib(m).glu(m.ones(2, 3), 1), RuntimeError, "Halving dimension must be even.*dimension 1 is size 3"),
    (lambda m: _lib(m).glu(m.tensor(1.0)), RuntimeError, "glu.*scalars"),
    (lambda m: _lib(m).glu(m.ones(2, 4), 2), IndexError, "Dimension out of range"),
    (lambda m: _lib(m).prelu(m.ones(2, 3, 4), m.ones(2)), RuntimeError, "parameter numbers = 2 and channel size = 3"),
    (lambda m: _lib(m).prelu(m.ones(5), m.ones(5)), RuntimeError, "parameter numbers = 5 and channel size = 1"),
    (lambda m: _lib(m).prelu(m.ones(2, 3), m.ones(3, 1)), RuntimeError, "scalar or 1D tensor.*ndim = 2"),
    (lambda m: _lib(m).prelu(m.ones(2, 3), m.ones(3, dtype=m.float64)), RuntimeError, "Type promoting.*prelu|prelu.*Type promoting"),
    (lambda m: _lib(m).rrelu(m.ones(2), 0.5, 0.1, training=True), RuntimeError, "Lower bound.*upper bound"),
    (lambda m: _lib(m).alpha_dropout(m.ones(2), 1.5), ValueError, "dropout probability.*1.5"),
    (lambda m: _lib(m).alpha_dropout(m.ones(2, dtype=m.long), 0.5, True), RuntimeError, "alpha_dropout.*int64"),
    (lambda m: _lib(m).feature_alpha_dropout(m.ones(3), 0.5, True), RuntimeError, "Feature dropout requires at least 2"),
    (lambda m: _lib(m).dropout1d(m.ones(2, 3, 4, 5)), RuntimeError, "dropout1d: Expected 2D or 3D input.*4D"),
    (lambda m: _lib(m).dropout3d(m.tensor(3.0)), RuntimeError, "at least 2 dimensions"),
    (lambda m: _lib(m).gumbel_softmax(m.ones(2, 3, dtype=m.long)), RuntimeError, "gumbel_softmax.*floating"),
    (lambda m: m.nn.Softmax2d()(m.ones(2, 3)), ValueError, "Softmax2d: expected input to be 3D or 4D, got 2D"),
    (lambda m: _lib(m).pairwise_distance(m.ones(3, 4), m.ones(3, 5)), RuntimeError, None),
    (lambda m: _lib(m).cosine_embedding_loss(m.ones(2, 3, 4), m.ones(2, 3, 4), m.ones(2)), RuntimeError,
     "1D target tensor expects 2D input tensors.*\\[2, 3, 4\\]"),
    (lambda m: _lib(m).cosine_embedding_loss(m.ones(3), m.ones(3), m.ones(3, 1)), RuntimeError, "multi-target"),
    (lambda m: _lib(m).margin_ranking_loss(m.ones(3), m.ones(3), m.ones(3, 1)), RuntimeError,
     "All input tensors should have same dimension.*target: \\[3, 1\\]"),
    (lambda m: _lib(m).triplet_margin_loss(m.ones(2, 3), m.ones(2, 3), m.ones(3)), RuntimeError,
     "anchor 2D, positive 2D, and negative 1D"),
    (lambda m: _lib(m).triplet_margin_loss(m.ones(2, 3), m.ones(2, 3), m.ones(2, 3), margin=-1), ValueError,
     "margin must be greater than 0, got -1"),
    (lambda m: _lib(m).triplet_margin_with_distance_loss(m.ones(2), m.ones(2), m.ones(2), reduction="x"), ValueError,
     "x is not a valid value for reduction"),
    (lambda m: m.nn.TripletMarginWithDistanceLoss(margin=0), ValueError, "expected margin to be greater than 0"),
    (lambda m: _lib(m).multilabel_margin_loss(m.ones(3, 4), m.zeros(1, 4, dtype=m.long)), RuntimeError,
     "inconsistent target size: \\[1, 4\\] for input of size: \\[3, 4\\]"),
    (lambda m: _lib(m).multilabel_margin_loss(m.ones(3, 4), m.zeros(3, 4)), RuntimeError, "Long.*float32|float32.*Long"),
    (lambda m: _lib(m).multilabel_margin_loss(m.ones(2, 4), m.tensor([[0, 9, -1, 0], [0, 0, 0, 0]])), RuntimeError,
     "out of range"),
    (lambda m: _lib(m).multilabel_margin_loss(m.ones(2, 3, 4), m.zeros(2, 3, 4, dtype=m.long)), RuntimeError,
     "non-empty vector or matrix.*\\[2, 3, 4\\]"),
    (lambda m: _lib(m).multi_margin_loss(m.ones(3, 4), m.tensor([0, 1]), p=3), ValueError, "only p == 1 and p == 2"),
    (lambda m: _lib(m).multi_margin_loss(m.ones(3, 4), m.tensor([0, 1])), RuntimeError,
     "Expected target size \\[3\\], but got \\[2\\]"),
    (lambda m: _lib(m).multi_margin_loss(m.ones(3, 4), m.tensor([0, 1, 4])), RuntimeError, "target out of range"),
    (lambda m: _lib(m).multi_margin_loss(m.ones(3, 4), m.tensor([0, 1, 2]), weight=m.ones(4, 1)), ValueError,
     "weight must be one-dimensional"),
    (lambda m: _lib(m).multi_margin_loss(m.ones(3, 4), m.tensor([0, 1, 2]), weight=m.ones(3)), RuntimeError,
     "inconsistent weight size, expected 4"),
    (lambda m: _lib(m).multi_margin_loss(m.ones(3, 4), m.tensor([0, 1, 2]), weight=m.ones(4, requires_grad=True)),
     RuntimeError, "not differentiable with respect to .*weight"),
    (lambda m: m.nn.MultiMarginLoss(weight=m.ones(3, 1)), ValueError, "expected weight to be None or 1D tensor, got 2D"),
    (lambda m: _lib(m).soft_margin_loss(m.ones(3), m.ones(3, requires_grad=True)), RuntimeError,
     "not differentiable with respect to .*target"),
    (lambda m: _lib(m).poisson_nll_loss(m.ones(3), m.ones(3), reduction="bad"), ValueError,
     "bad.* is not a valid value for reduction"),
    (lambda m: _lib(m).gaussian_nll_loss(m.ones(3, 4), m.ones(3, 4), m.ones(4)), ValueError, "var is of incorrect size"),
    (lambda m: _lib(m).gaussian_nll_loss(m.ones(3, 4), m.ones(3, 4), m.ones(1, 1)), ValueError, "incorrect size"),
    (lambda m: _lib(m).gaussian_nll_loss(m.ones(3, 4), m.ones(3, 4), -m.ones(3, 4)), ValueError, "var has negative"),
    (lambda m: _lib(m).gaussian_nll_loss(m.ones(3, 4), m.ones(3, 4), -1.0), ValueError, "var has negative"),
    (lambda m: _lib(m).gaussian_nll_loss(m.ones(3, 4), m.ones(3, 4), m.ones(3, 4), reduction="x"), ValueError,
     "x is not valid"),
    (lambda m: _lib(m).instance_norm(m.ones(2, 3)), ValueError, "more than 1 spatial element.*\\[2, 3\\]"),
    (lambda m: _lib(m).instance_norm(m.ones(2, 3, 4), use_input_stats=False), RuntimeError,
     "running_mean and running_var to be defined when use_input_stats is false"),
    (lambda m: _lib(m).instance_norm(m.ones(2, 3, 4), weight=m.ones(4)), RuntimeError, "weight should contain"),
    (lambda m: _lib(m).instance_norm(m.ones(2, 3, 4, dtype=m.long)), NotImplementedError, None),
    (lambda m: _lib(m).local_response_norm(m.ones(2, 3), 2), ValueError, "Expected 3D or higher dimensionality.*2"),
    (lambda m: _lib(m).local_response_norm(m.ones(2, 3, 4), 0), RuntimeError, "size.*greater than zero"),
    (lambda m: m.nn.CrossMapLRN2d(3)(m.ones(2, 3, 4)), ValueError, "CrossMapLRN2d: Expected input to be 4D, got 3D"),
    (lambda m: _lib(m).rms_norm(m.ones(2, 3), [4]), RuntimeError, "normalized_shape=\\[4\\].*\\[2, 3\\]"),
    (lambda m: _lib(m).rms_norm(m.ones(2, 3), [3], weight=m.ones(4)), RuntimeError,
     "weight to be of same shape as normalized_shape.*\\[4\\]"),
    (lambda m: _lib(m).rms_norm(m.ones(2, 3), []), RuntimeError, "at least 1-dimensional"),
    (lambda m: _lib(m).rms_norm(m.ones(2, 3, dtype=m.long), [3]), NotImplementedError, "rms_norm"),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_errors_like_pytorch(i):
    fn, exc, match = ERRORS[i]
    raises_like_torch(fn, ember, exc, match)
    if torch is not None:
        raises_like_torch(fn, torch, exc)


CTC_ERRORS = [  # (log_probs shape, targets, input_lengths, target_lengths, options, exception, match)
    ((7, 2, 5), [[1, 2], [3, 1]], [8, 5], [2, 2], {}, RuntimeError, "input_lengths to have value at most 7.*8"),
    ((7, 2, 5), [[1, 2], [3, 1]], [7, 5], [3, 2], {}, RuntimeError, "at least 3"),
    ((7, 2, 5), [[1, 2], [3, 1]], [-1, 5], [2, 2], {}, RuntimeError, "input_lengths to have value at least 0.*-1"),
    ((7, 2, 5), [[1, 2], [3, 1]], [7, 5], [2, 2], {"blank": 5}, RuntimeError, "blank must be in label range"),
    ((7, 2, 5), [[1, 2], [3, 1]], [7], [2, 2], {}, RuntimeError, "input_lengths must be of size batch_size"),
    ((7, 2, 5), [[1, 2], [3, 1]], [7, 5], [2], {}, RuntimeError, "target_lengths must be of size batch_size"),
    ((7, 2, 5), [[1, 2]], [7, 5], [2, 2], {}, RuntimeError, "size 2|\\(2\\)"),
    ((7, 2, 5), [1, 2, 3], [7, 5], [2, 2], {}, RuntimeError, "size 4"),
    ((7, 2, 5), [[1, 2], [3, 1]], [7, 5], [2, 2], {"reduction": "bad"}, ValueError, "bad.*is not a valid value"),
    ((7, 2, 2, 5), [[1, 2], [3, 1]], [7, 5], [2, 2], {}, RuntimeError, "log_probs|3-dimensional"),
    ((0, 2, 5), [[1, 2], [3, 1]], [0, 0], [2, 2], {}, RuntimeError, "must not be empty"),
]


@pytest.mark.parametrize("i", range(len(CTC_ERRORS)))
def test_ctc_errors_like_pytorch(i):
    shape, tg, il, tl, kw, exc, match = CTC_ERRORS[i]

    def fn(m):
        return _lib(m).ctc_loss(m.zeros(*shape), m.tensor(tg), m.tensor(il), m.tensor(tl), **kw)
    raises_like_torch(fn, ember, exc, match)
    if torch is not None:
        raises_like_torch(fn, torch, exc)


def test_ctc_errors_ember_checks_more():
    lp = ember.zeros(5, 2, 4)
    with pytest.raises(IndexError, match="target 7 is out of bounds.*\\[0, 4\\)"):
        F.ctc_loss(lp, ember.tensor([[1, 7], [1, 2]]), [5, 5], [2, 2])  # (PyTorch reads out of bounds)
    with pytest.raises(RuntimeError, match="input_lengths must be integral"):
        F.ctc_loss(lp, ember.tensor([[1, 2], [1, 2]]), ember.tensor([5.0, 5.0]), [2, 2])
    with pytest.raises(TypeError, match="input_lengths must be a Tensor or a tuple/list of ints"):
        F.ctc_loss(lp[:, 0], ember.tensor([1, 2]), 5, 2)
    with pytest.raises(NotImplementedError, match="ctc_loss.*int64 log_probs"):
        F.ctc_loss(lp.long(), ember.tensor([[1, 2], [1, 2]]), [5, 5], [2, 2])


def test_non_tensor_arguments_are_type_errors():
    for fn in (lambda: F.hardswish([1.0]), lambda: F.prelu(ember.ones(2), [0.2]),
               lambda: F.pairwise_distance(ember.ones(2), [1.0]), lambda: F.soft_margin_loss(ember.ones(2), [1.0]),
               lambda: F.gaussian_nll_loss(ember.ones(2), ember.ones(2), "1"), lambda: F.rms_norm([1.0], [1]),
               lambda: F.instance_norm(np.ones((2, 3, 4))), lambda: F.ctc_loss(np.zeros((3, 2)), ember.ones(2), [3], [1])):
        with pytest.raises(TypeError):
            fn()
