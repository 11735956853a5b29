"""Activations, softmax / log-softmax and dropout (ember/ops/nn_activation.py) and their modules
(ember/nn/modules/activation.py, dropout.py): gradients, PyTorch parity, stability, dropout statistics."""
import warnings

import numpy as np
import pytest
from helpers import COMPILE, check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember
import ember.nn as nn
import ember.nn.functional as F

if torch is not None:
    import torch.nn.functional as TF

# name -> (ember function, PyTorch function (by name in torch.nn.functional), input range)
ACTS = {
    "relu": (F.relu, "relu", {}, (-2, 2)),
    "relu6": (F.relu6, "relu6", {}, (-3, 8)),
    "leaky_relu": (F.leaky_relu, "leaky_relu", {}, (-2, 2)),
    "leaky_relu_0.2": (F.leaky_relu, "leaky_relu", {"negative_slope": 0.2}, (-2, 2)),
    "elu": (F.elu, "elu", {}, (-3, 2)),
    "elu_0.5": (F.elu, "elu", {"alpha": 0.5}, (-3, 2)),
    "selu": (F.selu, "selu", {}, (-3, 2)),
    "gelu": (F.gelu, "gelu", {}, (-4, 4)),
    "gelu_tanh": (F.gelu, "gelu", {"approximate": "tanh"}, (-4, 4)),
    "silu": (F.silu, "silu", {}, (-5, 5)),
    "mish": (F.mish, "mish", {}, (-5, 5)),
    "softplus": (F.softplus, "softplus", {}, (-5, 5)),
    "softplus_beta": (F.softplus, "softplus", {"beta": 2.0, "threshold": 3.0}, (-3, 3)),
    "hardtanh": (F.hardtanh, "hardtanh", {}, (-2, 2)),
    "hardtanh_range": (F.hardtanh, "hardtanh", {"min_val": -0.5, "max_val": 1.5}, (-2, 2)),
    "sigmoid": (F.sigmoid, "sigmoid", {}, (-4, 4)),
    "tanh": (F.tanh, "tanh", {}, (-3, 3)),
    "logsigmoid": (F.logsigmoid, "logsigmoid", {}, (-6, 6)),
    "softmax_1": (F.softmax, "softmax", {"dim": 1}, (-3, 3)),
    "softmax_-1": (F.softmax, "softmax", {"dim": -1}, (-3, 3)),
    "softmax_0": (F.softmax, "softmax", {"dim": 0}, (-3, 3)),
    "log_softmax_1": (F.log_softmax, "log_softmax", {"dim": 1}, (-3, 3)),
    "log_softmax_0": (F.log_softmax, "log_softmax", {"dim": 0}, (-3, 3)),
    "log_softmax_-1": (F.log_softmax, "log_softmax", {"dim": -1}, (-3, 3)),
}
INPLACE = ["relu", "relu6", "leaky_relu", "leaky_relu_0.2", "elu", "elu_0.5", "selu", "silu", "mish", "hardtanh",
           "hardtanh_range"]


def _x(name, shape, dtype=np.float64, seed=0):
    lo, hi = ACTS[name][3]
    return rand(*shape, seed=seed, low=lo, high=hi, dtype=dtype)


def _fns(name):
    fn, tname, kw, _ = ACTS[name]
    return (lambda t: fn(t, **kw)), (lambda t: getattr(TF, tname)(t, **kw))


# ---------------------------------------------------------------------- gradients and parity
@pytest.mark.parametrize("name", sorted(ACTS))
def test_gradcheck(name):
    ef, _ = _fns(name)
    check_grad(ef, _x(name, (3, 4)))


@pytest.mark.parametrize("name", ["softmax_1", "log_softmax_-1", "gelu", "softplus", "elu", "logsigmoid"])
def test_gradcheck_other_shapes_and_noncontiguous(name):
    ef, _ = _fns(name)
    check_grad(ef, _x(name, (2, 3, 2)))
    check_grad(ef, noncontig(_x(name, (3, 4), seed=2)))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(ACTS))
def test_parity(name, dtype):
    ef, tf = _fns(name)
    compare_torch(ef, tf, _x(name, (4, 5), dtype, seed=3))
    compare_torch(ef, tf, _x(name, (2, 3, 4), dtype, seed=4))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kinks_as_pytorch(dtype):
    """Gradients at the corners of the piecewise functions follow PyTorch's conventions."""
    a = np.array([-1.0, 0.0, 1.0, 6.0, -0.5, 1.5, 3.0, 20.0], dtype)
    for name in ("relu", "relu6", "leaky_relu", "elu", "elu_0.5", "selu", "hardtanh", "hardtanh_range", "softplus",
                 "softplus_beta"):
        ef, tf = _fns(name)
        compare_torch(ef, tf, a)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", INPLACE)
def test_inplace_matches_pytorch(name, dtype):
    fn, tname, kw, _ = ACTS[name]
    a = _x(name, (3, 4), dtype, seed=7)

    def ember_fn(t):
        y = t * 1  # a non-leaf: in-place on a leaf that requires grad is an error
        r = fn(y, inplace=True, **kw)
        assert r is y
        return r

    def torch_fn(t):
        return getattr(TF, tname)(t * 1, inplace=True, **kw)

    compare_torch(ember_fn, torch_fn, a)


@pytest.mark.parametrize("name", INPLACE)
def test_inplace_without_grad_writes_into_input(name):
    fn, _, kw, _ = ACTS[name]
    a = _x(name, (3, 4), np.float32)
    x = ember.tensor(a)
    expected = fn(ember.tensor(a), **kw).numpy()
    r = fn(x, inplace=True, **kw)
    assert r is x
    np.testing.assert_array_equal(x.numpy(), expected)


def test_inplace_on_leaf_requiring_grad_raises():
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.elu(x, inplace=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.dropout(x, inplace=True)


@requires_torch
def test_dtype_preserved_and_int_inputs_like_pytorch():
    for name in ACTS:
        fn, _, kw, _ = ACTS[name]
        assert fn(ember.zeros(2, 3, dtype=ember.float32), **kw).dtype == ember.float32
        assert fn(ember.zeros(2, 3, dtype=ember.float64), **kw).dtype == ember.float64
    xi = ember.tensor([-2, 0, 3, 9])
    for name in ("relu", "relu6", "hardtanh"):  # integer in, integer out
        fn, tname, kw, _ = ACTS[name]
        r, t = fn(xi, **kw), getattr(TF, tname)(torch.tensor([-2, 0, 3, 9]), **kw)
        assert r.dtype == ember.int64 and r.tolist() == t.tolist()
    for name in ("sigmoid", "tanh"):  # promoted to the default float
        assert ACTS[name][0](xi).dtype == ember.float32
    for name in ("leaky_relu", "elu", "selu", "gelu", "silu", "mish", "softplus", "logsigmoid", "softmax_1"):
        fn, _, kw, _ = ACTS[name]
        with pytest.raises(NotImplementedError, match=f"{ACTS[name][1]}.*int64"):
            fn(xi if "softmax" not in name else xi.reshape(2, 2), **kw)


# ---------------------------------------------------------------------- second derivatives against PyTorch
@requires_torch
@pytest.mark.parametrize("name", ["softmax_1", "log_softmax_-1", "gelu", "gelu_tanh", "silu", "mish", "softplus",
                                  "logsigmoid", "elu", "selu"])
def test_double_backward_matches_pytorch(name):
    ef, tf = _fns(name)
    a = _x(name, (3, 4), seed=11)
    v = rand(3, 4, seed=12)
    x = ember.tensor(a, requires_grad=True)
    (g,) = ember.autograd.grad(ef(x), x, ember.tensor(v), create_graph=True)
    (gg,) = ember.autograd.grad((g * g).sum(), x)
    tx = torch.tensor(a, requires_grad=True)
    (tg,) = torch.autograd.grad(tf(tx), tx, torch.tensor(v), create_graph=True)
    (tgg,) = torch.autograd.grad((tg * tg).sum(), tx)
    np.testing.assert_allclose(g.detach().numpy(), tg.detach().numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gg.numpy(), tgg.numpy(), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------------- stability
@requires_torch
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["softmax_1", "log_softmax_1", "logsigmoid", "softplus", "sigmoid", "silu", "mish",
                                  "gelu", "gelu_tanh", "elu", "selu"])
def test_extreme_logits_give_finite_values_and_gradients(name, dtype):
    a = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 5.0], [1e4, 1e4, -3.0]], dtype)
    ef, tf = _fns(name)
    x = ember.tensor(a, requires_grad=True)
    y = ef(x)
    y.backward(ember.ones_like(y))
    assert np.isfinite(y.detach().numpy()).all() and np.isfinite(x.grad.numpy()).all()
    compare_torch(ef, tf, a, rtol=1e-5, atol=1e-5)


def test_softmax_rows_sum_to_one_and_log_softmax_is_its_log():
    a = rand(4, 6, seed=3, low=-50, high=50)
    s = F.softmax(ember.tensor(a), dim=1).numpy()
    np.testing.assert_allclose(s.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(F.log_softmax(ember.tensor(a), dim=1).numpy(), np.log(s), rtol=1e-10, atol=1e-10)


@requires_torch
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_softmax_special_shapes_and_dtype_argument(fn):
    ef, tf = getattr(F, fn), getattr(TF, fn)
    compare_torch(lambda t: ef(t, dim=0), lambda t: tf(t, dim=0), np.array(2.5))  # 0-d
    compare_torch(lambda t: ef(t, dim=-1), lambda t: tf(t, dim=-1), np.zeros((2, 0)))  # empty
    compare_torch(lambda t: ef(t, dim=1, dtype=ember.float64), lambda t: tf(t, dim=1, dtype=torch.float64),
                  rand(2, 3, dtype=np.float32))
    assert ef(ember.tensor([1, 2, 3]), dim=0, dtype=ember.float32).dtype == ember.float32
    a = np.array([[0.0, -np.inf, 1.0], [-np.inf, -np.inf, -np.inf]])
    np.testing.assert_allclose(ef(ember.tensor(a), dim=1).numpy(), tf(torch.tensor(a), dim=1).numpy(), rtol=1e-12)


@requires_torch
@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("fn", ["softmax", "log_softmax"])
def test_implicit_dim_follows_pytorch_with_a_warning(fn, ndim):
    a = rand(*(2, 3, 4, 5)[:ndim], seed=ndim)
    with pytest.warns(UserWarning, match="implicit dimension") as rec:
        r = getattr(F, fn)(ember.tensor(a))
    assert rec[0].filename == __file__  # the warning points at the caller
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = getattr(TF, fn)(torch.tensor(a))
    np.testing.assert_allclose(r.numpy(), t.numpy(), rtol=1e-12)


def test_softmax_bad_arguments():
    with pytest.raises(IndexError, match="softmax.*range"):
        F.softmax(ember.ones(3), dim=1)
    with pytest.raises(NotImplementedError, match="log_softmax.*int64"):
        F.log_softmax(ember.tensor([1, 2]), dim=0)
    with pytest.raises(TypeError, match="softmax.*Tensor"):
        F.softmax([1.0, 2.0], dim=0)


def test_activation_bad_arguments():
    with pytest.raises(ValueError, match="min_val.*max_val"):
        F.hardtanh(ember.ones(2), 2.0, 1.0)
    with pytest.raises(RuntimeError, match="approximate.*'foo'"):
        F.gelu(ember.ones(2), approximate="foo")
    with pytest.raises(TypeError, match="relu.*Tensor"):
        F.relu(np.ones(2))
    with pytest.raises(TypeError, match="elu.*list"):
        F.elu([1.0])


# ---------------------------------------------------------------------- dropout
def test_dropout_statistics_and_scaling():
    ember.manual_seed(0)
    x = ember.ones(200, 500)
    for p in (0.1, 0.5, 0.8):
        y = F.dropout(x, p).numpy()
        zero = y == 0
        assert abs(zero.mean() - p) < 0.01
        np.testing.assert_allclose(y[~zero], 1 / (1 - p), rtol=1e-6)
        assert abs(y.mean() - 1.0) < 0.03  # the expectation is preserved
        assert y.dtype == np.float32


def test_dropout_is_deterministic_under_manual_seed():
    x = ember.randn(50, 40)
    ember.manual_seed(123)
    a = F.dropout(x, 0.3).numpy()
    ember.manual_seed(123)
    b = F.dropout(x, 0.3).numpy()
    c = F.dropout(x, 0.3).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


def test_dropout_eval_identity_and_edge_probabilities():
    x = ember.randn(10, 10, requires_grad=True)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout2d(x.reshape(2, 5, 2, 5), 0.5, training=False).shape == (2, 5, 2, 5)
    np.testing.assert_array_equal(F.dropout(x, 0.0).detach().numpy(), x.detach().numpy())
    y = F.dropout(x, 1.0)
    assert (y.detach().numpy() == 0).all()
    y.sum().backward()
    assert (x.grad.numpy() == 0).all()
    xi = ember.tensor([1, 2, 3])
    assert F.dropout(xi, 0.5, training=False) is xi
    with pytest.raises(RuntimeError, match="dropout.*int64"):
        F.dropout(xi, 0.5)


def test_dropout_backward_is_the_mask():
    ember.manual_seed(5)
    x = ember.tensor(rand(20, 30, low=0.5, high=1.5), requires_grad=True)
    y = F.dropout(x, 0.4)
    g = rand(20, 30, seed=9)
    y.backward(ember.tensor(g))
    mask = y.detach().numpy() / x.detach().numpy()
    np.testing.assert_allclose(x.grad.numpy(), g * mask, rtol=1e-12)
    assert set(np.unique(np.round(mask, 6))) <= {0.0, round(1 / 0.6, 6)}


def test_dropout_gradcheck_with_a_fixed_mask():
    def fn(t):
        ember.manual_seed(3)
        return F.dropout(t, 0.3)

    def fn2d(t):
        ember.manual_seed(3)
        return F.dropout2d(t, 0.5)

    check_grad(fn, rand(4, 5))
    check_grad(fn2d, rand(2, 3, 2, 2))


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.5", None])
def test_dropout_probability_validation(bad):
    with pytest.raises(ValueError, match=f"p={bad!r}"):
        F.dropout(ember.ones(3), bad)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout2d(ember.ones(2, 2, 2, 2), bad)
    with pytest.raises(ValueError, match="Dropout.*between 0 and 1"):
        nn.Dropout(bad)


def test_dropout_inplace():
    ember.manual_seed(1)
    x = ember.ones(10, 10)
    r = F.dropout(x, 0.5, inplace=True)
    assert r is x and set(np.unique(x.numpy())) == {0.0, 2.0}
    w = ember.ones(10, 10, requires_grad=True)
    y = w * 1
    ember.manual_seed(1)
    z = F.dropout(y, 0.5, inplace=True)
    assert z is y
    z.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), x.numpy())


def test_dropout2d_zeroes_whole_channels():
    ember.manual_seed(2)
    x = ember.ones(8, 16, 5, 5)
    y = F.dropout2d(x, 0.5).numpy()
    per_channel = y.reshape(8, 16, -1)
    assert ((per_channel == 0).all(-1) | (per_channel == 2).all(-1)).all()
    assert 0.3 < (per_channel[..., 0] == 0).mean() < 0.7
    with pytest.warns(UserWarning, match="3-d input"):  # read as (N, C, L), as PyTorch does
        y3 = F.dropout2d(ember.ones(4, 6, 7), 0.5).numpy()
    assert ((y3 == 0).all(-1) | (y3 == 2).all(-1)).all()
    with pytest.warns(UserWarning, match="5-d input"):
        F.dropout2d(ember.ones(2, 3, 2, 2, 2), 0.5)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="at least 2 dimensions.*\\[5\\]"):
        F.dropout2d(ember.ones(5), 0.5)


# ---------------------------------------------------------------------- modules
def _module_pairs():
    return [
        (nn.ReLU(), torch.nn.ReLU()), (nn.ReLU(inplace=True), torch.nn.ReLU(inplace=True)),
        (nn.ReLU6(), torch.nn.ReLU6()), (nn.ReLU6(True), torch.nn.ReLU6(True)),
        (nn.LeakyReLU(), torch.nn.LeakyReLU()), (nn.LeakyReLU(0.2, True), torch.nn.LeakyReLU(0.2, True)),
        (nn.ELU(), torch.nn.ELU()), (nn.ELU(0.5, inplace=True), torch.nn.ELU(0.5, inplace=True)),
        (nn.SELU(), torch.nn.SELU()), (nn.SELU(True), torch.nn.SELU(True)),
        (nn.GELU(), torch.nn.GELU()), (nn.GELU("tanh"), torch.nn.GELU("tanh")),
        (nn.SiLU(), torch.nn.SiLU()), (nn.SiLU(inplace=True), torch.nn.SiLU(inplace=True)),
        (nn.Mish(), torch.nn.Mish()), (nn.Mish(True), torch.nn.Mish(True)),
        (nn.Softplus(), torch.nn.Softplus()), (nn.Softplus(2, 10), torch.nn.Softplus(2, 10)),
        (nn.Hardtanh(), torch.nn.Hardtanh()), (nn.Hardtanh(-2, 3, True), torch.nn.Hardtanh(-2, 3, True)),
        (nn.Sigmoid(), torch.nn.Sigmoid()), (nn.Tanh(), torch.nn.Tanh()), (nn.LogSigmoid(), torch.nn.LogSigmoid()),
        (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)), (nn.Softmax(-1), torch.nn.Softmax(-1)),
        (nn.LogSoftmax(dim=1), torch.nn.LogSoftmax(dim=1)), (nn.LogSoftmax(0), torch.nn.LogSoftmax(0)),
    ]


@requires_torch
def test_modules_repr_state_dict_and_parity():
    for em, tm in _module_pairs():
        assert repr(em) == repr(tm)
        assert list(em.state_dict()) == list(tm.state_dict()) == []
        a = rand(3, 4, seed=8, low=-3, high=3)
        compare_torch(lambda t: em(t * 1), lambda t: tm(t * 1), a)
        compare_torch(lambda t: em(t * 1), lambda t: tm(t * 1), a.astype(np.float32))
    assert repr(nn.Softmax()) == repr(torch.nn.Softmax()) == "Softmax(dim=None)"


@requires_torch
@pytest.mark.skipif(COMPILE, reason="the compile rerun calls every module from tests/helpers.py: that file is the caller")
def test_softmax_module_implicit_dim_warns_at_the_caller():
    with pytest.warns(UserWarning, match="implicit dimension") as rec:
        nn.Softmax()(ember.ones(2, 3))
    assert rec[0].filename == __file__


def test_module_attributes_as_pytorch():
    m = nn.Hardtanh(-2, 3)
    assert (m.min_val, m.max_val, m.inplace) == (-2, 3, False)
    r6 = nn.ReLU6()
    assert (r6.min_val, r6.max_val) == (0.0, 6.0) and isinstance(r6, nn.Hardtanh)
    assert nn.LeakyReLU(0.3).negative_slope == 0.3 and nn.ELU(2.0).alpha == 2.0
    assert nn.GELU("tanh").approximate == "tanh" and nn.Softplus(3, 7).threshold == 7
    with pytest.warns(FutureWarning, match="min_value"):
        assert nn.Hardtanh(min_value=-3).min_val == -3
    with pytest.raises(ValueError, match="max_val"):
        nn.Hardtanh(1.0, 1.0)


@requires_torch
def test_dropout_modules_train_eval_and_repr():
    for em, tm in ((nn.Dropout(), torch.nn.Dropout()), (nn.Dropout(0.2, True), torch.nn.Dropout(0.2, True)),
                   (nn.Dropout2d(0.3), torch.nn.Dropout2d(0.3))):
        assert repr(em) == repr(tm)
        assert list(em.state_dict()) == []
    m = nn.Dropout(0.5)
    x = ember.ones(100, 100)
    assert m.training
    assert (m(x).numpy() == 0).any()
    m.eval()
    assert m(x) is x
    m.train()
    assert (m(x).numpy() == 0).any()
    d2 = nn.Dropout2d(0.5)
    y = d2(ember.ones(4, 8, 3, 3)).numpy().reshape(4, 8, -1)
    assert ((y == 0).all(-1) | (y == 2).all(-1)).all()
    assert d2.eval()(x.reshape(1, 100, 10, 10)).numpy().min() == 1.0
    seq_out = nn.Dropout(0.5).eval()(ember.ones(3))
    np.testing.assert_array_equal(seq_out.numpy(), 1.0)
