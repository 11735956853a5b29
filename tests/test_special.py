"""`ember.special` (ember/special.py) and the raw-array special functions (ember/ops/special.py).

The NumPy-only evaluations are held to SciPy's to ~1e-13 (where SciPy is installed), and the whole namespace is
compared with PyTorch: values, dtypes and gradients (random cotangent, float64 and float32), special values,
functions without a gradient (Bessel, Airy, orthogonal polynomials), float16 and integer inputs, and errors;
each also without SciPy (`no_scipy`), where the NumPy-only forms answer or a clear RuntimeError does.
"""
import math

import numpy as np
import pytest
from helpers import DEVICE, check_grad, compare_torch, leaf, rand, raises_like_torch, requires_torch, torch

import ember
import ember.special as sp
from ember.ops import special as S

NAN, INF = math.nan, math.inf


def _needs_scipy(name: str) -> None:
    """Skip unless scipy.special.<name> (cupyx.scipy.special's on CUDA) is there for the test device."""
    try:
        S.special_fn(name, name, leaf(np.ones(1))._data)
    except RuntimeError as e:
        pytest.skip(str(e))


@pytest.fixture
def no_scipy(monkeypatch):
    """SciPy made invisible to ember's special functions (the NumPy-only forms run; SciPy-only ones refuse)."""
    monkeypatch.setattr(S, "scipy_fn", lambda name: None)
    monkeypatch.setattr(S, "_SCIPY_ERF", False)


def test_namespace_matches_pytorch():
    names = {n for n in sp.__all__}
    assert all(callable(getattr(sp, n)) for n in names)
    if torch is not None:
        theirs = {n for n in dir(torch.special) if not n.startswith("_")} - {"Tensor", "torch", "common_args",
                                                                              "multi_dim_common"}
        assert theirs <= names, theirs - names


# ---------------------------------------------------------------------- NumPy-only numerics against SciPy
def _sample(rng, kind):
    if kind == "real":
        return np.concatenate([rng.uniform(-30, 30, 3000), rng.uniform(-3, 3, 3000), 10 ** rng.uniform(-300, 300, 300),
                               -(10 ** rng.uniform(-300, 2, 300)), [0.0, -0.0, -1.0, -2.0, 1.0, 2.0, INF, -INF, NAN]])
    if kind == "unit":  # erfinv's domain, with the ends
        return np.concatenate([rng.uniform(-1, 1, 3000), 1 - 10 ** rng.uniform(-16, 0, 300),
                               -1 + 10 ** rng.uniform(-16, 0, 300), 10 ** rng.uniform(-300, 0, 300),
                               [0.0, -0.0, 1.0, -1.0, 1.5, NAN]])
    return np.concatenate([rng.uniform(0, 1, 3000), 10 ** rng.uniform(-300, 0, 300), 1 - 10 ** rng.uniform(-16, 0, 300),
                           [0.0, 1.0, -0.1, 1.1, NAN, 0.5]])  # probabilities


NUMPY_VS_SCIPY = {  # numpy form, SciPy's name, sample, relative tolerance (atol: 1e-300, and 1e-14 near roots)
    "lgamma": (S._lgamma_numpy, "gammaln", "real", 1e-12),
    "digamma": (S._digamma_numpy, "psi", "real", 1e-11),
    "erfc": (S._erfc_numpy, "erfc", "real", 1e-12),
    "erfcx": (S._erfcx_numpy, "erfcx", "real", 1e-13),
    "erfinv": (S._erfinv_numpy, "erfinv", "unit", 1e-13),
    "ndtr": (S._ndtr_numpy, "ndtr", "real", 1e-12),
    "log_ndtr": (S._log_ndtr_numpy, "log_ndtr", "real", 1e-12),
    "ndtri": (S._ndtri_numpy, "ndtri", "prob", 1e-13),
    "i0": (S._i0_numpy, "i0", "real", 1e-13),
    "i0e": (S._i0e_numpy, "i0e", "real", 1e-13),
    "i1": (S._i1_numpy, "i1", "real", 1e-13),
    "i1e": (S._i1e_numpy, "i1e", "real", 1e-13),
}


@pytest.mark.parametrize("name", sorted(NUMPY_VS_SCIPY))
def test_numpy_forms_match_scipy(name):
    special = pytest.importorskip("scipy.special")
    fn, ref_name, kind, rtol = NUMPY_VS_SCIPY[name]
    x = _sample(np.random.default_rng(0), kind)
    with np.errstate(all="ignore"):
        ref = getattr(special, ref_name)(x)
        got = fn(x)
    if name == "lgamma":
        ref[x == -INF] = INF  # (PyTorch's lgamma(-inf) = inf, SciPy's gammaln -inf)
    # atol: SciPy's erfc flushes results below ~1e-308 to 0; lgamma and digamma lose relative accuracy at their roots
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=1e-14 if name in ("lgamma", "digamma") else 1e-300)


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_polygamma_and_zeta_numpy_forms(n):
    special = pytest.importorskip("scipy.special")
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(-8, 8, 2000), rng.uniform(0, 3, 1000), 10 ** rng.uniform(-5, 8, 200)])
    x = x[np.abs(x - np.round(x)) > 1e-3]  # (off the poles)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(S._polygamma_numpy(n, x), special.polygamma(n, x), rtol=1e-11)
    s, q = rng.uniform(1.01, 20, 2000), rng.uniform(0.01, 40, 2000)
    np.testing.assert_allclose(S._zeta_numpy(s, q), special.zeta(s, q), rtol=1e-12)
    si, qn = np.floor(s) + 1, rng.uniform(-6, 0, 2000)  # negative q: by reflection, for integer s
    qn = qn[np.abs(qn - np.round(qn)) > 1e-3]
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(S._zeta_numpy(si[:qn.size], qn), special.zeta(si[:qn.size], qn), rtol=1e-9)
        special_points = S._zeta_numpy(np.array([1.0, 0.5, 2.5, 2.0, 2.0]), np.array([1.0, 1.0, -0.5, 0.0, -3.0]))
    np.testing.assert_array_equal(special_points, [INF, NAN, NAN, INF, INF])


@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "erfcx", "erfinv", "ndtr", "log_ndtr", "ndtri", "i0", "i0e",
                                  "i1", "i1e"])
def test_array_functions_keep_float32(name, no_scipy):
    x = rand(50, seed=3, low=0.05, high=0.95).astype(np.float32)
    fn = getattr(S, name + "_array")
    r = fn(x)
    assert r.dtype == np.float32
    np.testing.assert_allclose(r, fn(x.astype(np.float64)), rtol=2e-6, atol=1e-6)
    assert fn(np.zeros((0, 3), np.float64)).shape == (0, 3) and fn(np.asarray(0.5)).shape == ()


def test_erf_still_works_without_scipy(no_scipy):
    x = np.linspace(-5, 5, 101)
    assert S.erf_array(x).dtype == np.float64
    np.testing.assert_allclose(ember.erf(ember.tensor(x)).numpy(), [math.erf(v) for v in x], rtol=1e-14, atol=1e-16)


# ---------------------------------------------------------------------- parity with torch.special
# name -> (fn(m, x), input range)
UNARY = {
    "erfcx": (lambda m, x: m.special.erfcx(x), (-3, 10)),
    "ndtr": (lambda m, x: m.special.ndtr(x), (-6, 6)),
    "log_ndtr": (lambda m, x: m.special.log_ndtr(x), (-30, 6)),
    "ndtri": (lambda m, x: m.special.ndtri(x), (0.01, 0.99)),
    "i0e": (lambda m, x: m.special.i0e(x), (-9, 9)),
    "i1": (lambda m, x: m.special.i1(x), (-9, 9)),
    "i1e": (lambda m, x: m.special.i1e(x), (-9, 9)),
    "i0": (lambda m, x: m.special.i0(x), (-9, 9)),
    "entr": (lambda m, x: m.special.entr(x), (0.05, 3)),
    "expit": (lambda m, x: m.special.expit(x), (-4, 4)),
    "exp2": (lambda m, x: m.special.exp2(x), (-3, 3)),
    "expm1": (lambda m, x: m.special.expm1(x), (-3, 3)),
    "log1p": (lambda m, x: m.special.log1p(x), (-0.5, 3)),
    "logit": (lambda m, x: m.special.logit(x, eps=1e-3), (0.01, 0.99)),
    "sinc": (lambda m, x: m.special.sinc(x), (-2, 2)),
    "round": (lambda m, x: m.special.round(x, decimals=1) + x, (-3, 3)),
    "softmax": (lambda m, x: m.special.softmax(x, 1), (-3, 3)),
    "log_softmax": (lambda m, x: m.special.log_softmax(x, 0), (-3, 3)),
    "logsumexp": (lambda m, x: m.special.logsumexp(x, -1, keepdim=True), (-3, 3)),
    "multigammaln": (lambda m, x: m.special.multigammaln(x, 2), (1.2, 5)),
    "psi": (lambda m, x: m.special.psi(x), (0.3, 5)),
    "digamma": (lambda m, x: m.special.digamma(x), (0.3, 5)),
    "polygamma": (lambda m, x: m.special.polygamma(2, x), (0.3, 5)),
    "gammaln": (lambda m, x: m.special.gammaln(x), (0.3, 5)),
    "erf": (lambda m, x: m.special.erf(x), (-3, 3)),
    "erfc": (lambda m, x: m.special.erfc(x), (-3, 6)),
    "erfinv": (lambda m, x: m.special.erfinv(x), (-0.99, 0.99)),
}


def _x(name, shape=(3, 4), dtype=np.float64, seed=0, table=UNARY):
    lo, hi = table[name][1]
    return rand(*shape, seed=seed, low=lo, high=hi, dtype=dtype)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_parity(name, dtype):
    fn = UNARY[name][0]
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), _x(name, dtype=dtype, seed=2))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_gradcheck(name):
    fn = UNARY[name][0]
    check_grad(lambda x: fn(ember, x), _x(name), gradgrad=name != "round")


@requires_torch
@pytest.mark.parametrize("name", ["erfcx", "ndtr", "log_ndtr", "ndtri", "i0e", "i1", "i1e", "i0", "digamma", "gammaln",
                                  "erfinv", "erfc"])
def test_unary_parity_numpy_forms(name, no_scipy):
    """The same parity with SciPy out of the way: the NumPy-only forms answer."""
    fn = UNARY[name][0]
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), _x(name, seed=6))


SPECIAL = np.array([0.0, -0.0, -1.0, 1.0, -2.5, 0.5, 1e-30, 30.0, -30.0, 700.0, INF, -INF, NAN])


@requires_torch
@pytest.mark.parametrize("name", ["erfcx", "ndtr", "log_ndtr", "ndtri", "i0e", "i1", "i1e", "i0", "entr", "exp2",
                                  "sinc", "erfc", "erfinv", "gammaln", "psi"])
@pytest.mark.parametrize("scipy", [True, False], ids=["scipy", "numpy"])
def test_special_values(name, scipy, request):
    if not scipy:
        request.getfixturevalue("no_scipy")
    a = SPECIAL.copy()
    r, ref = getattr(sp, name)(ember.tensor(a)), getattr(torch.special, name)(torch.tensor(a))
    # (atol: PyTorch's ndtr(-30) is 0, the true value 4.9e-198, which ember and SciPy give)
    np.testing.assert_allclose(r.numpy(), ref.numpy(), rtol=1e-12, atol=1e-190 if name == "ndtr" else 1e-300,
                               equal_nan=True)
    r32 = getattr(sp, name)(ember.tensor(a, dtype=ember.float32))
    ref32 = getattr(torch.special, name)(torch.tensor(a, dtype=torch.float32))
    assert r32.dtype == ember.float32
    np.testing.assert_allclose(r32.numpy(), ref32.numpy(), rtol=1e-5, atol=1e-38, equal_nan=True)


BINARY = {  # name -> (fn(m, a, b), range of a, range of b)
    "xlogy": (lambda m, a, b: m.special.xlogy(a, b), (-2, 2), (0.1, 3)),
    "xlog1py": (lambda m, a, b: m.special.xlog1py(a, b), (-2, 2), (-0.5, 3)),
    "xlog1py_scalar": (lambda m, a, b: m.special.xlog1py(3, b) * a, (-2, 2), (-0.5, 3)),
    "zeta_q": (lambda m, a, b: m.special.zeta(a.detach() + 2.5, b), (0, 2), (0.2, 4)),
    "zeta_scalar_x": (lambda m, a, b: m.special.zeta(3.0, b) * a, (0, 2), (0.2, 4)),
    "zeta_scalar_q": (lambda m, a, b: m.special.zeta(a.detach() + 2, 1.5) * b, (0, 2), (0.2, 4)),
    "gammainc_x": (lambda m, a, b: m.special.gammainc(a.detach() + 0.5, b), (0, 3), (0.1, 5)),
    "gammaincc_x": (lambda m, a, b: m.special.gammaincc(a.detach() + 0.5, b), (0, 3), (0.1, 5)),
}


def _ab(name, dtype=np.float64, seed=0):
    _, ra, rb = BINARY[name]
    return (rand(3, 4, seed=seed, low=ra[0], high=ra[1], dtype=dtype),
            rand(3, 4, seed=seed + 1, low=rb[0], high=rb[1], dtype=dtype))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_parity(name, dtype):
    if name.startswith("gamma"):
        _needs_scipy(name[:-2])
    fn = BINARY[name][0]
    compare_torch(lambda a, b: fn(ember, a, b), lambda a, b: fn(torch, a, b), *_ab(name, dtype, seed=4))


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_gradcheck(name):
    if name.startswith("gamma"):
        _needs_scipy(name[:-2])
    a, b = _ab(name)
    fn = BINARY[name][0]
    const = leaf(a, requires_grad=False)  # (the first argument, where it has no derivative, is a constant of the check)
    check_grad(lambda a, b: fn(ember, const if name.endswith(("_q", "_x")) else a, b), a, b)


@requires_torch
def test_zeta_and_polygamma_numpy_forms(no_scipy):
    s, q = np.array([2.0, 3.0, 4.5, 2.0, 3.0, 7.0]), np.array([0.5, 3.0, 10.0, -0.5, -1.5, 1e-3])
    np.testing.assert_allclose(sp.zeta(ember.tensor(s), ember.tensor(q)).numpy(),
                               torch.special.zeta(torch.tensor(s), torch.tensor(q)).numpy(), rtol=1e-12)
    x = np.array([0.3, 2.0, 17.5, -0.5, -2.3])
    for n in (1, 2, 5):
        np.testing.assert_allclose(sp.polygamma(n, ember.tensor(x)).numpy(),
                                   torch.special.polygamma(n, torch.tensor(x)).numpy(), rtol=1e-8)


@requires_torch
@pytest.mark.parametrize("name,match", [("zeta", "derivative for 'zeta'"), ("gammaincc", "derivative for 'igammac: input'")])
def test_no_derivative_in_the_first_argument(name, match):
    if name == "gammaincc":
        _needs_scipy(name)
    for m in (ember, torch):
        a = m.tensor([2.5, 3.0], requires_grad=True)
        with pytest.raises(NotImplementedError, match=match):
            getattr(m.special, name)(a, m.tensor([1.5, 2.0])).sum().backward()


# ---------------------------------------------------------------------- functions without a gradient
NO_GRAD = ["bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "airy_ai", "spherical_bessel_j0"]
SCIPY_NAMES = {"bessel_j0": "j0", "bessel_j1": "j1", "bessel_y0": "y0", "bessel_y1": "y1", "modified_bessel_k0": "k0",
               "modified_bessel_k1": "k1", "scaled_modified_bessel_k0": "k0e", "scaled_modified_bessel_k1": "k1e",
               "airy_ai": "airy"}
NEEDS_SCIPY = set(SCIPY_NAMES)


@requires_torch
@pytest.mark.parametrize("name", NO_GRAD)
def test_no_gradient_functions(name):
    if name in NEEDS_SCIPY:
        _needs_scipy(SCIPY_NAMES[name])
    a = np.concatenate([rand(20, seed=1, low=-10, high=10), [0.0, 1.0, -1.0, 0.5, 30.0, INF, NAN]])
    x = ember.tensor(a, requires_grad=True) * 1  # (a computed input: a pending one in lazy mode)
    r, ref = getattr(sp, name)(x), getattr(torch.special, name)(torch.tensor(a))
    assert not r.requires_grad and r.dtype == ember.float64
    # (PyTorch's Bessel J and Y are accurate to ~4e-7 only: SciPy's, which ember's are, to ~1e-15)
    np.testing.assert_allclose(r.numpy(), ref.numpy(), rtol=1e-9, atol=1e-6 if "bessel_j" in name or "bessel_y" in name
                               else 1e-14, equal_nan=True)
    r32 = getattr(sp, name)(ember.tensor(a[:20], dtype=ember.float32))
    assert r32.dtype == ember.float32
    ri = getattr(sp, name)(ember.tensor([1, 2]))
    assert ri.dtype == ember.float32


@pytest.mark.parametrize("name", sorted(NEEDS_SCIPY))
def test_scipy_only_functions_refuse_without_scipy(name, no_scipy):
    with pytest.raises(RuntimeError, match=rf"ember.special.{name} needs SciPy: pip install 'ember\[fast\]'"):
        getattr(sp, name)(ember.ones(2))


def test_gammainc_refuses_without_scipy(no_scipy):
    with pytest.raises(RuntimeError, match="ember.igammac needs SciPy"):
        sp.gammaincc(ember.ones(2), ember.ones(2))


POLYNOMIALS = ["chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
               "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
               "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he",
               "laguerre_polynomial_l", "legendre_polynomial_p"]


@requires_torch
@pytest.mark.parametrize("name", POLYNOMIALS)
def test_orthogonal_polynomials(name):
    x = np.array([0.3, -0.7, 1.0, -1.0, 2.5, 0.0, 0.95])
    n = np.array([0, 1, 2, 3, 9, 12, -2])
    for args in ((x, 3), (x, 0), (x, -1), (x, 2.5), (x, n), (x[:, None], n[None, :7]), (x.astype(np.float32), 5),
                 (np.array([1, 2]), 2), (2.0, n), (x, np.array([1.5]))):
        e = getattr(sp, name)(*[ember.tensor(a) if isinstance(a, np.ndarray) else a for a in args])
        t = getattr(torch.special, name)(*[torch.tensor(a) if isinstance(a, np.ndarray) else a for a in args])
        assert e.shape == tuple(t.shape) and str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (args, e, t)
        # (float32: PyTorch's recurrence runs in float32, ember's in float64, rounded once)
        np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-10 if e.dtype == ember.float64 else 1e-4, atol=1e-6)
    assert not getattr(sp, name)(ember.tensor(x, requires_grad=True), 3).requires_grad


# ---------------------------------------------------------------------- dtypes and errors
@requires_torch
@pytest.mark.parametrize("name", ["erfcx", "ndtr", "log_ndtr", "ndtri", "i0e", "i1", "i1e", "entr", "expit", "psi",
                                  "gammaln", "sinc"])
def test_integer_bool_float16_inputs(name):
    for a in (np.array([0, 1, 2]), np.array([True, False]), np.array([0.25, 0.5, 1.5], np.float16)):
        r = getattr(sp, name)(ember.tensor(a))
        if a.dtype == np.float16 and name in ("erfcx", "log_ndtr", "ndtri"):  # (PyTorch has no float16 kernel)
            ref = getattr(torch.special, name)(torch.from_numpy(a).float()).half()
        else:
            ref = getattr(torch.special, name)(torch.from_numpy(a))
        assert str(r.dtype).split(".")[-1] == str(ref.dtype).split(".")[-1]
        np.testing.assert_allclose(r.numpy().astype(np.float64), ref.numpy().astype(np.float64), rtol=1e-3, equal_nan=True)


@requires_torch
@pytest.mark.parametrize("case,exc,match", [
    (lambda m: m.special.zeta(2, 3), TypeError, "Tensor"),
    (lambda m: m.special.xlog1py(2, 3), TypeError, "Tensor"),
    (lambda m: m.special.polygamma(-1, m.ones(2)), RuntimeError, "negative n"),
    (lambda m: m.special.multigammaln(m.ones(2), 0), RuntimeError, "p has to be greater"),
    (lambda m: m.special.multigammaln(m.tensor([True]), 1), RuntimeError, "boolean"),
    (lambda m: m.special.softmax(m.tensor([1, 2]), 0), (RuntimeError, NotImplementedError), "softmax"),
    (lambda m: m.special.gammainc(m.tensor([1]), m.tensor([2])), NotImplementedError, "int64"),
    (lambda m: m.special.zeta(m.ones(2), m.ones(3)), RuntimeError, "size"),
], ids=["zeta_numbers", "xlog1py_numbers", "polygamma_n", "multigammaln_p", "multigammaln_bool", "softmax_int", "gammainc_int", "broadcast"])
def test_errors(case, exc, match):
    if match == "int64":
        _needs_scipy("gammainc")
    raises_like_torch(case, ember, exc, match)
    raises_like_torch(case, torch, exc)
