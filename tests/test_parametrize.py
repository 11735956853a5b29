"""ember.nn.utils.parametrize / parametrizations / prune against torch.nn.utils: the module layout (class,
state dict keys), values and gradients, removal, caching, and errors."""
from __future__ import annotations

import copy
import pickle
import warnings

import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.nn.utils import parametrizations as P
from ember.nn.utils import parametrize, prune
from helpers import check_grad, rand, requires_torch, torch


def _linear(lib, n_in=4, n_out=3, dtype=np.float64, seed=0):
    """A Linear layer of either library with the same (seeded) weights."""
    rng = np.random.default_rng(seed)
    w, b = rng.standard_normal((n_out, n_in)).astype(dtype), rng.standard_normal(n_out).astype(dtype)
    m = lib.nn.Linear(n_in, n_out).to(getattr(lib, np.dtype(dtype).name))
    with lib.no_grad():
        m.weight.copy_(lib.tensor(w))
        m.bias.copy_(lib.tensor(b))
    return m


def _np(t) -> np.ndarray:
    return t.detach().numpy()


def _run(lib, m, x: np.ndarray, cot: np.ndarray):
    """Forward on x and backward with cotangent `cot`; returns the output."""
    out = m(lib.tensor(x))
    out.backward(lib.tensor(cot))
    return out


def _grads(m) -> dict:
    return {k: _np(p.grad) for k, p in m.named_parameters() if p.grad is not None}


def _same(em, tm, x, rtol=1e-10, atol=1e-12) -> None:
    """Same state dict keys, values, forward and gradients (for a random cotangent)."""
    assert list(em.state_dict()) == list(tm.state_dict())
    for k, v in tm.state_dict().items():
        np.testing.assert_allclose(_np(em.state_dict()[k]), _np(v), rtol=rtol, atol=atol, err_msg=k)
    with torch.no_grad(), ember.no_grad():  # (both called: a training spectral norm steps its power iteration)
        shape = em(ember.tensor(x)).shape, tm(torch.tensor(x)).shape
    cot = np.random.default_rng(3).standard_normal(tuple(shape[1])).astype(x.dtype)
    eo, to = _run(ember, em, x, cot), _run(torch, tm, x, cot)
    np.testing.assert_allclose(_np(eo), _np(to), rtol=rtol, atol=atol)
    eg, tg = _grads(em), _grads(tm)
    assert eg.keys() == tg.keys()
    for k in tg:
        np.testing.assert_allclose(eg[k], tg[k], rtol=rtol, atol=atol, err_msg=f"gradient of {k}")


class Symmetric(nn.Module):
    def forward(self, X):
        return X.triu() + X.triu(1).mT

    def right_inverse(self, A):
        return A.triu()


class Scale(nn.Module):
    def forward(self, X):
        return 2 * X

    def right_inverse(self, A):
        return A / 2


class RankOne(nn.Module):
    def forward(self, x, y):
        return x.unsqueeze(-1) @ y.unsqueeze(-2)

    def right_inverse(self, Z):
        return Z[:, 0].clone(), Z[0, :].clone()


def _torch_versions():
    """The same parametrizations written for torch (the same code: the Tensor methods are PyTorch's)."""
    return {name: type(name, (torch.nn.Module,), {k: v for k, v in cls.__dict__.items() if k in ("forward",
                                                                                              "right_inverse")})
            for name, cls in (("Symmetric", Symmetric), ("Scale", Scale), ("RankOne", RankOne))}


# ---------------------------------------------------------------------- parametrize
@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("stack", [["Symmetric"], ["Symmetric", "Scale"], ["RankOne"]])
def test_register_parametrization_matches_torch(stack, dtype):
    tv = _torch_versions()
    em, tm = _linear(ember, 3, 3, dtype), _linear(torch, 3, 3, dtype)
    for name in stack:
        parametrize.register_parametrization(em, "weight", globals()[name]())
        torch.nn.utils.parametrize.register_parametrization(tm, "weight", tv[name]())
    assert type(em).__name__ == type(tm).__name__ == "ParametrizedLinear"
    assert parametrize.type_before_parametrizations(em) is nn.Linear
    assert isinstance(em, nn.Linear) and parametrize.is_parametrized(em) and parametrize.is_parametrized(em, "weight")
    assert not parametrize.is_parametrized(em, "bias")
    assert len(em.parametrizations.weight) == len(stack)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-6)
    _same(em, tm, rand(5, 3, dtype=dtype), **tol)
    assert [n for n, _ in em.named_parameters()] == [n for n, _ in tm.named_parameters()]


def test_parametrized_weight_trains_the_original():
    m = _linear(ember, 3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    original = m.parametrizations.weight.original
    opt = ember.optim.SGD(m.parameters(), lr=0.1)
    m(ember.ones(2, 3, dtype=ember.float64)).sum().backward()
    opt.step()
    W = _np(m.weight)
    np.testing.assert_allclose(W, W.T)
    assert original.grad is not None and "weight" not in m._parameters


def test_right_inverse_and_assignment():
    S = rand(3, 3)
    S = S + S.T
    m = _linear(ember, 3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    original = m.parametrizations.weight.original
    m.weight = ember.tensor(S)  # stores right_inverse(S): the upper triangle
    assert m.parametrizations.weight.original is original  # the same Parameter, new values
    np.testing.assert_allclose(_np(original), np.triu(S))
    np.testing.assert_allclose(_np(m.weight), S)
    # A second module, whose ParametrizationList is not called before Scale joins it (unsafe=True skips the
    # check that calls it): under EMBER_TEST_COMPILE=1 a list called before a parametrization is appended to
    # it replays its old program, as ember.compile does not guard a module's list of submodules.
    m2 = _linear(ember, 3, 3)
    parametrize.register_parametrization(m2, "weight", Symmetric())
    parametrize.register_parametrization(m2, "weight", Scale(), unsafe=True)
    m2.weight = ember.tensor(S)  # Scale's inverse, then Symmetric's
    np.testing.assert_allclose(_np(m2.weight), S)
    np.testing.assert_allclose(_np(m2.parametrizations.weight.original), np.triu(S) / 2)


def test_several_originals():
    m = _linear(ember, 3, 4)
    parametrize.register_parametrization(m, "weight", RankOne())
    plist = m.parametrizations.weight
    assert not plist.is_tensor and plist.ntensors == 2
    assert list(m.state_dict()) == ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    assert m.weight.shape == (4, 3)
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    W = _np(m.weight)
    parametrize.remove_parametrizations(m, "weight")
    assert isinstance(m.weight, nn.Parameter) and type(m) is nn.Linear
    np.testing.assert_allclose(_np(m.weight), W)


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations(leave):
    m = _linear(ember, 3, 3)
    W0 = _np(m.weight).copy()
    parametrize.register_parametrization(m, "weight", Symmetric())
    original = m.parametrizations.weight.original
    parametrize.register_parametrization(m, "bias", Scale())
    Wp, b0 = _np(m.weight).copy(), _np(m.parametrizations.bias.original).copy()
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=leave)
    assert m.weight is original and isinstance(m.weight, nn.Parameter)
    np.testing.assert_allclose(_np(m.weight), Wp if leave else np.triu(W0))
    assert type(m).__name__ == "ParametrizedLinear"  # bias is still parametrized
    parametrize.remove_parametrizations(m, "bias", leave_parametrized=leave)
    assert type(m) is nn.Linear and not hasattr(m, "parametrizations")
    np.testing.assert_allclose(_np(m.bias), 2 * b0 if leave else b0)
    assert list(m.state_dict()) == ["weight", "bias"]
    with pytest.raises(ValueError, match="does not have a parametrization on weight"):
        parametrize.remove_parametrizations(m, "weight")


def test_buffer_parametrization_and_cached():
    class Triple(nn.Module):
        def forward(self, X):
            return X * 3

    m = nn.BatchNorm1d(3)
    parametrize.register_parametrization(m, "running_var", Triple())
    assert "parametrizations.running_var.original" in m.state_dict()
    assert not m.parametrizations.running_var.original.requires_grad
    with parametrize.cached():
        a, b = m.running_var, m.running_var
        with parametrize.cached():  # nested: the same cache
            c = m.running_var
    assert a is b is c  # computed once in the block
    assert m.running_var is not m.running_var  # outside: computed at every access
    np.testing.assert_allclose(_np(m.running_var), np.full(3, 3.0))


def test_copies_and_pickling():
    m = _linear(ember, 3, 3)
    parametrize.register_parametrization(m, "weight", Symmetric())
    c = copy.deepcopy(m)
    assert type(c) is type(m) and c.parametrizations.weight.original is not m.parametrizations.weight.original
    np.testing.assert_allclose(_np(c.weight), _np(m.weight))
    with ember.no_grad():
        c.parametrizations.weight.original.zero_()
    assert np.abs(_np(m.weight)).sum() > 0
    with pytest.raises(RuntimeError, match="only supported through state_dict"):
        pickle.dumps(m)
    fresh = _linear(ember, 3, 3, seed=5)
    parametrize.register_parametrization(fresh, "weight", Symmetric())
    fresh.load_state_dict(m.state_dict())
    np.testing.assert_allclose(_np(fresh.weight), _np(m.weight))


def test_transfer_parametrizations_and_params():
    a, b = _linear(ember, 3, 3), nn.Linear(3, 3)
    parametrize.register_parametrization(a, "weight", Symmetric())
    parametrize.transfer_parametrizations_and_params(a, b)
    assert b.parametrizations.weight.original is a.parametrizations.weight.original
    np.testing.assert_allclose(_np(b.weight), _np(a.weight))
    assert parametrize.transfer_parametrizations_and_params(nn.Linear(2, 2), b) is b


def test_parametrize_errors():
    m = nn.Linear(3, 3)

    class Shape(nn.Module):
        def forward(self, X):
            return X[:2]

    class Dtype(nn.Module):
        def forward(self, X):
            return X.double()

    with pytest.raises(ValueError, match="may not change the shape of the tensor"):
        parametrize.register_parametrization(m, "weight", Shape())
    with pytest.raises(ValueError, match="may not change the dtype of the tensor"):
        parametrize.register_parametrization(m, "weight", Dtype())
    assert type(m) is nn.Linear and "weight" in m._parameters  # a failed registration changes nothing
    parametrize.register_parametrization(m, "weight", Shape(), unsafe=True)
    assert m.weight.shape == (2, 3)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element with name "
                                         "'nope'"):
        parametrize.register_parametrization(m, "nope", Symmetric())
    with pytest.raises(RuntimeError, match="does not implement right_inverse"):
        m.weight = ember.zeros(2, 3)
    with pytest.raises(KeyError, match="attribute 'weight' already exists"):
        m.weight = nn.Parameter(ember.zeros(3, 3))
    with pytest.raises(ValueError, match="requires one or more modules"):
        parametrize.ParametrizationList([], ember.zeros(2))


# ---------------------------------------------------------------------- parametrizations
@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("dim", [0, 1, None, -2])
def test_weight_norm_matches_torch(dim, dtype):
    em, tm = _linear(ember, 4, 3, dtype), _linear(torch, 4, 3, dtype)
    P.weight_norm(em, dim=dim)
    torch.nn.utils.parametrizations.weight_norm(tm, dim=dim)
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-6)
    _same(em, tm, rand(5, 4, dtype=dtype), **tol)


@requires_torch
def test_weight_norm_conv_matches_torch():
    torch.manual_seed(0)
    tm = torch.nn.Conv2d(2, 3, 3).double()
    em = nn.Conv2d(2, 3, 3).double()
    em.load_state_dict({k: _np(v) for k, v in tm.state_dict().items()})
    P.weight_norm(em, dim=1)
    torch.nn.utils.parametrizations.weight_norm(tm, dim=1)
    assert em.parametrizations.weight.original0.shape == (1, 2, 1, 1)
    _same(em, tm, rand(2, 2, 5, 5))


def test_weight_norm_gradcheck():
    check_grad(lambda g, v: P._WeightNorm(0)(g, v), rand(3, 1, low=0.5), rand(3, 4, seed=1))
    check_grad(lambda g, v: P._WeightNorm(None)(g, v), rand(low=0.5), rand(3, 4, seed=1))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind,kwargs", [("linear", {}), ("linear", dict(n_power_iterations=3)),
                                         ("convT", {}), ("conv", dict(dim=1, eps=1e-6))])
def test_spectral_norm_matches_torch(kind, kwargs, dtype):
    torch.manual_seed(0)
    make = {"linear": lambda lib: lib.nn.Linear(4, 3), "convT": lambda lib: lib.nn.ConvTranspose2d(2, 3, 2),
            "conv": lambda lib: lib.nn.Conv2d(2, 3, 2)}[kind]
    tname = np.dtype(dtype).name
    tm, em = make(torch).to(getattr(torch, tname)), make(ember).to(getattr(ember, tname))
    em.load_state_dict({k: _np(v) for k, v in tm.state_dict().items()})
    P.spectral_norm(em, **kwargs)
    torch.nn.utils.parametrizations.spectral_norm(tm, **kwargs)
    es, ts = em.parametrizations.weight[0], tm.parametrizations.weight[0]
    assert es.dim == ts.dim
    with ember.no_grad():  # the random starting vectors are each library's own: start from PyTorch's
        es._u.copy_(ember.tensor(_np(ts._u)))
        es._v.copy_(ember.tensor(_np(ts._v)))
    tol = dict(rtol=1e-9, atol=1e-11) if dtype == np.float64 else dict(rtol=1e-4, atol=1e-5)
    x = rand(2, 4, dtype=dtype) if kind == "linear" else rand(1, 2, 4, 4, dtype=dtype)
    for mode in (True, True, False):  # training: each access runs the power iteration; eval: it does not
        em.train(mode), tm.train(mode)
        for p in list(em.parameters()) + list(tm.parameters()):
            p.grad = None
        _same(em, tm, x, **tol)


def test_spectral_norm_estimates_sigma():
    m = nn.Linear(6, 5).double()
    W0 = _np(m.weight).copy()
    P.spectral_norm(m, n_power_iterations=5)
    for _ in range(10):
        W = _np(m.weight)
    np.testing.assert_allclose(W, W0 / np.linalg.norm(W0, 2), rtol=1e-6)
    m.eval()
    u = _np(m.parametrizations.weight[0]._u).copy()
    m.weight
    np.testing.assert_array_equal(_np(m.parametrizations.weight[0]._u), u)  # eval: no power iteration
    v = nn.Module()
    v.register_buffer("w", ember.tensor([3.0, 4.0], dtype=ember.float64))
    P.spectral_norm(v, "w")
    np.testing.assert_allclose(_np(v.w), [0.6, 0.8])  # a vector: divided by its norm


def test_spectral_norm_errors():
    with pytest.raises(IndexError, match=r"Dimension out of range \(expected to be in range of \[-2, 1\] but got 2\)"):
        P.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive, but got n_power_iterations=0"):
        P.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)
    with pytest.raises(ValueError, match="has no parameter or buffer with name 'nope'"):
        P.spectral_norm(nn.Linear(2, 2), "nope")


@requires_torch
@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
def test_orthogonal_square_matches_torch(orthogonal_map, shape):
    """Square: the initial Q (QR with diag(R) ≥ 0) and the map from the base are deterministic."""
    W = rand(*shape, seed=2)
    em, tm = nn.Module(), torch.nn.Module()
    em.weight = nn.Parameter(ember.tensor(W))
    tm.weight = torch.nn.Parameter(torch.tensor(W))
    P.orthogonal(em, orthogonal_map=orthogonal_map)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map=orthogonal_map)
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(_np(em.weight), _np(tm.weight), rtol=1e-10, atol=1e-12)
    # a step away from the base: the maps themselves (and their gradients) agree
    D = rand(*shape, seed=3) * 0.3
    with ember.no_grad():
        em.parametrizations.weight.original.add_(ember.tensor(D))
    with torch.no_grad():
        tm.parametrizations.weight.original.add_(torch.tensor(D))
    C = rand(*shape, seed=4)
    (em.weight * ember.tensor(C)).sum().backward()
    (tm.weight * torch.tensor(C)).sum().backward()
    np.testing.assert_allclose(_np(em.weight), _np(tm.weight), rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(_np(em.parametrizations.weight.original.grad),
                               _np(tm.parametrizations.weight.original.grad), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 3)])
@pytest.mark.parametrize("trivialization", [True, False])
def test_orthogonal_is_orthogonal(orthogonal_map, shape, trivialization):
    m = nn.Module()
    m.weight = nn.Parameter(ember.tensor(rand(*shape, seed=1)))
    P.orthogonal(m, orthogonal_map=orthogonal_map, use_trivialization=trivialization)
    X = m.parametrizations.weight.original
    with ember.no_grad():  # off the diagonal (householder reads the diagonal's signs, truncated to ints)
        X.add_(ember.tensor(rand(*X.shape) * 0.2) * (1 - ember.eye(*X.shape[-2:], dtype=X.dtype)))
    Q = _np(m.weight)
    assert Q.shape == shape
    G = np.swapaxes(Q, -1, -2) @ Q if shape[-2] >= shape[-1] else Q @ np.swapaxes(Q, -1, -2)
    np.testing.assert_allclose(G, np.broadcast_to(np.eye(G.shape[-1]), G.shape), atol=1e-12)
    (m.weight ** 2 * ember.tensor(rand(*shape, seed=6))).sum().backward()
    assert m.parametrizations.weight.original.grad.shape == m.parametrizations.weight.original.shape


@requires_torch
def test_orthogonal_householder_right_inverse_matches_torch():
    """Without trivialization, householder's right inverse is geqrf's reflectors (diagonal: their signs)."""
    W = rand(5, 3, seed=7)
    em, tm = nn.Module(), torch.nn.Module()
    em.weight = nn.Parameter(ember.tensor(W))
    tm.weight = torch.nn.Parameter(torch.tensor(W))
    P.orthogonal(em, orthogonal_map="householder", use_trivialization=False)
    torch.nn.utils.parametrizations.orthogonal(tm, orthogonal_map="householder", use_trivialization=False)
    Q = _np(tm.weight)
    em.weight, tm.weight = ember.tensor(Q), torch.tensor(Q)
    np.testing.assert_allclose(_np(em.parametrizations.weight.original), _np(tm.parametrizations.weight.original),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(_np(em.weight), _np(tm.weight), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("orthogonal_map", ["matrix_exp", "cayley", "householder"])
def test_orthogonal_gradcheck(orthogonal_map):
    orth = P._Orthogonal(ember.zeros(4, 3, dtype=ember.float64), P._OrthMaps[orthogonal_map],
                         use_trivialization=False)
    check_grad(orth, rand(4, 3, seed=8) * 0.5, gradgrad=False)


def test_orthogonal_errors():
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices. Got a tensor of 1 dimensions."):
        P.orthogonal(nn.Linear(2, 2), "bias")
    with pytest.raises(ValueError, match='orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                                         "Got: qr"):
        P.orthogonal(nn.Linear(2, 2), orthogonal_map="qr")
    m = nn.Linear(3, 3)
    P.orthogonal(m, orthogonal_map="cayley", use_trivialization=False)
    with pytest.raises(NotImplementedError, match="not possible to assign to the matrix exponential or the Cayley"):
        m.weight = ember.eye(3)
    m = nn.Linear(3, 3)
    P.orthogonal(m)
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices of shape"):
        m.weight = ember.eye(4)


# ---------------------------------------------------------------------- the old hook-based forms
@requires_torch
@pytest.mark.parametrize("dim", [0, 1, None])
def test_old_weight_norm_matches_torch(dim):
    em, tm = _linear(ember), _linear(torch)
    with pytest.warns(FutureWarning, match="weight_norm` is deprecated"):
        nn.utils.weight_norm(em, dim=dim)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.nn.utils.weight_norm(tm, dim=dim)
    assert list(em.state_dict()) == list(tm.state_dict()) == ["bias", "weight_g", "weight_v"]
    _same(em, tm, rand(5, 4))
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm hooks on the same parameter weight"), \
            pytest.warns(FutureWarning):
        nn.utils.weight_norm(em, dim=dim)
    nn.utils.remove_weight_norm(em)
    torch.nn.utils.remove_weight_norm(tm)
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_allclose(_np(em.weight), _np(tm.weight), rtol=1e-12)
    with pytest.raises(ValueError, match="weight_norm of 'weight' not found in"):
        nn.utils.remove_weight_norm(em)


@requires_torch
@pytest.mark.parametrize("n_power_iterations", [1, 3])
def test_old_spectral_norm_matches_torch(n_power_iterations):
    em, tm = _linear(ember), _linear(torch)
    nn.utils.spectral_norm(em, n_power_iterations=n_power_iterations)
    torch.nn.utils.spectral_norm(tm, n_power_iterations=n_power_iterations)
    assert list(em.state_dict()) == list(tm.state_dict()) == ["bias", "weight_orig", "weight_u", "weight_v"]
    with ember.no_grad():  # start from PyTorch's random vectors
        em.weight_u.copy_(ember.tensor(_np(tm.weight_u)))
        em.weight_v.copy_(ember.tensor(_np(tm.weight_v)))
    for mode in (True, True, False):
        em.train(mode), tm.train(mode)
        for p in list(em.parameters()) + list(tm.parameters()):
            p.grad = None
        _same(em, tm, rand(2, 4))
    nn.utils.remove_spectral_norm(em)
    torch.nn.utils.remove_spectral_norm(tm)
    assert list(em.state_dict()) == list(tm.state_dict()) == ["bias", "weight"]
    np.testing.assert_allclose(_np(em.weight), _np(tm.weight), rtol=1e-12)
    with pytest.raises(ValueError, match="spectral_norm of 'weight' not found in"):
        nn.utils.remove_spectral_norm(em)
    with pytest.raises(ValueError, match="Expected n_power_iterations to be positive"):
        nn.utils.spectral_norm(em, n_power_iterations=0)


# ---------------------------------------------------------------------- fusion
@requires_torch
@pytest.mark.parametrize("kind", ["conv", "convT", "linear", "linear-nobias"])
def test_fusion_matches_torch(kind):
    make = {"conv": lambda lib: (lib.nn.Conv2d(2, 3, 2), lib.nn.BatchNorm2d(3)),
            "convT": lambda lib: (lib.nn.ConvTranspose2d(2, 3, 2), lib.nn.BatchNorm2d(3)),
            "linear": lambda lib: (lib.nn.Linear(4, 3), lib.nn.BatchNorm1d(3)),
            "linear-nobias": lambda lib: (lib.nn.Linear(4, 3, bias=False), lib.nn.BatchNorm1d(3))}[kind]
    torch.manual_seed(0)
    (tl, tb), (el, eb) = make(torch), make(ember)
    with torch.no_grad():
        tb.running_mean.uniform_(-1, 1), tb.running_var.uniform_(0.5, 2), tb.weight.uniform_(0.5, 2)
        tb.bias.uniform_(-1, 1)
    for t, e in ((tl, el), (tb, eb)):
        t.double().eval(), e.double().eval()
        e.load_state_dict({k: v.numpy() for k, v in t.state_dict().items()})
    if kind.startswith("linear"):
        tf, ef = torch.nn.utils.fuse_linear_bn_eval(tl, tb), nn.utils.fuse_linear_bn_eval(el, eb)
        x = rand(5, 4)
    else:
        transpose = kind == "convT"
        tf = torch.nn.utils.fuse_conv_bn_eval(tl, tb, transpose=transpose)
        ef = nn.utils.fuse_conv_bn_eval(el, eb, transpose=transpose)
        x = rand(2, 2, 4, 4)
    assert ef is not el and isinstance(ef.weight, nn.Parameter) and ef.weight.requires_grad
    for k, v in tf.state_dict().items():
        np.testing.assert_allclose(_np(ef.state_dict()[k]), _np(v), rtol=1e-12, atol=1e-14, err_msg=k)
    np.testing.assert_allclose(_np(ef(ember.tensor(x))), _np(eb(el(ember.tensor(x)))), rtol=1e-10, atol=1e-12)


def test_fusion_errors():
    with pytest.raises(AssertionError, match="Fusion only for eval!"):
        nn.utils.fuse_linear_bn_eval(nn.Linear(2, 3), nn.BatchNorm1d(3))
    with pytest.raises(AssertionError, match="linear.out_features == bn.num_features or bn.num_features == 1"):
        nn.utils.fuse_linear_bn_eval(nn.Linear(2, 3).eval(), nn.BatchNorm1d(4).eval())
    with pytest.raises(AssertionError, match="bn.running_mean and bn.running_var must not be None"):
        nn.utils.fuse_conv_bn_eval(nn.Conv2d(1, 3, 1).eval(), nn.BatchNorm2d(3, track_running_stats=False).eval())


# ---------------------------------------------------------------------- prune
def _tprune():
    import torch.nn.utils.prune as tprune
    return tprune


def _prunable(lib, dtype=np.float64):
    rng = np.random.default_rng(0)
    m = lib.nn.Conv2d(3, 4, 2).to(getattr(lib, np.dtype(dtype).name))
    with lib.no_grad():
        m.weight.copy_(lib.tensor(rng.standard_normal((4, 3, 2, 2)).astype(dtype)))
        m.bias.copy_(lib.tensor(rng.standard_normal(4).astype(dtype)))
    return m


PRUNINGS = [
    [("l1_unstructured", dict(amount=0.3))],
    [("l1_unstructured", dict(amount=5))],
    [("ln_structured", dict(amount=0.5, n=2, dim=0))],
    [("ln_structured", dict(amount=1, n=1, dim=1))],
    [("ln_structured", dict(amount=2, n=float("inf"), dim=-1))],
    [("ln_structured", dict(amount=1, n=-float("inf"), dim=0))],
    [("l1_unstructured", dict(amount=0.0))],
    [("identity", {})],
    [("l1_unstructured", dict(amount=0.25)), ("ln_structured", dict(amount=1, n=2, dim=0)),
     ("l1_unstructured", dict(amount=4))],
    [("ln_structured", dict(amount=1, n=2, dim=1)), ("l1_unstructured", dict(amount=0.5))],
]


@requires_torch
@pytest.mark.parametrize("steps", PRUNINGS, ids=["+".join(s[0] for s in p) + str(i) for i, p in enumerate(PRUNINGS)])
def test_prune_matches_torch(steps):
    em, tm = _prunable(ember), _prunable(torch)
    for name, kw in steps:
        getattr(prune, name)(em, "weight", **kw)
        getattr(_tprune(), name)(tm, "weight", **kw)
    assert list(em.state_dict()) == list(tm.state_dict()) == ["bias", "weight_orig", "weight_mask"]
    np.testing.assert_array_equal(_np(em.weight_mask), _np(tm.weight_mask))
    hook = [h for h in em._forward_pre_hooks.values() if isinstance(h, prune.BasePruningMethod)]
    assert len(hook) == 1 and (len(steps) == 1) != isinstance(hook[0], prune.PruningContainer)
    _same(em, tm, rand(2, 3, 4, 4))
    prune.remove(em, "weight")
    _tprune().remove(tm, "weight")
    assert list(em.state_dict()) == list(tm.state_dict())
    np.testing.assert_array_equal(_np(em.weight), _np(tm.weight))


@requires_torch
def test_prune_importance_scores_and_global_matches_torch():
    em, tm = [_prunable(ember), nn.Linear(4, 3)], [_prunable(torch), torch.nn.Linear(4, 3)]
    em[1].load_state_dict({k: _np(v) for k, v in tm[1].state_dict().items()})
    scores = rand(4, 3, 2, 2, seed=9)
    prune.l1_unstructured(em[0], "bias", amount=1)
    _tprune().l1_unstructured(tm[0], "bias", amount=1)
    prune.global_unstructured([(em[0], "weight"), (em[1], "weight"), (em[0], "bias")], prune.L1Unstructured,
                              importance_scores={(em[0], "weight"): ember.tensor(scores)}, amount=0.4)
    _tprune().global_unstructured([(tm[0], "weight"), (tm[1], "weight"), (tm[0], "bias")],
                                             _tprune().L1Unstructured,
                                             importance_scores={(tm[0], "weight"): torch.tensor(scores)}, amount=0.4)
    for e, t in zip(em, tm):
        for k in t.state_dict():
            if k.endswith("mask"):
                np.testing.assert_array_equal(_np(e.state_dict()[k]), _np(t.state_dict()[k]), err_msg=k)
    e2, t2 = nn.Linear(4, 3), torch.nn.Linear(4, 3)
    e2.load_state_dict({k: _np(v) for k, v in t2.state_dict().items()})
    s2 = rand(3, 4, seed=10)
    prune.ln_structured(e2, "weight", amount=1, n="fro", dim=0, importance_scores=ember.tensor(s2))
    _tprune().ln_structured(t2, "weight", amount=1, n="fro", dim=0, importance_scores=torch.tensor(s2))
    np.testing.assert_array_equal(_np(e2.weight_mask), _np(t2.weight_mask))


def test_prune_mechanics():
    m = _prunable(ember)
    prune.l1_unstructured(m, "weight", amount=0.5)
    assert prune.is_pruned(m) and prune.is_pruned(nn.Sequential(m))
    assert int((_np(m.weight_mask) == 0).sum()) == 24
    orig = m.weight_orig
    opt = ember.optim.SGD(m.parameters(), lr=0.5)
    m(ember.ones(1, 3, 3, 3, dtype=ember.float64)).sum().backward()
    np.testing.assert_array_equal(_np(orig.grad) == 0, _np(m.weight_mask) == 0)  # pruned entries get no gradient
    opt.step()
    m(ember.ones(1, 3, 3, 3, dtype=ember.float64))  # the pre-hook recomputes weight from weight_orig
    np.testing.assert_allclose(_np(m.weight), _np(orig) * _np(m.weight_mask))
    prune.remove(m, "weight")
    assert m.weight is orig and isinstance(m.weight, nn.Parameter) and not prune.is_pruned(m)
    assert int((_np(m.weight) == 0).sum()) == 24
    with pytest.raises(ValueError, match="Parameter 'weight' of module .* has to be pruned before pruning can be "
                                         "removed"):
        prune.remove(m, "weight")


def test_random_and_custom_pruning():
    m = _prunable(ember)
    prune.random_unstructured(m, "weight", amount=0.25)
    assert int((_np(m.weight_mask) == 0).sum()) == 12
    prune.random_structured(m, "weight", amount=2, dim=0)
    mask = _np(m.weight_mask)
    assert int((mask.reshape(4, -1).sum(1) == 0).sum()) >= 2
    mask_b = ember.tensor([1.0, 0.0, 1.0, 0.0], dtype=ember.float64)
    prune.custom_from_mask(m, "bias", mask_b)
    np.testing.assert_array_equal(_np(m.bias), _np(m.bias_orig) * [1, 0, 1, 0])
    t = ember.tensor(rand(2, 3))
    np.testing.assert_array_equal(_np(prune.L1Unstructured(amount=6).prune(t)), 0)
    np.testing.assert_array_equal(_np(prune.Identity().prune(t)), _np(t))


@pytest.mark.parametrize("call,exc,match", [
    (lambda m: prune.l1_unstructured(m, "weight", amount=-1), ValueError,
     r"amount=-1 should either be a float in the range \[0, 1\] or a non-negative integer"),
    (lambda m: prune.l1_unstructured(m, "weight", amount=1.5), ValueError, "amount=1.5 should either be a float"),
    (lambda m: prune.l1_unstructured(m, "weight", amount="a"), TypeError, "Invalid type for amount: a"),
    (lambda m: prune.l1_unstructured(m, "weight", amount=49), ValueError,
     "amount=49 should be smaller than the number of parameters to prune=48"),
    (lambda m: prune.ln_structured(m, "bias", amount=1, n=2, dim=0), ValueError,
     "Structured pruning can only be applied to multidimensional tensors"),
    (lambda m: prune.ln_structured(m, "weight", amount=1, n=2, dim=4), IndexError,
     "Invalid index 4 for tensor of size"),
    (lambda m: prune.l1_unstructured(m, "weight", amount=1, importance_scores=ember.zeros(2)), AssertionError,
     "importance_scores should have the same shape as parameter weight"),
    (lambda m: prune.global_unstructured([(m, "weight")], prune.LnStructured, amount=1, n=2, dim=0), TypeError,
     'Only "unstructured" PRUNING_TYPE supported'),
    (lambda m: prune.global_unstructured([(m, "weight")], prune.L1Unstructured, importance_scores=[1], amount=1),
     TypeError, "importance_scores must be of type dict"),
    (lambda m: prune.ln_structured(m, "weight", amount=1, n="fro", dim=0), RuntimeError,  # as torch.norm
     "matrix_norm"),
])
def test_prune_errors(call, exc, match):
    m = _prunable(ember)
    with pytest.raises(exc, match=match):
        call(m)
    assert "weight" in m._parameters and not prune.is_pruned(m)  # a failed pruning leaves the module as it was
