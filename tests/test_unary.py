"""Elementwise unary ops (ember/ops/unary.py) and dtype casts: gradients, PyTorch parity, erf accuracy."""
import math

import numpy as np
import pytest
from helpers import check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember

# name -> (input range, smooth enough for gradgradcheck); the ember op is ember.<name>, PyTorch's torch.<name>
UNARY = {
    "exp": ((-2, 2), True), "log": ((0.5, 2), True), "log1p": ((-0.5, 1), True), "expm1": ((-2, 2), True),
    "log2": ((0.5, 2), True), "log10": ((0.5, 2), True), "sqrt": ((0.5, 2), True), "rsqrt": ((0.5, 2), True),
    "sin": ((-3, 3), True), "cos": ((-3, 3), True), "tan": ((-1.2, 1.2), True), "tanh": ((-2, 2), True),
    "sigmoid": ((-3, 3), True), "relu": ((-1, 1), True), "abs": ((-1, 1), True), "sign": ((-1, 1), True),
    "reciprocal": ((0.5, 2), True), "square": ((-2, 2), True), "erf": ((-2, 2), True), "erfc": ((-2, 2), True),
    "floor": ((-3, 3), True), "ceil": ((-3, 3), True), "round": ((-3, 3), True), "trunc": ((-3, 3), True),
    "neg": ((-1, 1), True),
}
SHAPES = [(3, 4), (5,), (), (2, 1, 3)]


def _x(name, shape, dtype=np.float64, seed=0):
    lo, hi = UNARY[name][0]
    return rand(*shape, seed=seed, low=lo, high=hi, dtype=dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_gradcheck(name, shape):
    check_grad(getattr(ember, name), _x(name, shape), gradgrad=UNARY[name][1])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_gradcheck_noncontiguous_and_method(name):
    x = _x(name, (4, 3))
    check_grad(lambda t: getattr(t, name)(), noncontig(x))
    check_grad(getattr(ember, name), x.T)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_parity(name, shape, dtype):
    compare_torch(getattr(ember, name), getattr(torch, name), _x(name, shape, dtype, seed=5))


@requires_torch
@pytest.mark.parametrize("name", ["floor", "ceil", "round", "trunc", "sign"])
def test_piecewise_constant_have_zero_gradient(name):
    x = ember.tensor([-1.5, -0.2, 0.7, 2.5], requires_grad=True)
    getattr(ember, name)(x).backward(ember.ones(4))
    assert x.grad is not None and x.grad.tolist() == [0.0] * 4


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_round_half_to_even_and_decimals(dtype):
    a = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2345, -7.891], dtype)
    compare_torch(ember.round, torch.round, a)
    compare_torch(lambda t: ember.round(t, decimals=2), lambda t: torch.round(t, decimals=2), a)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_relu_abs_at_zero_as_pytorch(dtype):
    a = np.array([-1.0, 0.0, 2.0], dtype)
    for name in ("relu", "abs", "sign"):
        compare_torch(getattr(ember, name), getattr(torch, name), a)


@requires_torch
def test_special_values_as_pytorch():
    a = np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 1e-30], np.float64)
    for name in ("log", "sqrt", "rsqrt", "reciprocal", "exp", "tanh", "sigmoid", "erf", "log1p", "expm1"):
        r = getattr(ember, name)(ember.tensor(a)).numpy()
        np.testing.assert_allclose(r, getattr(torch, name)(torch.tensor(a)).numpy(), rtol=1e-14, err_msg=name)


def test_sigmoid_never_overflows():
    x = ember.tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0], dtype=ember.float64, requires_grad=True)
    y = ember.sigmoid(x)
    assert np.isfinite(y.detach().numpy()).all()
    y.backward(ember.ones(5, dtype=ember.float64))
    assert np.isfinite(x.grad.numpy()).all() and x.grad.tolist()[2] == 0.25


# ---------------------------------------------------------------------- dtypes of unary results
@requires_torch
@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "erf", "reciprocal", "rsqrt",
                                  "abs", "neg", "sign", "square", "floor", "ceil", "trunc", "round", "relu"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float16", "float64"])
def test_result_dtype_as_pytorch(name, dtype):
    a = np.array([1, 2, 3], dtype=dtype)
    r = getattr(ember, name)(ember.tensor(a))
    ref = getattr(torch, name)(torch.tensor(a))
    assert str(r.dtype) == str(ref.dtype).replace("torch", "ember")
    np.testing.assert_allclose(r.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=2e-3)


def test_neg_of_bool_raises():
    with pytest.raises(RuntimeError, match="neg.*bool"):
        -ember.tensor([True, False])


@pytest.mark.parametrize("name", ["exp", "sin", "abs", "clamp"])
def test_non_tensor_input_raises(name):
    with pytest.raises(TypeError, match=f"{name}.*Tensor"):
        getattr(ember, name)([1.0, 2.0])


# ---------------------------------------------------------------------- erf accuracy
def test_erf_matches_math_erf_float64():
    grid = np.concatenate([np.linspace(-7, 7, 20001), np.geomspace(1e-300, 40, 4001), -np.geomspace(1e-300, 40, 401),
                           [0.0, 0.5, 1.0, 1.0 - 1e-12, 1.0 + 1e-12, 5.9, 26.5, 27.5, 1e300]])
    got = ember.erf(ember.tensor(grid)).numpy()
    ref = np.array([math.erf(v) for v in grid])
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=1e-15, atol=0)


def test_erf_matches_math_erf_float32():
    grid = np.concatenate([np.linspace(-5, 5, 2001), np.geomspace(1e-30, 10, 301)]).astype(np.float32)
    got = ember.erf(ember.tensor(grid)).numpy()
    ref = np.array([math.erf(float(v)) for v in grid]).astype(np.float32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1.2e-7, atol=0)


def test_erf_limits():
    r = ember.erf(ember.tensor([np.inf, -np.inf, np.nan, -0.0], dtype=ember.float64)).numpy()
    assert r[0] == 1.0 and r[1] == -1.0 and np.isnan(r[2]) and r[3] == 0.0 and np.signbit(r[3])


# ---------------------------------------------------------------------- clamp / clip
CLAMPS = {
    "both": dict(min=-0.5, max=0.5), "min_only": dict(min=-0.2), "max_only": dict(max=0.3),
    "inverted": dict(min=0.5, max=-0.5),
}


@pytest.mark.parametrize("fn", ["clamp", "clip"])
@pytest.mark.parametrize("kind", sorted(CLAMPS))
def test_clamp_scalar_bounds(kind, fn):
    x = rand(3, 4, seed=7)
    kw = CLAMPS[kind]
    check_grad(lambda t: getattr(ember, fn)(t, **kw), x)
    if torch is not None:
        for dtype in (np.float64, np.float32):
            compare_torch(lambda t: getattr(t, fn)(**kw), lambda t: getattr(torch, fn)(t, **kw), x.astype(dtype))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_clamp_tensor_bounds(dtype):
    x = rand(3, 4, seed=1, dtype=dtype)
    lo, hi = rand(4, seed=2, low=-1, high=0, dtype=dtype), rand(3, 1, seed=3, low=0, high=1, dtype=dtype)
    compare_torch(lambda a, b, c: ember.clamp(a, b, c), lambda a, b, c: torch.clamp(a, b, c), x, lo, hi)
    compare_torch(lambda a, b: ember.clamp(a, min=b), lambda a, b: torch.clamp(a, min=b), x, lo)
    compare_torch(lambda a, c: ember.clamp(a, max=c), lambda a, c: torch.clamp(a, max=c), x, hi)
    compare_torch(lambda a, c: a.clamp_max(c), lambda a, c: a.clamp_max(c), x, hi)
    if dtype == np.float64:
        check_grad(lambda a, b, c: ember.clamp(a, b, c), x, lo, hi)


@requires_torch
def test_clamp_int_tensor_dtypes():
    a = [1, 5, 9]
    for kw in (dict(min=2, max=6), dict(min=2.5), dict(max=3.5)):
        r, ref = ember.clamp(ember.tensor(a), **kw), torch.clamp(torch.tensor(a), **kw)
        assert r.tolist() == ref.tolist() and str(r.dtype)[6:] == str(ref.dtype)[6:]
    assert ember.clamp_min(ember.tensor(a), 4).tolist() == [4, 5, 9]


def test_clamp_without_bounds_raises():
    with pytest.raises(RuntimeError, match="clamp.*min.*max"):
        ember.clamp(ember.ones(2))


# ---------------------------------------------------------------------- casts
CASTS = ["float64", "float32", "float16"]


@requires_torch
@pytest.mark.parametrize("target", CASTS)
@pytest.mark.parametrize("src", [np.float64, np.float32])
def test_to_dtype_gradient(src, target):
    x = rand(2, 3, dtype=src)
    tol = dict(rtol=2e-3, atol=2e-3) if target == "float16" else {}
    compare_torch(lambda t: t.to(getattr(ember, target)) * 3, lambda t: t.to(getattr(torch, target)) * 3, x, **tol)
    e = ember.tensor(x, requires_grad=True)
    e.to(getattr(ember, target)).backward(ember.ones(2, 3, dtype=getattr(ember, target)))
    assert e.grad.dtype == e.dtype


def test_cast_gradcheck():
    check_grad(lambda t: t.to(ember.float64) * t.double(), rand(3))  # casts to the same dtype are identities


@requires_torch
def test_cast_double_backward_as_pytorch():
    # d/dx and d²/dx² of (float32(x))³ cast back to float64: 3x² and 6x, through Cast nodes
    a = rand(4, low=0.5, high=2)
    res = []
    for lib in (ember, torch):
        x = lib.tensor(a, requires_grad=True)
        y = (x.float() ** 3).double()
        (g,) = lib.autograd.grad(y, x, lib.ones(4, dtype=lib.float64), create_graph=True)
        (g2,) = lib.autograd.grad(g, x, lib.ones(4, dtype=lib.float64))
        assert g.dtype == g2.dtype == lib.float64
        res.append((g.detach().numpy(), g2.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-6)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-6)
    np.testing.assert_allclose(res[0][1], 6 * a, rtol=1e-6)


@pytest.mark.parametrize("method,dtype", [("float", "float32"), ("double", "float64"), ("half", "float16"),
                                          ("long", "int64"), ("int", "int32"), ("bool", "bool"), ("byte", "uint8"),
                                          ("short", "int16"), ("char", "int8")])
def test_cast_methods(method, dtype):
    x = ember.tensor([0.0, 1.5, -2.0])
    r = getattr(x, method)()
    assert r.dtype == getattr(ember, dtype)
    np.testing.assert_array_equal(r.numpy(), np.array([0.0, 1.5, -2.0], np.float32).astype(dtype))


def test_cast_to_int_is_not_differentiable():
    x = ember.tensor([1.5, 2.5], requires_grad=True)
    r = x.long()
    assert r.dtype == ember.int64 and not r.requires_grad and r.grad_fn is None


def test_to_same_dtype_returns_self_and_copy_flag():
    x = ember.tensor([1.0, 2.0])
    assert x.to(ember.float32) is x and x.float() is x
    c = x.to(ember.float32, copy=True)
    assert c is not x and not np.shares_memory(c.numpy(), x.numpy())


@pytest.mark.parametrize("arg", ["float64", "torch.float64", "ember.float64", np.float64, float])
def test_to_accepts_dtype_spellings(arg):
    assert ember.ones(2).to(arg).dtype == ember.float64
    assert ember.ones(2).to(dtype=arg).dtype == ember.float64


def test_to_bad_dtype_raises():
    with pytest.raises(TypeError, match="valid names"):
        ember.ones(2).to(dtype="flaot64")


def test_to_other_tensor_and_type_as():
    x, d = ember.ones(2), ember.zeros(1, dtype=ember.float64)
    assert x.to(d).dtype == ember.float64 and x.type_as(d).dtype == ember.float64
    assert x.type() == "torch.FloatTensor" and x.long().type() == "torch.LongTensor"  # PyTorch's strings, for code comparing them


def test_erf_numpy_fallback_matches_math_erf():
    """erf without SciPy (`_erf_numpy`, the core's NumPy-only path) is float64-accurate, and agrees with
    the path `erf_array` takes where SciPy is installed."""
    import math

    from ember.ops.special import _erf_numpy, erf_array
    x = np.concatenate([np.linspace(-7, 7, 2001), [0.0, -0.0, 1e-300, -1e-8, 0.5, 1.0, 30.0, -np.inf, np.inf]])
    ref = np.array([math.erf(v) for v in x])
    np.testing.assert_allclose(_erf_numpy(x), ref, rtol=1e-15, atol=1e-300)
    np.testing.assert_allclose(erf_array(x), ref, rtol=1e-15, atol=1e-300)
    x32 = x.astype(np.float32)
    assert _erf_numpy(x32).dtype == erf_array(x32).dtype == np.float32
    np.testing.assert_allclose(_erf_numpy(x32), erf_array(x32), rtol=1e-6, atol=1e-7)
    assert np.isnan(_erf_numpy(np.array([np.nan])))[0] and np.isnan(erf_array(np.array([np.nan])))[0]


def test_predicates_of_a_0d_tensor_are_0d_tensors():
    x = ember.tensor(float("nan"))
    assert ember.isnan(x).item() is True and ember.isinf(x).item() is False and ember.isfinite(x).item() is False
    assert ember.logical_not(x).shape == () and ember.bitwise_not(ember.tensor(3)).item() == -4
