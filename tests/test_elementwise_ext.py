"""More elementwise math (ember/ops/elementwise_ext.py), clamp with Tensor bounds and isclose/allclose.

PyTorch parity of values, dtypes and gradients (random cotangent, float64 and float32), finite-difference
checks (with double backward), in-place forms, integer/bool/float16 inputs, special values, reductions
(nansum, nanmean, std_mean, var_mean, quantile, nanquantile), compositions (addcmul, diff, trapezoid) and errors.
Each case is a function of (module, tensors...) so the same code runs on ember and on PyTorch.
"""
import math

import numpy as np
import pytest
from helpers import check_grad, compare_torch, leaf, noncontig, rand, raises_like_torch, requires_torch, torch

import ember

NAN, INF = math.nan, math.inf

# name -> (fn(m, x), input range); every case differentiable on its range
UNARY = {
    "asin": (lambda m, x: m.asin(x), (-0.9, 0.9)),
    "acos": (lambda m, x: m.acos(x), (-0.9, 0.9)),
    "atan": (lambda m, x: m.atan(x), (-3, 3)),
    "arcsin_method": (lambda m, x: x.arcsin(), (-0.9, 0.9)),
    "arctan": (lambda m, x: m.arctan(x), (-3, 3)),
    "asinh": (lambda m, x: m.asinh(x), (-3, 3)),
    "acosh": (lambda m, x: m.acosh(x), (1.2, 4)),
    "atanh": (lambda m, x: m.atanh(x), (-0.9, 0.9)),
    "arccosh_method": (lambda m, x: x.arccosh(), (1.2, 4)),
    "sinh": (lambda m, x: m.sinh(x), (-3, 3)),
    "cosh": (lambda m, x: x.cosh(), (-3, 3)),
    "erfinv": (lambda m, x: m.erfinv(x), (-0.95, 0.95)),
    "lgamma": (lambda m, x: m.lgamma(x), (0.2, 6)),
    "lgamma_negative": (lambda m, x: m.lgamma(x), (-2.9, -2.1)),
    "digamma": (lambda m, x: m.digamma(x), (0.2, 6)),
    "digamma_negative": (lambda m, x: x.digamma(), (-1.9, -1.1)),
    "polygamma1": (lambda m, x: m.polygamma(1, x), (0.3, 5)),
    "polygamma3_method": (lambda m, x: x.polygamma(3), (0.5, 5)),
    "mvlgamma": (lambda m, x: m.mvlgamma(x, 3), (1.2, 5)),
    "i0": (lambda m, x: m.i0(x), (-4, 4)),
    "sinc": (lambda m, x: m.sinc(x), (-2, 2)),
    "logit": (lambda m, x: m.logit(x), (0.05, 0.95)),
    "logit_eps": (lambda m, x: m.logit(x, eps=0.2), (0.05, 0.95)),
    "frac": (lambda m, x: m.frac(x), (-3, 3)),
    "deg2rad": (lambda m, x: m.deg2rad(x), (-200, 200)),
    "rad2deg": (lambda m, x: x.rad2deg(), (-3, 3)),
    "exp2": (lambda m, x: m.exp2(x), (-3, 3)),
    "erfc": (lambda m, x: m.erfc(x), (-3, 5)),
    "sgn": (lambda m, x: m.sgn(x) * x, (-2, 2)),
    "positive": (lambda m, x: m.positive(x) * 2, (-2, 2)),
    "nansum": (lambda m, x: m.nansum(x, 1), (-2, 2)),
    "nanmean_keep": (lambda m, x: x.nanmean(-1, keepdim=True), (-2, 2)),
    "std_mean": (lambda m, x: m.std_mean(x, 0), (-2, 2)),
    "var_mean_corr": (lambda m, x: m.var_mean(x, (0, 1), correction=0, keepdim=True), (-2, 2)),
    "var_mean_unbiased": (lambda m, x: m.var_mean(x, 1, False), (-2, 2)),
    "diff": (lambda m, x: m.diff(x), (-2, 2)),
    "diff_n2_dim0": (lambda m, x: m.diff(x, n=2, dim=0), (-2, 2)),
    "trapezoid": (lambda m, x: m.trapezoid(x), (-2, 2)),
    "trapezoid_dx_dim0": (lambda m, x: m.trapezoid(x, dx=0.5, dim=0), (-2, 2)),
    "trapz_dx": (lambda m, x: m.trapz(x, dx=2.0), (-2, 2)),
    "cumulative_trapezoid": (lambda m, x: m.cumulative_trapezoid(x, dim=0), (-2, 2)),
}
SHAPE = (3, 4)


def _x(name, shape=SHAPE, dtype=np.float64, seed=0, table=UNARY):
    lo, hi = table[name][1]
    return rand(*shape, seed=seed, low=lo, high=hi, dtype=dtype)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_parity(name, dtype):
    fn = UNARY[name][0]
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), _x(name, dtype=dtype, seed=3))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradcheck(name):
    fn = UNARY[name][0]
    check_grad(lambda x: fn(ember, x), _x(name))


@requires_torch
@pytest.mark.parametrize("name", ["asin", "lgamma", "digamma", "i0", "sinc", "erfinv", "nansum", "diff"])
def test_unary_noncontiguous_and_0d(name):
    fn = UNARY[name][0]
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), noncontig(_x(name, seed=4)))
    if name not in ("diff", "nansum"):
        compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), _x(name, shape=(), seed=5))


# name -> (fn(m, a, b), range of a, range of b)
BINARY = {
    "xlogy": (lambda m, a, b: m.xlogy(a, b), (-2, 2), (0.1, 3)),
    "xlogy_scalar_self": (lambda m, a, b: m.xlogy(2.5, b) + a, (-2, 2), (0.1, 3)),
    "xlogy_method_scalar_other": (lambda m, a, b: a.xlogy(1.5) + b, (-2, 2), (0.1, 3)),
    "hypot": (lambda m, a, b: m.hypot(a, b), (-2, 2), (0.5, 3)),
    "logaddexp": (lambda m, a, b: m.logaddexp(a, b), (-3, 3), (-3, 3)),
    "logaddexp2": (lambda m, a, b: a.logaddexp2(b), (-3, 3), (-3, 3)),
    "copysign": (lambda m, a, b: m.copysign(a, b), (0.2, 2), (-1, 1)),
    "copysign_scalar": (lambda m, a, b: m.copysign(a, -1.0) * b, (-2, 2), (-1, 1)),
    "float_power": (lambda m, a, b: m.float_power(a, b), (0.5, 2), (-2, 2)),
    "float_power_scalar_base": (lambda m, a, b: m.float_power(2, b) * a, (0.5, 2), (-2, 2)),
    "fmax": (lambda m, a, b: m.fmax(a, b), (-2, 2), (-2, 2)),
    "fmin": (lambda m, a, b: a.fmin(b), (-2, 2), (-2, 2)),
    "ldexp": (lambda m, a, b: m.ldexp(a, b), (-2, 2), (-2, 2)),
    "nextafter": (lambda m, a, b: m.nextafter(a, b), (-2, 2), (-2, 2)),
    "igamma_x": (lambda m, a, b: m.igamma(a.detach() + 2.5, b), (0.5, 2), (0.1, 4)),
    "igammac_x": (lambda m, a, b: a.detach().igammac(b), (0.5, 2), (0.1, 4)),
    "rsub": (lambda m, a, b: m.rsub(a, b, alpha=2), (-2, 2), (-2, 2)),
    "rsub_scalar": (lambda m, a, b: m.rsub(a, 3.0) * b, (-2, 2), (-2, 2)),
    "addcmul": (lambda m, a, b: m.addcmul(a, a.sin(), b, value=0.5), (-2, 2), (-2, 2)),
    "addcdiv": (lambda m, a, b: a.addcdiv(a.cos(), b, value=-2), (-2, 2), (0.5, 2)),
    "diff_prepend_append": (lambda m, a, b: m.diff(a, dim=1, prepend=b[:, :2], append=b), (-2, 2), (-2, 2)),
    "trapezoid_x": (lambda m, a, b: m.trapezoid(a, b.cumsum(1)), (-2, 2), (0.1, 1)),
    "trapezoid_x1d_dim0": (lambda m, a, b: m.trapezoid(a, b[:, 0].cumsum(0), dim=0), (-2, 2), (0.1, 1)),
    "trapz_x": (lambda m, a, b: m.trapz(a, b.cumsum(1)), (-2, 2), (0.1, 1)),
    "cumulative_trapezoid_x": (lambda m, a, b: m.cumulative_trapezoid(a, b.cumsum(1)), (-2, 2), (0.1, 1)),
    "clamp_both": (lambda m, a, b: m.clamp(a, b - 1, b + 1), (-3, 3), (-1, 1)),
    "clamp_min_bcast": (lambda m, a, b: m.clamp(a, min=b[0]), (-2, 2), (-1, 1)),
    "clamp_max_method": (lambda m, a, b: a.clamp_max(b[:, :1]), (-2, 2), (-1, 1)),
    "clamp_min_fn": (lambda m, a, b: m.clamp_min(a, b), (-2, 2), (-1, 1)),
    "clip_crossed": (lambda m, a, b: m.clip(a, b + 1, b - 1), (-3, 3), (-1, 1)),
}


def _needs_scipy(name: str) -> None:
    """Skip unless SciPy's gammainc/gammaincc (cupyx.scipy's on CUDA) is there for the test device."""
    from ember.ops import special as S
    try:
        S.special_fn(name.replace("igamma", "gammainc"), name, leaf(np.ones(1))._data)
    except RuntimeError as e:
        pytest.skip(str(e))


def _ab(name, dtype=np.float64, seed=0, bshape=SHAPE):
    _, ra, rb = BINARY[name]
    return (rand(*SHAPE, seed=seed, low=ra[0], high=ra[1], dtype=dtype),
            rand(*bshape, seed=seed + 1, low=rb[0], high=rb[1], dtype=dtype))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_parity(name, dtype):
    if name.startswith("igamma"):
        _needs_scipy(name[:-2])
    fn = BINARY[name][0]
    compare_torch(lambda a, b: fn(ember, a, b), lambda a, b: fn(torch, a, b), *_ab(name, dtype, seed=7))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradcheck(name):
    fn = BINARY[name][0]
    if name.startswith("igamma"):  # (a derivative in x only: a is a constant of the check)
        _needs_scipy(name[:-2])
        a = leaf(_ab(name)[0], requires_grad=False)
        fn = (lambda m, _, b: m.igamma(a + 2.5, b)) if name == "igamma_x" else (lambda m, _, b: a.igammac(b))
    smooth = not name.startswith(("nextafter", "fmax", "fmin", "clamp", "clip"))
    check_grad(lambda a, b: fn(ember, a, b), *_ab(name), gradgrad=smooth)


@requires_torch
@pytest.mark.parametrize("name", ["xlogy", "hypot", "logaddexp", "copysign", "fmax", "ldexp", "clamp_both"])
def test_binary_broadcast_noncontiguous(name):
    fn = BINARY[name][0]
    a, b = _ab(name, seed=11, bshape=(4,))
    compare_torch(lambda a, b: fn(ember, a, b), lambda a, b: fn(torch, a, b), noncontig(a), b)


# ---------------------------------------------------------------------- special values, against PyTorch
SPECIAL = np.array([0.0, -0.0, -1.0, -2.5, 1.0, 2.0, 0.5, 1e-30, 200.0, INF, -INF, NAN])


@requires_torch
@pytest.mark.parametrize("name", ["asin", "acos", "atan", "asinh", "acosh", "atanh", "sinh", "cosh", "erfinv", "lgamma",
                                  "digamma", "i0", "sinc", "logit", "frac", "exp2", "erfc", "sgn", "deg2rad", "signbit",
                                  "isneginf", "isposinf", "isreal", "fix"])
def test_special_values(name):
    a = SPECIAL.copy()
    r, ref = getattr(ember, name)(ember.tensor(a)), getattr(torch, name)(torch.tensor(a))
    assert str(r.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(r.numpy(), ref.numpy(), rtol=1e-12, atol=0, equal_nan=True)


@requires_torch
@pytest.mark.parametrize("n", [1, 2, 4])
def test_polygamma_special_values(n):
    a = np.array([0.0, -0.5, -1.5, 1e-3, 1.0, 3.7, 50.0, INF, NAN])
    np.testing.assert_allclose(ember.polygamma(n, ember.tensor(a)).numpy(), torch.polygamma(n, torch.tensor(a)).numpy(),
                               rtol=1e-10 if n > 1 else 1e-8, equal_nan=True)  # (PyTorch's trigamma: ~5e-10)


@requires_torch
@pytest.mark.parametrize("name", ["xlogy", "hypot", "logaddexp", "logaddexp2", "copysign", "fmax", "fmin", "nextafter",
                                  "float_power", "ldexp"])
def test_binary_special_values(name):
    v = np.array([0.0, -0.0, 1.0, -2.0, INF, -INF, NAN])
    a, b = np.repeat(v, v.size), np.tile(v, v.size)
    r, ref = getattr(ember, name)(ember.tensor(a), ember.tensor(b)), getattr(torch, name)(torch.tensor(a), torch.tensor(b))
    assert str(r.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
    np.testing.assert_allclose(r.numpy(), ref.numpy(), rtol=1e-12, equal_nan=True)


@requires_torch
@pytest.mark.parametrize("name", ["xlogy", "copysign", "fmax", "fmin", "logaddexp", "hypot"])
def test_binary_gradient_at_special_points(name):
    """PyTorch's conventions where the formula is singular (xlogy at x = 0, copysign at 0, fmax ties and NaN)."""
    a = np.array([0.0, 0.0, 1.0, 0.0, 2.0, NAN, 1.0, -INF])
    b = np.array([0.0, -1.0, 2.0, NAN, 2.0, 3.0, NAN, -INF])
    grads = []
    for m in (ember, torch):
        x, y = m.tensor(a, requires_grad=True), m.tensor(b, requires_grad=True)
        getattr(m, name)(x, y).sum().backward()
        grads.append([x.grad.numpy(), y.grad.numpy()])
    for e, t in zip(*grads):
        np.testing.assert_allclose(e, t, equal_nan=True)


@requires_torch
def test_gradient_at_zero_conventions():
    """sinc'(0) = 0, logit with eps: 0 outside [eps, 1 - eps], frac: 1."""
    a = np.array([0.0, 0.01, 0.5, 0.99, 1.0])
    for fn in (lambda m, x: m.sinc(x), lambda m, x: m.logit(x, 0.1), lambda m, x: m.frac(x)):
        grads = []
        for m in (ember, torch):
            x = m.tensor(a, requires_grad=True)
            fn(m, x).sum().backward()
            grads.append(x.grad.numpy())
        np.testing.assert_allclose(*grads, rtol=1e-12)


# ---------------------------------------------------------------------- dtypes
@requires_torch
@pytest.mark.parametrize("name", ["asin", "atan", "sinh", "erfinv", "lgamma", "digamma", "i0", "sinc", "logit", "exp2",
                                  "deg2rad", "rad2deg", "sgn", "signbit", "isneginf", "isposinf", "isreal", "fix", "erfc",
                                  "positive", "nansum"])
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool", "uint8"])
def test_integer_and_bool_inputs(name, dtype):
    a = np.array([0, 1, 1, 0]) if dtype == "bool" else np.array([0, 1, 2, 3])
    a = a.astype(dtype)
    try:
        ref = getattr(torch, name)(torch.from_numpy(a))
    except (RuntimeError, NotImplementedError) as e:
        with pytest.raises(type(e)):
            getattr(ember, name)(ember.tensor(a))
        return
    r = getattr(ember, name)(ember.tensor(a))
    assert str(r.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1], (r.dtype, ref.dtype)
    np.testing.assert_allclose(r.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=1e-6)


@requires_torch
@pytest.mark.parametrize("fn", [lambda m, a, b: m.xlogy(a, b), lambda m, a, b: m.copysign(a, b),
                                lambda m, a, b: m.fmax(a, b), lambda m, a, b: m.ldexp(a, b),
                                lambda m, a, b: m.float_power(a, b), lambda m, a, b: m.gcd(a, b),
                                lambda m, a, b: m.lcm(a, b), lambda m, a, b: m.heaviside(a, b)],
                         ids=["xlogy", "copysign", "fmax", "ldexp", "float_power", "gcd", "lcm", "heaviside"])
@pytest.mark.parametrize("dtypes", [("int64", "int64"), ("int32", "int64"), ("float32", "int64"),
                                    ("float64", "float32"), ("float16", "float16")], ids=str)
def test_binary_dtypes(fn, dtypes):
    a = np.array([-4, 0, 3, 6, 2]).astype(dtypes[0])
    b = np.array([6, 0, -5, 4, 3]).astype(dtypes[1])
    try:
        ref = fn(torch, torch.from_numpy(a), torch.from_numpy(b))
    except (RuntimeError, NotImplementedError, TypeError) as e:
        with pytest.raises(type(e)):
            fn(ember, ember.tensor(a), ember.tensor(b))
        return
    r = fn(ember, ember.tensor(a), ember.tensor(b))
    assert str(r.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1], (r.dtype, ref.dtype)
    np.testing.assert_allclose(r.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=2e-3)


@requires_torch
@pytest.mark.parametrize("name", ["asin", "sinh", "lgamma", "digamma", "erfinv", "i0", "sinc", "exp2", "logit", "erfc"])
def test_float16_computed_in_float32(name):
    a = rand(20, seed=2, low=0.1, high=0.9).astype(np.float16)
    r, ref = getattr(ember, name)(ember.tensor(a)), getattr(torch, name)(torch.from_numpy(a))
    assert r.dtype == ember.float16
    np.testing.assert_allclose(r.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------------- non-differentiable results, compared exactly
@requires_torch
def test_exact_results():
    f = np.array([8.0, 0.0, -3.5, -0.0, 1e-310, INF, -INF, NAN, 0.75])
    e, t = ember.frexp(ember.tensor(f)), torch.frexp(torch.tensor(f))
    assert type(e).__name__ == "frexp" and e._fields == ("mantissa", "exponent")
    np.testing.assert_array_equal(e.mantissa.numpy(), t.mantissa.numpy())
    np.testing.assert_array_equal(e.exponent.numpy(), t.exponent.numpy())
    assert e.exponent.dtype == ember.int32
    m, x = ember.tensor(f).frexp()
    assert m.shape == (9,)
    for name in ("signbit", "isneginf", "isposinf", "isreal"):
        np.testing.assert_array_equal(getattr(ember, name)(ember.tensor(f)).numpy(), getattr(torch, name)(torch.tensor(f)).numpy())
    a, b = np.array([-4, 0, 12, 7, -9, 0]), np.array([6, 0, -8, 3, -6, 5])
    for name in ("gcd", "lcm"):
        np.testing.assert_array_equal(getattr(ember, name)(ember.tensor(a), ember.tensor(b)).numpy(),
                                      getattr(torch, name)(torch.tensor(a), torch.tensor(b)).numpy())
    x, v = np.array([-1.5, 0.0, 2.0, NAN]), np.array([0.25])
    np.testing.assert_array_equal(ember.heaviside(ember.tensor(x), ember.tensor(v)).numpy(),
                                  torch.heaviside(torch.tensor(x), torch.tensor(v)).numpy())
    n = np.nextafter(np.float32(1), np.float32(2))
    assert ember.nextafter(ember.tensor([1.0], dtype=ember.float32), ember.tensor([2.0], dtype=ember.float32)).item() == n


def test_named_tuple_pickle_and_out():
    import pickle
    r = ember.frexp(ember.tensor([3.0, -0.5]))
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is type(r) and back.exponent.tolist() == [2, 0]
    assert repr(r).startswith("ember.return_types.frexp(\nmantissa=")
    out = ember.empty(2)
    assert ember.lgamma(ember.tensor([1.0, 3.0]), out=out) is out
    np.testing.assert_allclose(out.numpy(), [0.0, math.log(2)], rtol=1e-7)
    q = ember.empty(3)
    ember.quantile(ember.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), 0.5, dim=1, out=q)
    assert q.tolist() == [1.5, 3.5, 5.5]


def test_no_gradient_results():
    x = ember.tensor([1.0, -2.0], requires_grad=True)
    for r in (ember.signbit(x), ember.isneginf(x), ember.frexp(x).mantissa, ember.frexp(x).exponent):
        assert not r.requires_grad
    y = ember.heaviside(x, ember.tensor([0.5]))
    with pytest.raises(RuntimeError, match="heaviside"):
        y.sum().backward()


# ---------------------------------------------------------------------- in-place forms
INPLACE = {
    "asin_": (lambda x: x.asin_(), (-0.9, 0.9)), "arccos_": (lambda x: x.arccos_(), (-0.9, 0.9)),
    "cosh_": (lambda x: x.cosh_(), (-0.9, 0.9)), "sinh_": (lambda x: x.sinh_(), (-2, 2)),
    "lgamma_": (lambda x: x.lgamma_(), (0.5, 3)), "digamma_": (lambda x: x.digamma_(), (0.5, 3)),
    "polygamma_": (lambda x: x.polygamma_(2), (0.5, 3)), "mvlgamma_": (lambda x: x.mvlgamma_(2), (1, 3)),
    "erfinv_": (lambda x: x.erfinv_(), (-0.9, 0.9)), "i0_": (lambda x: x.i0_(), (-2, 2)),
    "sinc_": (lambda x: x.sinc_(), (-2, 2)), "logit_": (lambda x: x.logit_(0.1), (0.05, 0.95)),
    "frac_": (lambda x: x.frac_(), (-3, 3)), "exp2_": (lambda x: x.exp2_(), (-2, 2)),
    "deg2rad_": (lambda x: x.deg2rad_(), (-2, 2)),
    "xlogy_": (lambda x: x.xlogy_(2.0), (-2, 2)), "hypot_": (lambda x: x.hypot_(x.detach() * 0 + 2), (-2, 2)),
    "copysign_": (lambda x: x.copysign_(-1.0), (-2, 2)), "ldexp_": (lambda x: x.ldexp_(x.detach() * 0 + 3), (-2, 2)),
    "nextafter_": (lambda x: x.nextafter_(x.detach() * 0), (-2, 2)),
    "float_power_": (lambda x: x.float_power_(2), (-2, 2)),
    "addcmul_": (lambda x: x.addcmul_(x.detach(), x.detach().sin(), value=2), (-2, 2)),
    "addcdiv_": (lambda x: x.addcdiv_(x.detach(), x.detach() + 3), (-2, 2)),
    "clamp_tensor_": (lambda x: x.clamp_(x.detach() * 0 - 0.5, x.detach() * 0 + 0.5), (-2, 2)),
    "erfc_": (lambda x: x.erfc_(), (-2, 2)), "expm1_": (lambda x: x.expm1_(), (-2, 2)),
    "log1p_": (lambda x: x.log1p_(), (0, 2)), "log2_": (lambda x: x.log2_(), (0.5, 2)),
    "rsqrt_": (lambda x: x.rsqrt_(), (0.5, 2)), "tan_": (lambda x: x.tan_(), (-1, 1)), "fix_": (lambda x: x.fix_(), (-3, 3)),
    "erf_": (lambda x: x.erf_(), (-2, 2)),
}


@requires_torch
@pytest.mark.parametrize("name", sorted(INPLACE))
def test_in_place(name):
    fn, (lo, hi) = INPLACE[name]
    a = rand(3, 4, seed=1, low=lo, high=hi)

    def run(m, x):
        y = x * 1  # a non-leaf, so the in-place op is recorded
        out = fn(y)
        assert out is y
        return y
    compare_torch(lambda x: run(ember, x), lambda x: run(torch, x), a)


def test_in_place_without_gradient():
    """atanh_ and sgn_ (PyTorch has no gradient through in-place atanh; sgn's is zero) and the integer ops."""
    for name in ("atanh_", "sgn_", "signbit", "isreal"):
        a = rand(5, seed=2, low=-0.9, high=0.9)
        x, r = ember.tensor(a), getattr(ember, name.rstrip("_"))(ember.tensor(a))
        if name.endswith("_"):
            assert getattr(x, name)() is x
            np.testing.assert_array_equal(x.numpy(), r.numpy())
    for name in ("gcd_", "lcm_"):
        x = ember.tensor([4, 6, 0])
        assert getattr(x, name)(ember.tensor([6, 4, 5])) is x
        assert x.tolist() == getattr(ember, name[:-1])(ember.tensor([4, 6, 0]), ember.tensor([6, 4, 5])).tolist()
    x = ember.tensor([-1.0, 0.0, 2.0])
    assert x.heaviside_(ember.tensor([0.5])).tolist() == [0.0, 0.5, 1.0]


def test_in_place_errors():
    with pytest.raises(RuntimeError, match="float_power_.*float64"):
        ember.ones(2).float_power_(2)
    with pytest.raises(RuntimeError, match="Float|float32"):
        ember.tensor([1, 2]).xlogy_(2.0)
    with pytest.raises(RuntimeError, match="shape"):
        ember.ones(2).clamp_(ember.zeros(3, 2))


# ---------------------------------------------------------------------- NaN-ignoring reductions
@requires_torch
@pytest.mark.parametrize("case", [
    lambda m, x: m.nansum(x), lambda m, x: m.nansum(x, 0), lambda m, x: x.nansum((0, 1), keepdim=True),
    lambda m, x: m.nansum(x, -1, dtype=m.float64), lambda m, x: m.nanmean(x), lambda m, x: x.nanmean(0),
    lambda m, x: m.nanmean(x, (-1,), keepdim=True)], ids=["all", "dim0", "dims_keep", "dtype", "mean_all", "mean_dim0",
                                                         "mean_keep"])
def test_nan_reductions(case):
    a = rand(4, 3, seed=6)
    a[0, 1] = a[2, 0] = a[2, 2] = NAN
    a[3, :] = NAN  # an all-NaN row: nanmean gives NaN, nansum 0
    compare_torch(lambda x: case(ember, x), lambda x: case(torch, x), a)
    compare_torch(lambda x: case(ember, x), lambda x: case(torch, x), a.astype(np.float32))


@requires_torch
def test_nansum_integers_and_errors():
    for a in (np.array([[1, 2], [3, 4]]), np.array([True, False, True])):
        r, ref = ember.nansum(ember.tensor(a)), torch.nansum(torch.tensor(a))
        assert r.item() == ref.item() and r.dtype == ember.int64
    raises_like_torch(lambda m: m.nanmean(m.tensor([1, 2])), ember, RuntimeError, "nanmean.*floating")
    raises_like_torch(lambda m: m.nanmean(m.tensor([1, 2])), torch, RuntimeError)
    raises_like_torch(lambda m: m.nansum(m.ones(2, 3), 2), ember, IndexError, "range")
    assert ember.nansum(ember.ones(0)).item() == 0


@requires_torch
def test_std_mean_var_mean_forms():
    a = rand(3, 4, seed=8)
    for case in (lambda m, x: m.std_mean(x), lambda m, x: m.std_mean(x, unbiased=False),
                 lambda m, x: m.std_mean(x, True), lambda m, x: m.var_mean(x, dim=[0, 1], keepdim=True),
                 lambda m, x: m.var_mean(x, -1, correction=2)):
        e, t = case(ember, ember.tensor(a)), case(torch, torch.tensor(a))
        assert type(e) is tuple and len(e) == 2
        for ei, ti in zip(e, t):
            assert ei.shape == tuple(ti.shape)
            np.testing.assert_allclose(ei.numpy(), ti.numpy(), rtol=1e-12)
    raises_like_torch(lambda m: m.var_mean(m.tensor([1, 2])), ember, RuntimeError, "floating")


# ---------------------------------------------------------------------- quantile
def _distinct(shape, seed=0, dtype=np.float64):
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.37 - n * 0.15).reshape(shape).astype(dtype)


QUANTILE = {
    "scalar_all": lambda m, x, q: m.quantile(x, 0.3),
    "scalar_dim": lambda m, x, q: m.quantile(x, 0.75, dim=1),
    "scalar_dim_keep": lambda m, x, q: x.quantile(0.5, -1, True),
    "tensor_q_dim0": lambda m, x, q: m.quantile(x, q, dim=0),
    "tensor_q_all_keep": lambda m, x, q: m.quantile(x, q, keepdim=True),
    "q0d": lambda m, x, q: m.quantile(x, q[1], dim=1),
    "lower": lambda m, x, q: m.quantile(x, q, 1, interpolation="lower"),
    "higher": lambda m, x, q: m.quantile(x, q, 1, interpolation="higher"),
    "midpoint": lambda m, x, q: m.quantile(x, q, 0, interpolation="midpoint"),
    "nearest": lambda m, x, q: m.quantile(x, q, 1, interpolation="nearest"),
    "nanquantile": lambda m, x, q: m.nanquantile(x, q, dim=1),
    "nanquantile_all": lambda m, x, q: x.nanquantile(0.4),
}


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(QUANTILE))
def test_quantile_parity(name, dtype):
    fn = QUANTILE[name]
    q = np.array([0.0, 0.1, 0.5, 0.75, 1.0], dtype)
    compare_torch(lambda x, q: fn(ember, x, q), lambda x, q: fn(torch, x, q), _distinct((4, 6), 2, dtype), q)


@requires_torch
@pytest.mark.parametrize("name", ["scalar_dim", "tensor_q_dim0", "nanquantile"])
def test_quantile_3d_noncontiguous(name):
    fn = QUANTILE[name]
    x = noncontig(_distinct((3, 5, 4), 4))
    compare_torch(lambda x, q: fn(ember, x, q), lambda x, q: fn(torch, x, q), x, np.array([0.2, 0.9]))


def test_quantile_gradcheck():
    x, q = _distinct((4, 5), 1), np.array([0.15, 0.45, 0.9])  # (ranks off the integers, where q's slope jumps)
    check_grad(lambda x, q: ember.quantile(x, q, dim=1), x, q)
    check_grad(lambda x: ember.nanquantile(x, 0.3, dim=0, interpolation="midpoint"), x)


@requires_torch
@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_nan_rows_and_interpolation_ties(interpolation):
    a = _distinct((4, 5), 3)
    a[1, 2] = NAN
    a[3, :] = NAN
    q = np.array([0.1, 0.5, 0.6, 0.833, 1 / 6, 1.0])
    for fn in (lambda m, x, q: m.quantile(x, q, 1, interpolation=interpolation),
               lambda m, x, q: m.nanquantile(x, q, 1, interpolation=interpolation)):
        compare_torch(lambda x, q: fn(ember, x, q), lambda x, q: fn(torch, x, q), a, q)


@requires_torch
def test_quantile_many_order_statistics_and_0d():
    """More quantiles than the partition path takes (a full sort then), and a 0-d input."""
    x, q = _distinct((3, 40), 5), np.linspace(0, 1, 23)
    compare_torch(lambda x, q: ember.quantile(x, q, 1), lambda x, q: torch.quantile(x, q, 1), x, q)
    compare_torch(lambda x: ember.quantile(x, 0.5), lambda x: torch.quantile(x, 0.5), np.array(3.0))
    compare_torch(lambda x: ember.quantile(x, 0.5, dim=0), lambda x: torch.quantile(x, 0.5, dim=0), np.array(3.0))


@requires_torch
@pytest.mark.parametrize("case,exc,match", [
    (lambda m: m.quantile(m.ones(3), 1.5), RuntimeError, r"q must be in the range \[0, 1\] but got 1.5"),
    (lambda m: m.quantile(m.ones(3), m.tensor([[0.5]])), RuntimeError, "scalar or 1D"),
    (lambda m: m.quantile(m.ones(3, dtype=m.int64), 0.5), RuntimeError, "float or double"),
    (lambda m: m.quantile(m.ones(3), 0.5, interpolation="foo"), RuntimeError, "interpolation.*foo"),
    (lambda m: m.quantile(m.ones(3), m.tensor([0.5], dtype=m.float64)), RuntimeError, "same dtype"),
    (lambda m: m.quantile(m.ones(3), m.tensor([0.5, -1.0])), RuntimeError, r"q values must be in the range"),
    (lambda m: m.nanquantile(m.ones(0), 0.5), RuntimeError, "non-empty"),
    (lambda m: m.quantile(m.ones(2, 3), 0.5, dim=3), IndexError, "range"),
], ids=["q_range", "q_2d", "int_input", "interpolation", "q_dtype", "q_values", "empty", "dim"])
def test_quantile_errors(case, exc, match):
    raises_like_torch(case, ember, exc, match)
    raises_like_torch(case, torch, exc)


# ---------------------------------------------------------------------- compositions
@requires_torch
def test_diff_trapezoid_forms():
    cases = [lambda m: m.diff(m.tensor([1, 3, 6, 10]), n=2), lambda m: m.diff(m.tensor([True, False, False, True])),
             lambda m: m.diff(m.tensor([1.0, 3.0]), n=3), lambda m: m.diff(m.tensor([1.0, 3.0]), n=0),
             lambda m: m.diff(m.ones(2, 3), dim=0, prepend=m.zeros(1, 3, dtype=m.int64)),
             lambda m: m.trapezoid(m.tensor([1, 2, 4])), lambda m: m.trapz(m.tensor([1, 2, 4]), m.tensor([1, 2, 4])),
             lambda m: m.trapezoid(m.ones(0)), lambda m: m.trapezoid(m.ones(1)), lambda m: m.trapezoid(m.ones(2, 0), dim=0),
             lambda m: m.cumulative_trapezoid(m.tensor([1, 2, 4]), dx=2), lambda m: m.cumulative_trapezoid(m.ones(1)),
             lambda m: m.trapezoid(m.ones(2, 3), m.ones(2, 3), dim=0)]
    for case in cases:
        e, t = case(ember), case(torch)
        assert e.shape == tuple(t.shape) and str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e, t)
        np.testing.assert_allclose(e.numpy().astype(np.float64), t.numpy().astype(np.float64), rtol=1e-6)


@requires_torch
@pytest.mark.parametrize("case,exc,match", [
    (lambda m: m.diff(m.tensor(3.0)), RuntimeError, "one-dimensional"),
    (lambda m: m.diff(m.ones(3), n=-1), RuntimeError, "non-negative.*-1"),
    (lambda m: m.diff(m.ones(2, 3), prepend=m.ones(3)), RuntimeError, "same dimension"),
    (lambda m: m.diff(m.ones(2), prepend=2.0), TypeError, "prepend.*Tensor"),
    (lambda m: m.trapezoid(m.ones(3), m.ones(2)), RuntimeError, "one `x` value for each sample"),
    (lambda m: m.trapezoid(m.ones(2, 3), m.ones(3, 2), dim=0), RuntimeError, "one `x` value"),
    (lambda m: m.trapezoid(m.ones(3), x=m.ones(3), dx=1.0), TypeError, "x.*dx"),
    (lambda m: m.addcdiv(m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64), m.ones(2, dtype=m.int64)), RuntimeError,
     "[Ii]nteger division"),
    (lambda m: m.addcmul(m.ones(2), m.ones(3), m.ones(2)), RuntimeError, "size"),
], ids=["0d", "neg_n", "prepend_dims", "prepend_number", "x_len", "x_nd", "x_and_dx", "addcdiv_int", "addcmul_shape"])
def test_composition_errors(case, exc, match):
    raises_like_torch(case, ember, exc, match)
    raises_like_torch(case, torch, exc)


def test_addcmul_integer_value_truncates_as_pytorch():
    one = ember.ones(2, dtype=ember.int64)
    assert ember.addcmul(one, one, one, value=0.5).tolist() == [1, 1]
    assert ember.addcmul(one, ember.ones(2), one).dtype == ember.float32


# ---------------------------------------------------------------------- clamp with Tensor bounds
@requires_torch
def test_clamp_tensor_dtypes_shapes():
    cases = [lambda m: m.clamp(m.tensor([1, 5]), m.tensor([2.5])), lambda m: m.clamp(m.tensor([1, 5]), m.tensor([2], dtype=m.int32)),
             lambda m: m.clamp(m.tensor([1.0, 5.0]), m.tensor([2.0], dtype=m.float64)),
             lambda m: m.clamp(m.tensor([1.0]), m.ones(2, 3)), lambda m: m.clamp(m.tensor([True, False]), m.tensor(True)),
             lambda m: m.clamp(m.tensor([NAN, 1.0, 3.0]), m.tensor([0.0]), m.tensor([0.5, NAN, 2.0])),
             lambda m: m.clamp(m.tensor([1.0, 2.0]), max=m.tensor([0.0]), min=m.tensor(3.0)),
             lambda m: m.clamp(m.ones(2, 3), min=2, max=m.tensor(4.0))]
    for case in cases:
        e, t = case(ember), case(torch)
        assert e.shape == tuple(t.shape) and str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e, t)
        np.testing.assert_array_equal(e.numpy(), t.numpy())


@requires_torch
def test_clamp_tensor_gradient_rules():
    t, lo, hi = [1.0, 5.0, 2.0, 3.0, NAN], [2.0, 2.0, 2.0, 3.0, 0.0], [4.0, 4.0, 1.0, 3.0, 1.0]
    grads = []
    for m in (ember, torch):
        a, b, c = (m.tensor(v, requires_grad=True) for v in (t, lo, hi))
        m.clamp(a, b, c).sum().backward()
        grads.append([a.grad.numpy(), b.grad.numpy(), c.grad.numpy()])
    for e, r in zip(*grads):
        np.testing.assert_array_equal(e, r)


def test_clamp_tensor_errors():
    with pytest.raises(RuntimeError, match="broadcast"):
        ember.clamp(ember.ones(3), ember.ones(2))
    with pytest.raises(RuntimeError, match="min.*max"):
        ember.clamp(ember.ones(3), None, None)
    with pytest.raises(TypeError, match="min and max"):
        ember.clamp(ember.ones(3), ember.ones(3), "1")


# ---------------------------------------------------------------------- isclose / allclose
@requires_torch
@pytest.mark.parametrize("case", [
    lambda m: m.isclose(m.tensor([INF, -INF, INF, NAN, 1.0]), m.tensor([INF, INF, 1e308, NAN, 1.0 + 1e-9])),
    lambda m: m.isclose(m.tensor([NAN, 1.0]), m.tensor([NAN, NAN]), equal_nan=True),
    lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1, 3])),
    lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1, 3]), atol=1),
    lambda m: m.isclose(m.tensor([True, False]), m.tensor([True, True])),
    lambda m: m.isclose(m.tensor([True, False]), m.tensor([True, True]), atol=1),
    lambda m: m.isclose(m.tensor([10, 10], dtype=m.uint8), m.tensor([12, 0], dtype=m.uint8), atol=2),
    lambda m: m.isclose(m.tensor([100], dtype=m.int8), m.tensor([-100], dtype=m.int8), atol=250),
    lambda m: m.isclose(m.tensor([5]), m.tensor([6]), rtol=0.1, atol=0.5),
    lambda m: m.isclose(m.tensor([1.0, 2.0]), m.tensor([INF, 3.0]), atol=INF),
    lambda m: m.isclose(m.tensor([1.0]), m.tensor([2.0]), rtol=INF),
    lambda m: m.isclose(m.tensor([1.0]), m.tensor([1.0 + 1e-7]), rtol=0, atol=0),
    lambda m: m.isclose(m.ones(2, 1), m.ones(3)),
    lambda m: m.isclose(m.tensor([1.0], dtype=m.float16), m.tensor([1.001], dtype=m.float16), rtol=1e-3),
    lambda m: m.tensor([1.0, NAN]).isclose(m.tensor([1.0, NAN]), equal_nan=True),
    lambda m: m.allclose(m.ones(3), m.ones(1)),
    lambda m: m.allclose(m.tensor([1.0, NAN]), m.tensor([1.0, NAN]), equal_nan=True),
    lambda m: m.tensor([1.0, 2.0]).allclose(m.tensor([1.0, 2.1])),
])
def test_isclose_allclose(case):
    e, t = case(ember), case(torch)
    if isinstance(t, bool):
        assert e is t
    else:
        assert e.dtype == ember.bool and e.shape == tuple(t.shape)
        assert e.tolist() == t.tolist()


@requires_torch
@pytest.mark.parametrize("case,exc,match", [
    (lambda m: m.isclose(m.tensor([1, 2]), m.tensor([1.0, 2.0])), RuntimeError, "same dtype|did not match"),
    (lambda m: m.allclose(m.tensor([1.0]), m.tensor([1.0], dtype=m.float64)), RuntimeError, "did not match"),
    (lambda m: m.isclose(m.tensor([1.0]), m.tensor([1.0]), rtol=-1), RuntimeError, "rtol must be greater than or equal"),
    (lambda m: m.allclose(m.tensor([1.0]), m.tensor([1.0]), atol=-1), RuntimeError, "atol must be greater than or equal"),
    (lambda m: m.isclose(m.tensor([1.0]), 1.0), TypeError, "other.*Tensor"),
    (lambda m: m.allclose(m.ones(3), m.ones(2)), RuntimeError, "size"),
    (lambda m: m.isclose(m.ones(1), m.ones(1), equal_nan=1), TypeError, "equal_nan.*bool"),
], ids=["dtype", "allclose_dtype", "rtol", "atol", "number", "shape", "equal_nan"])
def test_isclose_errors(case, exc, match):
    raises_like_torch(case, ember, exc, match)
    raises_like_torch(case, torch, exc)


# ---------------------------------------------------------------------- errors
@requires_torch
@pytest.mark.parametrize("case,exc,match", [
    (lambda m: m.polygamma(-1, m.ones(2)), RuntimeError, "negative n"),
    (lambda m: m.polygamma(1.5, m.ones(2)), TypeError, "'n'.*int"),
    (lambda m: m.mvlgamma(m.ones(2), 0), RuntimeError, "p has to be greater than or equal to 1"),
    (lambda m: m.mvlgamma(m.ones(2), 2.5), TypeError, "'p'.*int"),
    (lambda m: m.frac(m.tensor([1, 2])), NotImplementedError, "frac.*int64"),
    (lambda m: m.hypot(m.tensor([3]), m.tensor([4])), NotImplementedError, "hypot.*int64"),
    (lambda m: m.hypot(m.tensor([3.0]), 4.0), TypeError, "other.*Tensor.*float"),
    (lambda m: m.logaddexp(m.tensor([3.0]), 4.0), TypeError, "other.*Tensor"),
    (lambda m: m.fmax(m.tensor([3.0]), 4.0), TypeError, "other.*Tensor"),
    (lambda m: m.ldexp(m.tensor([1.0]), 3), TypeError, "other.*Tensor"),
    (lambda m: m.nextafter(m.tensor([1]), m.tensor([2])), NotImplementedError, "nextafter.*int64"),
    (lambda m: m.gcd(m.tensor([4.0]), m.tensor([6.0])), NotImplementedError, "gcd.*float32"),
    (lambda m: m.gcd(m.tensor([True]), m.tensor([True])), NotImplementedError, "gcd.*bool"),
    (lambda m: m.heaviside(m.tensor([1.0]), m.tensor([1])), RuntimeError, "same dtype|different dtypes"),
    (lambda m: m.frexp(m.tensor([1])), RuntimeError, "floating-point"),
    (lambda m: m.xlogy(2, 3), TypeError, "Tensor"),
    (lambda m: m.positive(m.tensor([True])), RuntimeError, "bool"),
    (lambda m: m.rsub(m.tensor([True]), m.tensor([True])), RuntimeError, "bool"),
    (lambda m: m.xlogy(m.ones(2), m.ones(3)), RuntimeError, "size"),
    (lambda m: m.asin([0.5]), TypeError, "Tensor"),
], ids=["polygamma_n", "polygamma_float_n", "mvlgamma_p", "mvlgamma_float_p", "frac_int",
        "hypot_int", "hypot_number", "logaddexp_number", "fmax_number", "ldexp_number", "nextafter_int", "gcd_float",
        "gcd_bool", "heaviside_dtypes", "frexp_int", "xlogy_numbers", "positive_bool", "rsub_bool", "broadcast",
        "not_tensor"])
def test_errors(case, exc, match):
    raises_like_torch(case, ember, exc, match)
    raises_like_torch(case, torch, exc)


@requires_torch
def test_igamma_has_no_derivative_in_a():
    _needs_scipy("igamma")
    for m in (ember, torch):
        a = m.tensor([1.5, 2.0], requires_grad=True)
        with pytest.raises(NotImplementedError, match="igamma"):
            m.igamma(a, m.tensor([0.5, 1.0])).sum().backward()


def test_igamma_without_scipy(monkeypatch):
    from ember.ops import special as S
    monkeypatch.setitem(S._SCIPY_FNS, "gammainc", None)
    with pytest.raises(RuntimeError, match=r"ember.igamma needs SciPy: pip install 'ember\[fast\]'"):
        ember.igamma(ember.ones(2), ember.ones(2))
