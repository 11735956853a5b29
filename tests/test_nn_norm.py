"""batch_norm, layer_norm, group_norm (ember/ops/nn_norm.py) and BatchNorm1d/2d, LayerNorm, GroupNorm:
gradients (incl. double backward), PyTorch parity, running statistics, train/eval, errors, repr."""
import numpy as np
import pytest
from helpers import DEVICE, check_grad, compare_torch, host, noncontig, rand, requires_torch, torch

import ember
import ember.nn as nn
import ember.nn.functional as F

if torch is not None:
    import torch.nn.functional as TF

DTYPES = [np.float64, np.float32]
BN_SHAPES = [(4, 3), (4, 3, 5), (3, 2, 3, 3)]


def _affine(c, dtype=np.float64):
    return rand(c, seed=3, low=0.5, high=1.5, dtype=dtype), rand(c, seed=4, dtype=dtype)


# ---------------------------------------------------------------------- batch_norm
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
def test_batch_norm_training_gradcheck(shape):
    x = rand(*shape, low=-2, high=2)
    w, b = _affine(shape[1])
    check_grad(lambda a, c, d: F.batch_norm(a, None, None, c, d, training=True), x, w, b)
    check_grad(lambda a: F.batch_norm(a, None, None, training=True, eps=1e-3), x)
    check_grad(lambda a, c: F.batch_norm(a, None, None, c, None, training=True), noncontig(x), w)


@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
def test_batch_norm_eval_gradcheck(shape):
    c = shape[1]
    rm, rv = ember.tensor(rand(c, seed=5), device=DEVICE), ember.tensor(rand(c, seed=6, low=0.5, high=2), device=DEVICE)
    check_grad(lambda a, w, b: F.batch_norm(a, rm, rv, w, b, training=False), rand(*shape), *_affine(c))


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_parity_and_running_stats(shape, training, affine, dtype):
    c = shape[1]
    stats = [rand(c, seed=5, dtype=dtype), rand(c, seed=6, low=0.5, high=2, dtype=dtype)]
    e_stats = [ember.tensor(s, device=DEVICE) for s in stats]
    t_stats = [torch.tensor(s) for s in stats]
    params = list(_affine(c, dtype)) if affine else []

    def run(lib_stats, fn):
        def f(x, *wb):
            return fn(x, *lib_stats, *wb, training=training, momentum=0.3, eps=1e-4)
        return f
    compare_torch(run(e_stats, F.batch_norm), run(t_stats, TF.batch_norm), rand(*shape, dtype=dtype), *params)
    for e, t in zip(e_stats, t_stats):  # running statistics updated in place (training) or left alone (eval)
        np.testing.assert_allclose(host(e), t.numpy(), rtol=1e-6)
        assert e.dtype == ember.float32 if dtype == np.float32 else e.dtype == ember.float64


def _bn_reference(x, cot, rm, rv, w, b, training, eps=1e-5):
    """batch_norm's output and input/weight/bias gradients in float64 NumPy (independent of memory layout)."""
    x, cot = x.astype(np.float64), cot.astype(np.float64)
    view, ax = (x.shape[1],) + (1,) * (x.ndim - 2), (0,) + tuple(range(2, x.ndim))
    wv, bv = w.astype(np.float64).reshape(view), b.astype(np.float64).reshape(view)
    if training:
        mu, var = x.mean(ax, keepdims=True), x.var(ax, keepdims=True)
    else:
        mu, var = rm.astype(np.float64).reshape(view), rv.astype(np.float64).reshape(view)
    r = 1 / np.sqrt(var + eps)
    xh, g = (x - mu) * r, cot * wv
    gx = r * (g - g.mean(ax, keepdims=True) - xh * (g * xh).mean(ax, keepdims=True)) if training else g * r
    return [xh * wv + bv, gx, (cot * xh).sum(ax), cot.sum(ax)]


def _transposed(a):
    """The values of `a` as a non-contiguous view (all axes reversed in memory), e.g. strides (4, 4, 4, 12)."""
    return np.ascontiguousarray(np.swapaxes(a, 0, -1)).swapaxes(0, -1)


@pytest.mark.parametrize("shape", [(1, 2, 1, 2), (1, 3, 1, 2), (2, 3, 1, 2), (3, 2, 4), (1, 3, 2, 2)])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm_any_layout_any_order(shape, training, dtype):
    """Contiguous then transposed input of one shape, and the other way round: each call gives the float64
    reference's output and gradients (no cache keyed by shape and dtype may mix up layouts). PyTorch 2.x's CPU
    batch_norm backward is itself wrong on some of these layouts, so the reference here is NumPy."""
    rng = np.random.default_rng(0)
    a = rng.uniform(-2, 2, shape).astype(dtype)
    c = shape[1]
    rm, rv = rng.uniform(-1, 1, c).astype(dtype), rng.uniform(0.5, 2, c).astype(dtype)
    w, b = rng.uniform(-1, 1, c).astype(dtype), rng.uniform(-1, 1, c).astype(dtype)
    cot = rng.uniform(-1, 1, shape).astype(dtype)
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-9, atol=1e-11)
    ref = _bn_reference(a, cot, rm, rv, w, b, training)
    for order in (("contiguous", "transposed"), ("transposed", "contiguous"), ("transposed", "transposed")):
        for layout in order:
            x = ember.from_numpy(_transposed(a) if layout == "transposed" else a.copy()).requires_grad_(True)
            assert x.is_contiguous() == (layout == "contiguous")
            ew, eb = ember.tensor(w, requires_grad=True), ember.tensor(b, requires_grad=True)
            y = F.batch_norm(x, ember.tensor(rm), ember.tensor(rv), ew, eb, training=training)
            y.backward(ember.from_numpy(cot.copy()))
            for got, want in zip([y.detach(), x.grad, ew.grad, eb.grad], ref):
                np.testing.assert_allclose(got.numpy(), want, **tol)


def test_batch_norm_errors():
    x = ember.randn(4, 3)
    with pytest.raises(ValueError, match=r"Expected more than 1 value per channel when training.*\[1, 3\]"):
        F.batch_norm(ember.randn(1, 3), None, None, training=True)
    with pytest.raises(RuntimeError, match="running_mean should contain 3 elements not 4"):
        F.batch_norm(x, ember.zeros(4), ember.ones(4), training=True)
    with pytest.raises(RuntimeError, match="weight should contain 3 elements not 4"):
        F.batch_norm(x, ember.zeros(3), ember.ones(3), ember.ones(4))
    with pytest.raises(RuntimeError, match="running_mean and running_var must be defined in evaluation mode"):
        F.batch_norm(x, None, None, training=False)
    with pytest.raises(RuntimeError, match=r"\(N, C\).*\[4\]"):
        F.batch_norm(ember.randn(4), ember.zeros(4), ember.ones(4))
    with pytest.raises(RuntimeError, match="mixed dtypes: weight is float64 but input is float32"):
        F.batch_norm(x, None, None, ember.ones(3, dtype=ember.float64), training=True)
    with pytest.raises(RuntimeError, match="floating-point input, got int64"):
        F.batch_norm(ember.ones(4, 3, dtype=ember.long), None, None, training=True)
    with pytest.raises(ValueError, match="eps must be positive"):
        F.batch_norm(x, None, None, training=True, eps=0.0)


# ---------------------------------------------------------------------- layer_norm
LN_CASES = [((4, 5), (5,)), ((2, 3, 4), (3, 4)), ((6,), (6,)), ((2, 3, 4), 4)]


@pytest.mark.parametrize("shape,ns", LN_CASES, ids=str)
def test_layer_norm_gradcheck(shape, ns):
    ps = (ns,) if isinstance(ns, int) else ns
    w, b = rand(*ps, seed=3, low=0.5, high=1.5), rand(*ps, seed=4)
    x = rand(*shape, low=-2, high=2)
    check_grad(lambda a, c, d: F.layer_norm(a, ns, c, d), x, w, b)
    check_grad(lambda a: F.layer_norm(a, ns, eps=1e-3), x)
    check_grad(lambda a, c: F.layer_norm(a, ns, c), noncontig(x), w)
    check_grad(lambda a, d: F.layer_norm(a, ns, None, d), x, b)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,ns", LN_CASES, ids=str)
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_parity(shape, ns, affine, dtype):
    ps = (ns,) if isinstance(ns, int) else ns
    params = [rand(*ps, seed=3, low=0.5, high=1.5, dtype=dtype), rand(*ps, seed=4, dtype=dtype)]
    params = {"both": params, "weight": params[:1], "none": []}[affine]
    compare_torch(lambda x, *p: F.layer_norm(x, ns, *p, eps=1e-4), lambda x, *p: TF.layer_norm(x, ps, *p, eps=1e-4),
                  rand(*shape, dtype=dtype), *params)


@requires_torch
def test_layer_norm_double_backward_parity():
    x, w, b = rand(3, 5, low=-2, high=2), rand(5, seed=3), rand(5, seed=4)
    res = []
    for lib, f in ((ember, F.layer_norm), (torch, TF.layer_norm)):
        xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        y = (f(xt, (5,), wt, bt) ** 3).sum()
        gx, gw = lib.autograd.grad(y, [xt, wt], create_graph=True)
        ((gx * gx).sum() + (gw * gw).sum()).backward()
        res.append([t.grad.numpy() for t in (xt, wt, bt)])
    for a, c in zip(*res):
        np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-12)


def test_layer_norm_output_modified_in_place_keeps_gradient():
    x = ember.tensor(rand(3, 4), requires_grad=True)
    y = F.layer_norm(x, (4,))  # no affine: the result must not share memory with what backward keeps
    (y * y).sum().backward()
    g_ref = x.grad.numpy().copy()
    x.grad = None
    y = F.layer_norm(x, (4,))
    with ember.no_grad():
        y._data[...] = 7.0
    F.layer_norm(x, (4,)).pow(2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), g_ref, atol=1e-12)


def test_layer_norm_errors():
    x = ember.randn(3, 5)
    with pytest.raises(RuntimeError, match=r"normalized_shape=\[4\], expected input with shape \[\*, 4\].*\[3, 5\]"):
        F.layer_norm(x, (4,))
    with pytest.raises(RuntimeError, match=r"weight to be of same shape as normalized_shape.*\[4\]"):
        F.layer_norm(x, (5,), ember.ones(4))
    with pytest.raises(RuntimeError, match="mixed dtypes: bias is float64"):
        F.layer_norm(x, (5,), None, ember.zeros(5, dtype=ember.float64))
    with pytest.raises(RuntimeError, match="floating-point input"):
        F.layer_norm(ember.ones(3, 5, dtype=ember.long), (5,))


# ---------------------------------------------------------------------- group_norm
GN_CASES = [((2, 4, 3), 2), ((3, 6), 2), ((2, 4, 2, 3), 4), ((2, 4, 3), 1)]


@pytest.mark.parametrize("shape,groups", GN_CASES, ids=str)
def test_group_norm_gradcheck(shape, groups):
    w, b = _affine(shape[1])
    check_grad(lambda a, c, d: F.group_norm(a, groups, c, d), rand(*shape, low=-2, high=2), w, b)


@requires_torch
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,groups", GN_CASES, ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_parity(shape, groups, affine, dtype):
    params = list(_affine(shape[1], dtype)) if affine else []
    compare_torch(lambda x, *p: F.group_norm(x, groups, *p), lambda x, *p: TF.group_norm(x, groups, *p),
                  rand(*shape, dtype=dtype), *params)


def test_group_norm_errors():
    with pytest.raises(RuntimeError, match=r"divisible by num_groups.*\[3, 5\] and num_groups=2"):
        F.group_norm(ember.randn(3, 5), 2)
    with pytest.raises(RuntimeError, match=r"weight to be a vector of size equal to the number of channels.*\[3\]"):
        F.group_norm(ember.randn(3, 4), 2, ember.ones(3))
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.group_norm(ember.randn(4), 2)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.group_norm(ember.randn(1, 2), 2)


# (op on float32 x (8, 3, 4), γ and β of shape c): float32 output and gradients, no silent upcast
FLOAT32 = [(lambda x, w, b: F.batch_norm(x, ember.zeros(3, device=x.device), ember.ones(3, device=x.device), w, b,
                                         training=True), (3,)),
           (lambda x, w, b: F.layer_norm(x, (3, 4), w, b), (3, 4)),
           (lambda x, w, b: F.group_norm(x, 3, w, b), (3,))]


@pytest.mark.parametrize("fn, c", FLOAT32, ids=["batch_norm", "layer_norm", "group_norm"])
def test_float32_stays_float32(fn, c):
    x = ember.randn(8, 3, 4, requires_grad=True)
    w, b = ember.ones(*c, requires_grad=True), ember.zeros(*c, requires_grad=True)
    y = fn(x, w, b)
    (y * y).sum().backward()
    assert y.dtype == x.grad.dtype == w.grad.dtype == b.grad.dtype == ember.float32


# ---------------------------------------------------------------------- modules
def _load_from_torch(e_mod, t_mod) -> None:
    sd = {k: v.detach().numpy().copy() for k, v in t_mod.state_dict().items()}
    assert list(e_mod.state_dict().keys()) == list(sd.keys())
    e_mod.load_state_dict(sd)


def _step(e_mod, t_mod, x: np.ndarray, seed: int):
    """One forward/backward of both modules; compares outputs, input and parameter gradients."""
    xe, xt = ember.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    ye, yt = e_mod(xe), t_mod(xt)
    np.testing.assert_allclose(ye.detach().numpy(), yt.detach().numpy(), rtol=1e-6, atol=1e-9)
    cot = rand(*x.shape, seed=seed)
    ye.backward(ember.tensor(cot))
    yt.backward(torch.tensor(cot))
    np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-9)
    tp = dict(t_mod.named_parameters())
    for name, p in e_mod.named_parameters():
        np.testing.assert_allclose(p.grad.numpy(), tp[name].grad.numpy(), rtol=1e-6, atol=1e-9, err_msg=name)
        p.grad = None
        tp[name].grad = None


def _buffers_equal(e_mod, t_mod) -> None:
    tb = dict(t_mod.named_buffers())
    eb = dict(e_mod.named_buffers())
    assert list(eb) == list(tb)
    for k, v in tb.items():
        assert eb[k].dtype == (ember.int64 if k == "num_batches_tracked" else ember.float64), k
        np.testing.assert_allclose(eb[k].numpy(), v.numpy(), rtol=1e-10, err_msg=k)


@requires_torch
@pytest.mark.parametrize("cls,shape", [("BatchNorm1d", (8, 3)), ("BatchNorm1d", (4, 3, 5)),
                                       ("BatchNorm2d", (4, 3, 2, 3))])
@pytest.mark.parametrize("kw", [{}, {"momentum": None}, {"affine": False}, {"track_running_stats": False},
                                {"bias": False, "momentum": 0.5, "eps": 1e-3}], ids=str)
def test_batchnorm_module_train_eval_parity_over_steps(cls, shape, kw):
    e, t = getattr(nn, cls)(3, **kw).double(), getattr(torch.nn, cls)(3, **kw).double()
    assert repr(e) == repr(t)
    _load_from_torch(e, t)
    with torch.no_grad():  # non-trivial affine parameters
        for p in t.parameters():
            p.add_(torch.tensor(rand(3, seed=11)))
    _load_from_torch(e, t)
    for step in range(4):
        _step(e, t, rand(*shape, seed=step, low=-3, high=3) + step, seed=10 + step)
        _buffers_equal(e, t)
    e.eval()
    t.eval()
    for step in range(2):
        _step(e, t, rand(*shape, seed=20 + step), seed=30 + step)
        _buffers_equal(e, t)  # eval does not touch the running statistics


def test_batchnorm_module_defaults_and_buffers():
    m = nn.BatchNorm2d(5)
    assert list(m.state_dict()) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]
    assert m.num_batches_tracked.dtype == ember.int64 and m.num_batches_tracked.shape == ()
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.ones(5))
    np.testing.assert_array_equal(m.bias.detach().numpy(), np.zeros(5))
    np.testing.assert_array_equal(m.running_var.numpy(), np.ones(5))
    m(ember.randn(2, 5, 3, 3))
    m(ember.randn(2, 5, 3, 3))
    assert int(m.num_batches_tracked) == 2
    m.reset_running_stats()
    assert int(m.num_batches_tracked) == 0 and np.all(m.running_mean.numpy() == 0)
    n = nn.BatchNorm1d(3, track_running_stats=False)
    assert n.running_mean is None and list(n.state_dict()) == ["weight", "bias"]
    # old checkpoints lack num_batches_tracked: tolerated, as in PyTorch
    sd = {k: v for k, v in nn.BatchNorm1d(3).state_dict().items() if k != "num_batches_tracked"}
    assert nn.BatchNorm1d(3).load_state_dict(sd).missing_keys == []


def test_batchnorm_module_errors_name_layer():
    with pytest.raises(ValueError, match=r"BatchNorm1d\(3\): expected 2D or 3D input \(got 4D input"):
        nn.BatchNorm1d(3)(ember.randn(4, 3, 2, 2))
    with pytest.raises(ValueError, match=r"BatchNorm2d\(3\): expected 4D input \(got 3D input"):
        nn.BatchNorm2d(3)(ember.randn(4, 3, 2))
    with pytest.raises(RuntimeError, match=r"BatchNorm1d\(3\): expected input with 3 channels.*\[4, 5\]"):
        nn.BatchNorm1d(3)(ember.randn(4, 5))


@requires_torch
@pytest.mark.parametrize("kw", [{}, {"elementwise_affine": False}, {"bias": False}, {"eps": 1e-3}], ids=str)
@pytest.mark.parametrize("ns,shape", [(5, (4, 5)), ((3, 5), (2, 3, 5))], ids=str)
def test_layernorm_module_parity(ns, shape, kw):
    e, t = nn.LayerNorm(ns, **kw).double(), torch.nn.LayerNorm(ns, **kw).double()
    assert repr(e) == repr(t)
    _load_from_torch(e, t)
    with torch.no_grad():
        for p in t.parameters():
            p.add_(torch.tensor(rand(*p.shape, seed=2)))
    _load_from_torch(e, t)
    _step(e, t, rand(*shape), seed=1)
    assert e.normalized_shape == t.normalized_shape


def test_layernorm_module_errors_name_layer():
    with pytest.raises(RuntimeError, match=r"LayerNorm\(\(5,\), eps=1e-05.*\[\*, 5\].*\[3, 4\]"):
        nn.LayerNorm(5)(ember.randn(3, 4))


@requires_torch
@pytest.mark.parametrize("kw", [{}, {"affine": False}, {"bias": False}], ids=str)
def test_groupnorm_module_parity(kw):
    e, t = nn.GroupNorm(2, 4, **kw).double(), torch.nn.GroupNorm(2, 4, **kw).double()
    assert repr(e) == repr(t)
    _load_from_torch(e, t)
    with torch.no_grad():
        for p in t.parameters():
            p.add_(torch.tensor(rand(4, seed=2)))
    _load_from_torch(e, t)
    _step(e, t, rand(3, 4, 2, 2), seed=1)


def test_groupnorm_module_errors():
    with pytest.raises(ValueError, match=r"num_channels \(5\) must be divisible by num_groups \(2\)"):
        nn.GroupNorm(2, 5)
    with pytest.raises(RuntimeError, match=r"GroupNorm\(2, 4.*\(N, 4, \*\).*\[3, 6\]"):
        nn.GroupNorm(2, 4)(ember.randn(3, 6))
