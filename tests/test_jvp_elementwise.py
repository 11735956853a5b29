"""Forward-mode AD of the elementwise math, activations and their neighbours (ember/ops/unary.py, elementwise_ext.py,
nn_activation.py, nn_more.py) where the parity suites of those files do not reach it (their check_grad and
compare_torch check forward mode too): the fused backward ops that only a backward applies (reached by forward over
reverse), the random activations with their noise fixed, in-place forms, ctc_loss's forward derivative (the true
one: PyTorch has none), and the ops without a derivative (no tangent, or PyTorch's refusal).
"""
import numpy as np
import pytest
from helpers import DEVICE, compare_torch_jvp, leaf, rand, requires_torch, torch

import ember
import ember.nn.functional as F
from ember.autograd import forward_ad as fw
from ember.ops import elementwise_ext as E
from ember.ops import nn_activation as A
from ember.ops import unary as U


def forward_gradcheck(fn, *arrays, backward=True):
    """The forward-mode Jacobian of fn against central differences (and the reverse-mode one unless told not)."""
    xs = [leaf(a) for a in arrays]
    assert ember.autograd.gradcheck(fn, xs, check_forward_ad=True, check_backward_ad=backward)


def dual(a, t):
    """A float64 dual tensor of the arrays a (primal) and t (tangent), inside an open level."""
    return fw.make_dual(leaf(np.asarray(a, np.float64), False), leaf(np.asarray(t, np.float64), False))


def tangent(x):
    t = fw.unpack_dual(x).tangent
    return None if t is None else t.detach().cpu().numpy()


# ---------------------------------------------------------------------- ops only a backward applies
def _idx():
    """Flat positions with repeats (_PutAdd sums them), as the ops keep them: an array on the test device."""
    return leaf(np.array([[4, 0, 4], [2, 5, 1]]), False)._data


ADJOINTS = {  # name -> (the op applied to float64 leaves, the arrays)
    "tanh_grad": (lambda g, z: U.TanhGrad.apply(g, z), [rand(3, 4), rand(3, 4, seed=1)]),
    "sigmoid_grad": (lambda g, z: U.SigmoidGrad.apply(g, z), [rand(3, 4), rand(3, 4, seed=1, low=0.1, high=0.9)]),
    "relu_grad": (lambda g, z: U.ReluGrad.apply(g, z), [rand(3, 4), rand(3, 4, seed=1)]),
    "softmax_grad": (lambda g, y: A.SoftmaxGrad.apply(g, y, 1), [rand(3, 4), rand(3, 4, seed=1, low=0.1)]),
    "log_softmax_grad": (lambda g, y: A.LogSoftmaxGrad.apply(g, y, 0), [rand(3, 4), rand(3, 4, seed=1, high=-0.1)]),
    "xlogy_grad": (lambda g, x, y: E._XlogyGradX.apply(g, x, y, False),
                   [rand(3, 4), rand(3, 4, seed=1), rand(4, seed=2, low=0.5, high=2.0)]),
    "xlog1py_grad": (lambda g, x, y: E._XlogyGradX.apply(g, x, y, True),
                     [rand(3, 4), rand(3, 4, seed=1), rand(3, 4, seed=2, low=-0.5, high=2.0)]),
    "put_add": (lambda g: E._PutAdd.apply(g, _idx(), (2, 3)), [rand(2, 3)]),
    "take": (lambda t: E._Take.apply(t, _idx(), (3, 2)), [rand(2, 3)]),
}


@pytest.mark.parametrize("name", list(ADJOINTS))
def test_adjoint_ops(name):
    fn, arrays = ADJOINTS[name]
    forward_gradcheck(fn, *arrays)


def _grad_of(m, f):
    """(x, g) -> the vector-Jacobian product g·∂f/∂x of module m's function f, as a differentiable function (forward
    over reverse: the tangents flow through f's backward ops)."""
    def fn(x, g):
        with m.enable_grad():  # (also when gradcheck's numerical pass runs it under no_grad)
            x.requires_grad_()
            return m.autograd.grad(f(m, x), x, g, create_graph=True)[0]
    return fn


FORWARD_OVER_REVERSE = {  # name -> (f(module, x), x)
    "softmax": (lambda m, x: m.softmax(x, 1), rand(3, 4)),
    "log_softmax": (lambda m, x: m.log_softmax(x, 0), rand(3, 4)),
    "tanh": (lambda m, x: m.tanh(x), rand(3, 4)),
    "sigmoid": (lambda m, x: m.sigmoid(x), rand(3, 4)),
    "relu": (lambda m, x: m.relu(x), rand(3, 4)),
    "xlogy": (lambda m, x: m.xlogy(x[0], x[1] * x[1] + 0.5), rand(2, 5)),
    "quantile": (lambda m, x: m.quantile(x, 0.3, dim=1), rand(3, 5)),
}


@pytest.mark.parametrize("name", list(FORWARD_OVER_REVERSE))
def test_forward_over_reverse(name):
    f, x = FORWARD_OVER_REVERSE[name]
    g = rand(*np.shape(f(ember, ember.tensor(x))), seed=3)
    forward_gradcheck(_grad_of(ember, f), x, g)


@requires_torch
@pytest.mark.parametrize("name", list(FORWARD_OVER_REVERSE))
def test_forward_over_reverse_parity(name):
    f, x = FORWARD_OVER_REVERSE[name]
    g = rand(*np.shape(f(ember, ember.tensor(x))), seed=3)
    compare_torch_jvp(_grad_of(ember, f), _grad_of(torch, f), x, g)


# ---------------------------------------------------------------------- random ops: the noise fixed by the seed
RANDOM = {
    "dropout": lambda x: F.dropout(x, 0.4, True),
    "dropout_inplace": lambda x: F.dropout(x.clone(), 0.4, True, inplace=True),
    "dropout2d": lambda x: F.dropout2d(x.reshape(2, 5, 2, 1), 0.4, True),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.3, True),
    "feature_alpha_dropout_inplace": lambda x: F.feature_alpha_dropout(x.clone(), 0.3, True, inplace=True),
    "rrelu_training": lambda x: F.rrelu(x, training=True),
    "rrelu_training_inplace": lambda x: F.rrelu(x.clone(), 0.1, 0.6, training=True, inplace=True),
}


@pytest.mark.parametrize("name", list(RANDOM))
def test_random_ops_with_fixed_noise(name):
    def seeded(x):
        ember.manual_seed(0)
        return RANDOM[name](x)
    forward_gradcheck(seeded, rand(4, 5))


# ---------------------------------------------------------------------- in-place forms
IN_PLACE = ["exp_", "sigmoid_", "tanh_", "relu_", "sqrt_", "erfinv_", "lgamma_", "logit_", "sinc_", "frac_", "trunc_"]


@pytest.mark.parametrize("name", IN_PLACE)
def test_in_place_methods_take_the_tangent(name):
    """x.<op>_() leaves x with the tangent of x.<op>() (commit moves the result's tangent to x)."""
    a, t = rand(3, 4, low=0.1, high=0.9), rand(3, 4, seed=1)
    with fw.dual_level():
        expected = tangent(getattr(dual(a, t), name[:-1])())
        y = dual(a, t).clone()
        assert getattr(y, name)() is y
        np.testing.assert_allclose(tangent(y), expected, rtol=1e-12)


# ---------------------------------------------------------------------- ctc_loss
_TARGETS = np.array([[1, 2, 2], [3, 1, 0]])


def _ctc(x, il=(6, 5), zero_infinity=False):
    return F.ctc_loss(x, leaf(_TARGETS, False), list(il), [3, 2], reduction="none", zero_infinity=zero_infinity)


def test_ctc_loss_forward_derivative_is_the_true_one():
    """On any log_probs (not only log_softmax's outputs, where reverse mode's PyTorch gradient agrees with it)."""
    forward_gradcheck(_ctc, rand(6, 2, 4, seed=4, low=-3.0, high=0.0), backward=False)
    forward_gradcheck(lambda x: _ctc(x.log_softmax(2)), rand(6, 2, 4, seed=4))


def test_ctc_loss_tangent_of_an_impossible_alignment_and_no_second_derivative():
    lp, t = np.log(np.full((6, 2, 4), 0.25)), rand(6, 2, 4, seed=5)
    with fw.dual_level():
        x = dual(lp, t)
        inf = tangent(_ctc(x, il=(3, 5)))  # sample 0 needs 4 frames (the repeated 2 takes a blank between)
        zero = tangent(_ctc(x, il=(3, 5), zero_infinity=True))
        assert np.isnan(inf[0]) and np.isfinite(inf[1]) and zero[0] == 0 and zero[1] == inf[1]
        x.requires_grad_()
        loss = _ctc(x).sum()
        with pytest.raises(NotImplementedError, match="ctc_loss.*double backward"):
            ember.autograd.grad(loss, x, create_graph=True)


# ---------------------------------------------------------------------- no derivative
NO_DERIVATIVE = {  # name -> (ember's function, SciPy needed (on the CPU only))
    "frexp": (lambda m, x: m.frexp(x), False),
    "spherical_bessel_j0": (lambda m, x: m.special.spherical_bessel_j0(x), False),
    "chebyshev_polynomial_t": (lambda m, x: m.special.chebyshev_polynomial_t(x, 3), False),
    "bessel_j0": (lambda m, x: m.special.bessel_j0(x), True),
    "airy_ai": (lambda m, x: m.special.airy_ai(x), True),
}


@pytest.mark.parametrize("name", list(NO_DERIVATIVE))
def test_ops_without_a_derivative_give_no_tangent(name):
    """As in reverse mode, where their results do not require grad (PyTorch: the same, but for frexp's mantissa)."""
    f, scipy = NO_DERIVATIVE[name]
    if scipy:
        pytest.importorskip("scipy")
        if DEVICE != "cpu":
            pytest.skip("SciPy's functions run on the CPU only")
    with fw.dual_level():
        out = f(ember, dual(rand(5), rand(5, seed=1)))
        for o in out if isinstance(out, tuple) else (out,):
            assert tangent(o) is None


@requires_torch
@pytest.mark.parametrize("name", [n for n in NO_DERIVATIVE if n != "frexp"])
def test_ops_without_a_derivative_parity(name):
    f, scipy = NO_DERIVATIVE[name]
    if scipy:
        pytest.importorskip("scipy")
    compare_torch_jvp(lambda x: f(ember, x), lambda x: f(torch, x), rand(5))


def test_refusals():
    """heaviside has no derivative (PyTorch's forward mode raises NotImplementedError, its reverse RuntimeError);
    igamma and zeta none in their first argument."""
    with fw.dual_level():
        x = dual(rand(4), rand(4, seed=1))
        with pytest.raises(NotImplementedError, match="heaviside"):
            ember.heaviside(x, leaf(np.array([0.5]), False))
        if DEVICE == "cpu":  # (SciPy's gammainc: on the CPU only)
            with pytest.raises(NotImplementedError, match="igamma: input"):
                ember.igamma(x.abs() + 1, leaf(rand(4, low=0.5, high=2.0), False))
        with pytest.raises(NotImplementedError, match="zeta"):
            ember.special.zeta(x + 3, 2.0)
        # in the other argument they have one
        assert tangent(ember.special.zeta(3.0, x.abs() + 1)) is not None
