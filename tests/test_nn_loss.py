"""Loss functions (ember/ops/nn_loss.py) and loss modules (ember/nn/modules/loss.py): gradients,
double backward, PyTorch parity for every option, stability and bad inputs."""
import warnings

import numpy as np
import pytest
from helpers import DEVICE, check_grad, compare_torch, host, rand, requires_torch, torch

import ember
import ember.nn as nn
import ember.nn.functional as F

if torch is not None:
    import torch.nn.functional as TF

REDUCTIONS = ["mean", "sum", "none"]
DTYPES = [np.float64, np.float32]


def _e(a, **kw):
    """A constant ember tensor on the test device (next to the parity helpers' leaves)."""
    return ember.tensor(a, device=DEVICE, **kw)


def _t(a):
    """A constant ember tensor (on the test device) and a constant torch tensor of the same array;
    without PyTorch the torch half is None (the gradcheck tests build cases with this too)."""
    return _e(a), (torch.tensor(a) if torch is not None else None)


# ---------------------------------------------------------------------- elementwise regression losses
ELEMENTWISE = {
    "mse_loss": {},
    "l1_loss": {},
    "smooth_l1_loss": {},
    "smooth_l1_loss_beta": {"beta": 0.5},
    "smooth_l1_loss_beta0": {"beta": 0.0},
    "huber_loss": {},
    "huber_loss_delta": {"delta": 2.0},
}


def _loss_fns(name, **kw):
    fname = name.split("_beta")[0].split("_delta")[0]
    kw = {**ELEMENTWISE[name], **kw}
    return (lambda x, t: getattr(F, fname)(x, t, **kw)), (lambda x, t: getattr(TF, fname)(x, t, **kw))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_gradcheck(name, reduction):
    ef, _ = _loss_fns(name, reduction=reduction)
    check_grad(ef, rand(3, 4, seed=1, low=-2, high=2), rand(3, 4, seed=2, low=-2, high=2))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_parity(name, reduction, dtype):
    ef, tf = _loss_fns(name, reduction=reduction)
    x, t = rand(4, 5, seed=3, low=-2, high=2, dtype=dtype), rand(4, 5, seed=4, low=-2, high=2, dtype=dtype)
    t[0, :2] = x[0, :2]  # zero differences (the kink of |d|)
    compare_torch(ef, tf, x, t)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss", "huber_loss_delta"])
def test_elementwise_weighted_parity(name, reduction, dtype):
    w = rand(4, 5, seed=5, low=0.1, high=2, dtype=dtype)
    ew, tw = _t(w)
    fname = name.split("_delta")[0]
    kw = {**ELEMENTWISE[name], "reduction": reduction}
    compare_torch(lambda x, t: getattr(F, fname)(x, t, weight=ew, **kw),
                  lambda x, t: getattr(TF, fname)(x, t, weight=tw, **kw),
                  rand(4, 5, seed=6, dtype=dtype), rand(4, 5, seed=7, dtype=dtype))


@requires_torch
@pytest.mark.filterwarnings("ignore:Using a target size")  # PyTorch's own warning, from the oracle
@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_broadcast_warns_like_pytorch(name):
    ef, tf = _loss_fns(name)
    x, t = rand(3, 4, seed=8), rand(3, 1, seed=9)
    with pytest.warns(UserWarning, match=r"target size \(\[3, 1\]\).*input size \(\[3, 4\]\)") as rec:
        compare_torch(ef, tf, x, t)
    assert any(r.filename == __file__ for r in rec)  # points at the caller
    with pytest.raises(RuntimeError, match=r"\[3, 4\].*\[5\]"):
        ef(ember.ones(3, 4), ember.ones(5))


@requires_torch
def test_elementwise_integer_target_and_legacy_flags():
    x = rand(2, 3, dtype=np.float32)
    ti = np.array([[1, 0, 2], [0, 1, 1]])
    compare_torch(lambda a: F.mse_loss(a, _e(ti)), lambda a: TF.mse_loss(a, torch.tensor(ti)), x)
    for sa, rd in ((False, None), (None, False), (True, True)):
        with pytest.warns(UserWarning, match="size_average and reduce"):
            r = F.l1_loss(ember.tensor(x), ember.zeros(2, 3), size_average=sa, reduce=rd)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = TF.l1_loss(torch.tensor(x), torch.zeros(2, 3), size_average=sa, reduce=rd)
        np.testing.assert_allclose(r.numpy(), t.numpy(), rtol=1e-6)


def test_elementwise_bad_arguments():
    x = ember.ones(3)
    for fn in (F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss):
        with pytest.raises(ValueError, match=f"{fn.__name__}.*'avg' is not a valid value for reduction"):
            fn(x, x, reduction="avg")
    with pytest.raises(RuntimeError, match="smooth_l1_loss.*beta=-1"):
        F.smooth_l1_loss(x, x, beta=-1)
    with pytest.raises(RuntimeError, match="huber_loss.*delta=0"):
        F.huber_loss(x, x, delta=0)
    with pytest.raises(ValueError, match=r"mse_loss.*weight \[2\].*input \[3\]"):
        F.mse_loss(x, x, weight=ember.ones(2))
    with pytest.raises(TypeError, match="l1_loss.*'target'.*list"):
        F.l1_loss(x, [1.0, 2.0, 3.0])


# ---------------------------------------------------------------------- cross entropy and nll with class indices
LAYOUTS = {  # input shape, target shape
    "batched": ((6, 5), (6,)),
    "unbatched": ((5,), ()),
    "k_dim": ((2, 4, 3, 2), (2, 3, 2)),
}
CE_OPTIONS = {
    "plain": {},
    "weight": {"weight": True},
    "ignore": {"ignore_index": 1},
    "smooth": {"label_smoothing": 0.2},
    "all": {"weight": True, "ignore_index": 2, "label_smoothing": 0.1},
}


def _class_case(layout, opts, dtype=np.float64, seed=0):
    """Logits, class-index target (int64) and the keyword arguments for ember and for torch."""
    xs, ts = LAYOUTS[layout]
    C = xs[0] if len(xs) == 1 else xs[1]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    t = rng.integers(0, C, ts).astype(np.int64)
    opts = dict(opts)
    if "ignore_index" in opts:
        if t.size > 1:
            t.flat[0] = t.flat[-1] = opts["ignore_index"]  # some ignored, some not
        else:  # keep the single target counted (every target ignored is tested on its own)
            t[...] = (opts["ignore_index"] + 1) % C
    ekw, tkw = dict(opts), dict(opts)
    if opts.pop("weight", False):
        w = rng.uniform(0.2, 2.0, C).astype(dtype)
        ekw["weight"], tkw["weight"] = _t(w)
    return x, t, ekw, tkw


# (function, option set): nll_loss has no label_smoothing
FN_OPTS = [("cross_entropy", o) for o in sorted(CE_OPTIONS)] + [("nll_loss", o) for o in ("plain", "weight", "ignore")]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("fn,opts", FN_OPTS)
def test_class_index_gradcheck(fn, opts, layout):
    x, t, ekw, _ = _class_case(layout, CE_OPTIONS[opts])
    for reduction in REDUCTIONS:
        check_grad(lambda a: getattr(F, fn)(a, _e(t), reduction=reduction, **ekw), x)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("fn,opts", FN_OPTS)
def test_class_index_parity(fn, opts, layout, reduction, dtype):
    x, t, ekw, tkw = _class_case(layout, CE_OPTIONS[opts], dtype, seed=3)
    compare_torch(lambda a, b: getattr(F, fn)(a, b, reduction=reduction, **ekw),
                  lambda a, b: getattr(TF, fn)(a, b, reduction=reduction, **tkw), x, t)


@requires_torch
@pytest.mark.parametrize("opts", sorted(CE_OPTIONS))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_cross_entropy_double_backward_matches_pytorch(layout, opts):
    """Under create_graph the gradient is built from differentiable ops: its own gradient (a Hessian-vector
    product) and its gradient with respect to the upstream gradient match PyTorch's."""
    x, t, ekw, tkw = _class_case(layout, CE_OPTIONS[opts], seed=5)
    for reduction in REDUCTIONS:
        ex, tx = _e(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        el = F.cross_entropy(ex, _e(t), reduction=reduction, **ekw)
        tl = TF.cross_entropy(tx, torch.tensor(t), reduction=reduction, **tkw)
        c = rand(*tl.shape, seed=6, low=0.5, high=1.5)
        ec, tc = _e(c, requires_grad=True), torch.tensor(c, requires_grad=True)
        (eg,) = ember.autograd.grad(el, ex, ec, create_graph=True)
        (tg,) = torch.autograd.grad(tl, tx, tc, create_graph=True)
        np.testing.assert_allclose(host(eg), tg.detach().numpy(), rtol=1e-10, atol=1e-12)
        v = rand(*x.shape, seed=7)
        ehx, ehc = ember.autograd.grad((eg * _e(v)).sum(), [ex, ec])
        thx, thc = torch.autograd.grad((tg * torch.tensor(v)).sum(), [tx, tc])
        np.testing.assert_allclose(host(ehx), thx.numpy(), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(host(ehc), thc.numpy(), rtol=1e-9, atol=1e-12)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_stable_at_extreme_logits(dtype):
    x = np.array([[1e4, -1e4, 0.0], [-1e4, -1e4, 1e4], [1e4, 1e4, -1e4], [-1e4, 0.0, 1e4]], dtype)
    t = np.array([1, 2, 0, 0])
    for opts in ({}, {"label_smoothing": 0.1}):
        ex = ember.tensor(x, requires_grad=True)
        loss = F.cross_entropy(ex, ember.tensor(t), **opts)
        loss.backward()
        assert np.isfinite(loss.item()) and np.isfinite(ex.grad.numpy()).all()
        compare_torch(lambda a, b: F.cross_entropy(a, b, **opts), lambda a, b: TF.cross_entropy(a, b, **opts), x, t,
                      rtol=1e-6, atol=1e-6)
        compare_torch(lambda a, b: F.nll_loss(F.log_softmax(a, 1), b), lambda a, b: TF.nll_loss(TF.log_softmax(a, 1), b),
                      x, t, rtol=1e-6, atol=1e-6)


@requires_torch
def test_cross_entropy_edge_cases_as_pytorch():
    x = rand(3, 4, seed=2)
    every_ignored = np.full(3, -100)
    for fn in ("cross_entropy", "nll_loss"):
        for reduction in REDUCTIONS:  # nan loss for 'mean' (0/0), zero gradient
            compare_torch(lambda a, b: getattr(F, fn)(a, b, reduction=reduction),
                          lambda a, b: getattr(TF, fn)(a, b, reduction=reduction), x, every_ignored)
        compare_torch(lambda a, b: getattr(F, fn)(a, b), lambda a, b: getattr(TF, fn)(a, b),
                      np.zeros((0, 4)), np.zeros(0, np.int64))  # empty batch: nan
    t8 = np.array([0, 3, 1], np.uint8)  # Byte targets are accepted, as in PyTorch
    compare_torch(lambda a: F.cross_entropy(a, _e(t8)), lambda a: TF.cross_entropy(a, torch.tensor(t8)), x)
    # the default ignore_index (-100) may appear among valid targets; a custom one out of [0, C) too
    compare_torch(lambda a, b: F.cross_entropy(a, b, ignore_index=7), lambda a, b: TF.cross_entropy(a, b, ignore_index=7),
                  x, np.array([7, 1, 2]))


@requires_torch
def test_cross_entropy_equals_log_softmax_then_nll():
    x, t, ekw, _ = _class_case("k_dim", {"weight": True, "ignore_index": 0}, seed=9)
    a = F.cross_entropy(_e(x), _e(t), **ekw)
    b = F.nll_loss(F.log_softmax(_e(x), 1), _e(t), **ekw)
    np.testing.assert_allclose(host(a), host(b), rtol=1e-12)


# ---------------------------------------------------------------------- cross entropy with class probabilities
PROB_LAYOUTS = {"batched": (5, 4), "unbatched": (4,), "k_dim": (2, 3, 2, 2)}


def _prob_case(layout, dtype=np.float64, seed=0):
    shape = PROB_LAYOUTS[layout]
    x = rand(*shape, seed=seed, low=-2, high=2, dtype=dtype)
    axis = 0 if len(shape) == 1 else 1
    p = np.exp(rand(*shape, seed=seed + 1, low=-2, high=2))
    return x, (p / p.sum(axis, keepdims=True)).astype(dtype)


@pytest.mark.parametrize("layout", sorted(PROB_LAYOUTS))
def test_prob_target_gradcheck(layout):
    x, p = _prob_case(layout)
    C = x.shape[0 if x.ndim == 1 else 1]
    w = _e(rand(C, seed=3, low=0.5, high=2))
    for reduction in REDUCTIONS:
        check_grad(lambda a, b: F.cross_entropy(a, b, reduction=reduction, label_smoothing=0.1, weight=w), x, p)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("layout", sorted(PROB_LAYOUTS))
def test_prob_target_parity(layout, reduction, dtype):
    x, p = _prob_case(layout, dtype, seed=4)
    C = x.shape[0 if x.ndim == 1 else 1]
    ew, tw = _t(rand(C, seed=5, low=0.5, high=2, dtype=dtype))
    for ls in (0.0, 0.25):
        compare_torch(lambda a, b: F.cross_entropy(a, b, reduction=reduction, label_smoothing=ls),
                      lambda a, b: TF.cross_entropy(a, b, reduction=reduction, label_smoothing=ls), x, p)
        compare_torch(lambda a, b: F.cross_entropy(a, b, weight=ew, reduction=reduction, label_smoothing=ls),
                      lambda a, b: TF.cross_entropy(a, b, weight=tw, reduction=reduction, label_smoothing=ls), x, p)


@requires_torch
def test_prob_target_dtype_promotes_like_pytorch():
    x, p = _prob_case("batched", np.float32)
    compare_torch(F.cross_entropy, TF.cross_entropy, x, p.astype(np.float64))


# ---------------------------------------------------------------------- class-target errors
def test_class_target_errors_name_the_culprit():
    x = ember.randn(3, 5)
    with pytest.raises(IndexError, match=r"Target 5 is out of bounds.*\[0, 5\)"):
        F.cross_entropy(x, ember.tensor([0, 2, 5]))
    with pytest.raises(IndexError, match="Target -1 is out of bounds"):
        F.nll_loss(x, ember.tensor([0, -1, 1]))
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        F.cross_entropy(ember.randn(2, 5, 3), ember.tensor([[0, 1, 9], [0, 0, 0]]))
    with pytest.raises(RuntimeError, match=r"int64.*float32.*input's shape \[3, 5\]"):
        F.cross_entropy(x, ember.tensor([0.0, 2.0, 1.0]))
    with pytest.raises(RuntimeError, match="int64.*int32"):
        F.nll_loss(x, ember.tensor([0, 2, 1], dtype=ember.int32))
    with pytest.raises(RuntimeError, match=r"float.*target of shape \[3, 4\].*input of shape \[3, 5\]"):
        F.cross_entropy(x, ember.rand(3, 4))
    with pytest.raises(ValueError, match=r"batch_size \(3\).*target batch_size \(2\)"):
        F.cross_entropy(x, ember.tensor([0, 1]))
    with pytest.raises(RuntimeError, match=r"target of shape \[2, 4\].*input of shape \[2, 5, 3\].*\[2, 3\]"):
        F.nll_loss(ember.randn(2, 5, 3), ember.zeros(2, 4, dtype=ember.int64))
    with pytest.raises(RuntimeError, match=r"5 classes.*shape \[4\]"):
        F.cross_entropy(x, ember.tensor([0, 1, 2]), weight=ember.ones(4))
    with pytest.raises(RuntimeError, match="weight.*float32.*float64"):
        F.nll_loss(x, ember.tensor([0, 1, 2]), weight=ember.ones(5, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="label_smoothing.*1.5"):
        F.cross_entropy(x, ember.tensor([0, 1, 2]), label_smoothing=1.5)
    with pytest.raises(RuntimeError, match="ignore_index.*probability"):
        F.cross_entropy(x, ember.rand(3, 5), ignore_index=1)
    with pytest.raises(ValueError, match="0-d"):
        F.nll_loss(ember.tensor(1.0), ember.tensor(0))
    with pytest.raises(NotImplementedError, match="cross_entropy.*int32"):
        F.cross_entropy(ember.ones(3, 5, dtype=ember.int32), ember.tensor([0, 1, 2]))
    for fn in (F.cross_entropy, F.nll_loss):
        with pytest.raises(ValueError, match="'avg' is not a valid value for reduction"):
            fn(x, ember.tensor([0, 1, 2]), reduction="avg")
    with pytest.raises(TypeError, match="cross_entropy.*'target'"):
        F.cross_entropy(x, [0, 1, 2])


# ---------------------------------------------------------------------- binary cross entropy
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_gradcheck(reduction):
    x, t = rand(3, 4, seed=1, low=0.1, high=0.9), rand(3, 4, seed=2, low=0, high=1)
    w = _e(rand(4, seed=3, low=0.5, high=2))
    check_grad(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), x, t)
    check_grad(lambda a, b: F.binary_cross_entropy(a, b, weight=w, reduction=reduction), x, t)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_parity(reduction, dtype):
    x, t = rand(4, 3, seed=4, low=0.01, high=0.99, dtype=dtype), rand(4, 3, seed=5, low=0, high=1, dtype=dtype)
    compare_torch(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
                  lambda a, b: TF.binary_cross_entropy(a, b, reduction=reduction), x, t)
    for wshape in ((4, 3), (3,), (4, 1)):
        ew, tw = _t(rand(*wshape, seed=6, low=0.5, high=2, dtype=dtype))
        compare_torch(lambda a, b: F.binary_cross_entropy(a, b, weight=ew, reduction=reduction),
                      lambda a, b: TF.binary_cross_entropy(a, b, weight=tw, reduction=reduction), x, t)


ZERO_D = {  # name -> (ember fn, torch fn, 0-d float arguments)
    "mse": (F.mse_loss, lambda *a, **k: TF.mse_loss(*a, **k), (0.3, 1.0)),
    "l1": (F.l1_loss, lambda *a, **k: TF.l1_loss(*a, **k), (0.3, 1.0)),
    "smooth_l1": (F.smooth_l1_loss, lambda *a, **k: TF.smooth_l1_loss(*a, **k), (0.3, 1.0)),
    "smooth_l1_linear": (lambda a, b, **k: F.smooth_l1_loss(a, b, beta=0.5, **k),
                         lambda a, b, **k: TF.smooth_l1_loss(a, b, beta=0.5, **k), (0.3, 3.0)),
    "huber": (F.huber_loss, lambda *a, **k: TF.huber_loss(*a, **k), (0.3, 3.0)),
    "bce": (F.binary_cross_entropy, lambda *a, **k: TF.binary_cross_entropy(*a, **k), (0.25, 0.7)),
    "bce_saturated": (F.binary_cross_entropy, lambda *a, **k: TF.binary_cross_entropy(*a, **k), (0.0, 1.0)),
    "bce_weighted": (lambda a, b, **k: F.binary_cross_entropy(a, b, weight=_e(2.0), **k),
                     lambda a, b, **k: TF.binary_cross_entropy(a, b, weight=torch.tensor(2.0), **k), (0.5, 1.0)),
    "bce_with_logits": (F.binary_cross_entropy_with_logits,
                        lambda *a, **k: TF.binary_cross_entropy_with_logits(*a, **k), (-30.0, 0.2)),
    "kl_div": (F.kl_div, lambda *a, **k: TF.kl_div(*a, **k), (-0.5, 0.3)),
}


@requires_torch
@pytest.mark.filterwarnings("ignore:.*reduction.*mean.*divides")
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_losses_on_0d_inputs(name, reduction, dtype):
    """0-d input and target: a 0-d loss and gradients as PyTorch, whatever the reduction."""
    e_fn, t_fn, args = ZERO_D[name]
    compare_torch(lambda *a: e_fn(*a, reduction=reduction), lambda *a: t_fn(*a, reduction=reduction),
                  *[np.asarray(v, dtype) for v in args])


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_bce_log_clamped_at_saturated_probabilities(dtype):
    x = np.array([0.0, 1.0, 0.0, 1.0, 1e-30, 0.5], dtype)
    t = np.array([0.0, 1.0, 1.0, 0.0, 1.0, 0.5], dtype)
    e = F.binary_cross_entropy(ember.tensor(x), ember.tensor(t), reduction="none").numpy()
    assert np.isfinite(e).all() and e[2] == e[3] == pytest.approx(100.0)
    for reduction in REDUCTIONS:
        compare_torch(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
                      lambda a, b: TF.binary_cross_entropy(a, b, reduction=reduction), x, t)


def test_bce_errors():
    x = ember.rand(3)
    with pytest.raises(ValueError, match=r"target size \(\[3, 1\]\).*input size \(\[3\]\)"):
        F.binary_cross_entropy(x, ember.rand(3, 1))
    with pytest.raises(RuntimeError, match="input should be between 0 and 1.*1.5"):
        F.binary_cross_entropy(ember.tensor([0.5, 1.5]), ember.rand(2))
    with pytest.raises(RuntimeError, match="target should be between 0 and 1"):
        F.binary_cross_entropy(ember.tensor([0.5]), ember.tensor([2.0]))
    with pytest.raises(RuntimeError, match=r"weight of shape \[4\]"):
        F.binary_cross_entropy(x, x, weight=ember.ones(4))
    with pytest.raises(ValueError, match="'x' is not a valid value for reduction"):
        F.binary_cross_entropy(x, x, reduction="x")


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_gradcheck(reduction):
    x, t = rand(3, 4, seed=1, low=-3, high=3), rand(3, 4, seed=2, low=0, high=1)
    check_grad(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction), x, t)
    w, pw = _e(rand(3, 4, seed=3, low=0.5, high=2)), _e(rand(4, seed=4, low=0.5, high=3))
    check_grad(lambda a, b: F.binary_cross_entropy_with_logits(a, b, w, reduction=reduction, pos_weight=pw), x, t)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_parity(reduction, dtype):
    x, t = rand(4, 3, seed=5, low=-4, high=4, dtype=dtype), rand(4, 3, seed=6, low=0, high=1, dtype=dtype)
    compare_torch(lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
                  lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=reduction), x, t)
    (ew, tw), (epw, tpw) = _t(rand(4, 3, seed=7, low=0.5, high=2, dtype=dtype)), _t(rand(3, seed=8, low=0.5, high=3, dtype=dtype))
    compare_torch(lambda a, b: F.binary_cross_entropy_with_logits(a, b, ew, reduction=reduction, pos_weight=epw),
                  lambda a, b: TF.binary_cross_entropy_with_logits(a, b, tw, reduction=reduction, pos_weight=tpw), x, t)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
def test_bce_with_logits_stable_at_extreme_logits(dtype):
    x = np.array([1e4, -1e4, 1e4, -1e4, 0.0], dtype)
    t = np.array([1.0, 0.0, 0.0, 1.0, 0.5], dtype)
    ex = ember.tensor(x, requires_grad=True)
    loss = F.binary_cross_entropy_with_logits(ex, ember.tensor(t), pos_weight=ember.tensor(np.full(5, 2.0, dtype)))
    loss.backward()
    assert np.isfinite(loss.item()) and np.isfinite(ex.grad.numpy()).all()
    compare_torch(F.binary_cross_entropy_with_logits, TF.binary_cross_entropy_with_logits, x, t)


def test_weights_that_require_grad_are_refused_as_in_pytorch():
    x, w = ember.rand(2, 3), ember.ones(3, requires_grad=True)
    t = ember.tensor([0, 2])
    for call in (lambda: F.cross_entropy(x, t, weight=w), lambda: F.nll_loss(x, t, weight=w),
                 lambda: F.binary_cross_entropy(x, x, weight=w),
                 lambda: F.binary_cross_entropy_with_logits(x, x, weight=w),
                 lambda: F.binary_cross_entropy_with_logits(x, x, pos_weight=w)):
        with pytest.raises(RuntimeError, match="not differentiable with respect to '(pos_)?weight'"):
            call()
    with ember.no_grad():
        F.cross_entropy(x, t, weight=w)
    p = F.softmax(x, 1)
    F.cross_entropy(x, p, weight=w).backward()  # class probabilities: a composition, differentiable in the weight
    assert w.grad is not None and w.grad.shape == (3,)


def test_bce_with_logits_errors():
    with pytest.raises(ValueError, match=r"target size \(\[3, 1\]\).*input size \(\[3\]\)"):
        F.binary_cross_entropy_with_logits(ember.rand(3), ember.rand(3, 1))
    with pytest.raises(RuntimeError, match=r"pos_weight of shape \[4\].*\[2, 3\]"):
        F.binary_cross_entropy_with_logits(ember.rand(2, 3), ember.rand(2, 3), pos_weight=ember.ones(4))


# ---------------------------------------------------------------------- KL divergence
@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none"])
def test_kl_div_gradcheck(reduction, log_target):
    x = rand(3, 4, seed=1, low=-3, high=0)
    t = rand(3, 4, seed=2, low=-3, high=0) if log_target else rand(3, 4, seed=2, low=0.05, high=1)
    check_grad(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target), x, t)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none", "mean"])
def test_kl_div_parity(reduction, log_target, dtype):
    x = rand(4, 5, seed=3, low=-3, high=0, dtype=dtype)
    t = rand(4, 5, seed=4, low=-3, high=0, dtype=dtype) if log_target else rand(4, 5, seed=4, low=0.05, high=1, dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compare_torch(lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
                      lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target), x, t)


@requires_torch
def test_kl_div_zero_target_and_mean_warning():
    x = rand(2, 3, seed=5, low=-2, high=0)
    t = np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])
    compare_torch(lambda a: F.kl_div(a, _e(t), reduction="sum"),
                  lambda a: TF.kl_div(a, torch.tensor(t), reduction="sum"), x)
    with pytest.warns(UserWarning, match="batchmean"):
        F.kl_div(ember.tensor(x), ember.tensor(t))
    assert F.kl_div(ember.tensor(0.5), ember.tensor(0.25), reduction="batchmean").shape == ()
    with pytest.raises(ValueError, match="'batch' is not a valid value for reduction"):
        F.kl_div(ember.tensor(x), ember.tensor(t), reduction="batch")
    with pytest.raises(ValueError, match="'batchmean' is not a valid value"):
        F.mse_loss(ember.tensor(x), ember.tensor(t), reduction="batchmean")


# ---------------------------------------------------------------------- modules
def _loss_module_pairs():
    w3, pw3 = rand(3, seed=1, low=0.5, high=2, dtype=np.float32), rand(3, seed=2, low=0.5, high=3, dtype=np.float32)
    ew, tw = _t(w3)
    epw, tpw = _t(pw3)
    return [
        (nn.MSELoss(), torch.nn.MSELoss()), (nn.L1Loss(reduction="sum"), torch.nn.L1Loss(reduction="sum")),
        (nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)), (nn.HuberLoss(delta=2.0), torch.nn.HuberLoss(delta=2.0)),
        (nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()),
        (nn.CrossEntropyLoss(weight=ew, ignore_index=1, label_smoothing=0.1, reduction="none"),
         torch.nn.CrossEntropyLoss(weight=tw, ignore_index=1, label_smoothing=0.1, reduction="none")),
        (nn.NLLLoss(weight=ew), torch.nn.NLLLoss(weight=tw)), (nn.NLLLoss(reduction="sum"), torch.nn.NLLLoss(reduction="sum")),
        (nn.BCELoss(weight=ew), torch.nn.BCELoss(weight=tw)), (nn.BCELoss(), torch.nn.BCELoss()),
        (nn.BCEWithLogitsLoss(pos_weight=epw), torch.nn.BCEWithLogitsLoss(pos_weight=tpw)),
        (nn.BCEWithLogitsLoss(weight=ew, pos_weight=epw), torch.nn.BCEWithLogitsLoss(weight=tw, pos_weight=tpw)),
        (nn.KLDivLoss(reduction="batchmean", log_target=True), torch.nn.KLDivLoss(reduction="batchmean", log_target=True)),
    ]


def _module_inputs(m):
    name = type(m).__name__
    if name in ("CrossEntropyLoss", "NLLLoss"):
        return rand(4, 3, seed=3, dtype=np.float32), np.array([0, 2, 1, 1])
    if name == "BCELoss":
        return rand(4, 3, seed=4, low=0.05, high=0.95, dtype=np.float32), rand(4, 3, seed=5, low=0, high=1, dtype=np.float32)
    return rand(4, 3, seed=6, dtype=np.float32), rand(4, 3, seed=7, dtype=np.float32)


@requires_torch
def test_loss_modules_repr_buffers_and_parity():
    for em, tm in _loss_module_pairs():
        assert repr(em) == repr(tm)
        assert list(em.state_dict()) == list(tm.state_dict())
        assert [k for k, _ in em.named_buffers()] == [k for k, _ in tm.named_buffers()]
        assert em.reduction == tm.reduction
        compare_torch(em, tm, *_module_inputs(em))


@requires_torch
def test_loss_module_loads_pytorch_state_dict():
    tm = torch.nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
    em = nn.CrossEntropyLoss(weight=ember.ones(3))
    em.load_state_dict({k: ember.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    np.testing.assert_array_equal(em.weight.numpy(), [1.0, 2.0, 0.5])
    compare_torch(em.to(DEVICE), tm, *_module_inputs(em))
    pm = nn.BCEWithLogitsLoss(pos_weight=ember.ones(3))
    assert list(pm.state_dict()) == ["pos_weight"] and pm.weight is None


def test_loss_module_options_and_bad_reduction():
    m = nn.CrossEntropyLoss(ignore_index=3, label_smoothing=0.2)
    assert (m.ignore_index, m.label_smoothing, m.reduction, m.weight) == (3, 0.2, "mean", None)
    assert nn.SmoothL1Loss(beta=0.3).beta == 0.3 and nn.HuberLoss(delta=3.0).delta == 3.0
    assert nn.KLDivLoss(log_target=True).log_target
    with pytest.warns(UserWarning, match="size_average and reduce"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.raises(ValueError, match="MSELoss.*'avg' is not a valid value for reduction"):
        nn.MSELoss(reduction="avg")
    with pytest.raises(ValueError, match="'batchmean' is not a valid"):
        nn.L1Loss(reduction="batchmean")
    assert nn.KLDivLoss(reduction="batchmean").reduction == "batchmean"
