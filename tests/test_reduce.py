"""Reductions (ember/ops/reduce.py): gradients, PyTorch parity, dtypes, edge cases, errors.

Each case is a function of (module, tensor) so the same code runs on ember and on PyTorch.
"""
import math
import pickle
import warnings

import numpy as np
import pytest
from helpers import check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember

INF = math.inf

# name -> (fn(m, x), input range); every case is differentiable in x
CASES = {
    "sum_all": (lambda m, x: m.sum(x), (-1, 1)),
    "sum_dim0": (lambda m, x: m.sum(x, 0), (-1, 1)),
    "sum_dim-1_keep": (lambda m, x: x.sum(-1, keepdim=True), (-1, 1)),
    "sum_tuple": (lambda m, x: x.sum((0, 2)), (-1, 1)),
    "sum_tuple_neg_keep": (lambda m, x: m.sum(x, dim=(-1, -3), keepdim=True), (-1, 1)),
    "sum_list": (lambda m, x: m.sum(x, [1]), (-1, 1)),
    "sum_empty_tuple": (lambda m, x: x.sum(()), (-1, 1)),
    "sum_dtype": (lambda m, x: x.sum(1, dtype=m.float64), (-1, 1)),
    "mean_all": (lambda m, x: x.mean(), (-1, 1)),
    "mean_dim1": (lambda m, x: m.mean(x, 1), (-1, 1)),
    "mean_tuple_keep": (lambda m, x: x.mean((0, -1), keepdim=True), (-1, 1)),
    "prod_all": (lambda m, x: x.prod(), (0.5, 1.5)),
    "prod_dim1": (lambda m, x: m.prod(x, 1), (-1.5, 1.5)),
    "prod_dim-1_keep": (lambda m, x: x.prod(-1, keepdim=True), (-1.5, 1.5)),
    "var_all": (lambda m, x: x.var(), (-1, 1)),
    "var_dim1": (lambda m, x: m.var(x, 1), (-1, 1)),
    "var_tuple_keep_c0": (lambda m, x: x.var((0, 2), keepdim=True, correction=0), (-1, 1)),
    "var_unbiased_false": (lambda m, x: m.var(x, -1, False), (-1, 1)),
    "var_old_overload": (lambda m, x: m.var(x, False), (-1, 1)),
    "var_correction2": (lambda m, x: x.var(dim=2, correction=2), (-1, 1)),
    "std_all": (lambda m, x: x.std(), (-1, 1)),
    "std_dim0_keep": (lambda m, x: m.std(x, 0, keepdim=True), (-1, 1)),
    "std_tuple_unbiased_false": (lambda m, x: x.std((1, 2), unbiased=False), (-1, 1)),
    "max_all": (lambda m, x: x.max(), (-1, 1)),
    "max_dim1": (lambda m, x: m.max(x, 1), (-1, 1)),
    "max_dim-1_keep": (lambda m, x: x.max(dim=-1, keepdim=True), (-1, 1)),
    "min_all": (lambda m, x: m.min(x), (-1, 1)),
    "min_dim0": (lambda m, x: x.min(0), (-1, 1)),
    "max_values": (lambda m, x: x.max(2).values * 2, (-1, 1)),
    "amax_all": (lambda m, x: x.amax(), (-1, 1)),
    "amax_tuple": (lambda m, x: m.amax(x, (0, 2)), (-1, 1)),
    "amin_dim-2_keep": (lambda m, x: x.amin(-2, keepdim=True), (-1, 1)),
    "logsumexp_dim1": (lambda m, x: m.logsumexp(x, 1), (-3, 3)),
    "logsumexp_tuple_keep": (lambda m, x: x.logsumexp((0, 2), keepdim=True), (-3, 3)),
    "logsumexp_dim-1": (lambda m, x: x.logsumexp(-1), (-3, 3)),
    "norm_default": (lambda m, x: x.norm(), (-1, 1)),
    "norm_2_dim1": (lambda m, x: m.norm(x, 2, 1), (-1, 1)),
    "norm_fro_tuple": (lambda m, x: m.norm(x, "fro", (0, 1), keepdim=True), (-1, 1)),
    "norm_1": (lambda m, x: x.norm(1), (-1, 1)),
    "norm_3_dim-1": (lambda m, x: x.norm(3, -1), (-1, 1)),
    "norm_1.5_dim0": (lambda m, x: x.norm(p=1.5, dim=0), (-1, 1)),
    "norm_0.5": (lambda m, x: x.norm(0.5, dim=2, keepdim=True), (-1, 1)),
    "norm_-1": (lambda m, x: x.norm(-1, dim=1), (-1, 1)),
    "norm_inf": (lambda m, x: x.norm(INF, dim=1), (-1, 1)),
    "norm_-inf": (lambda m, x: x.norm(-INF), (-1, 1)),
    "cumsum_dim0": (lambda m, x: m.cumsum(x, 0), (-1, 1)),
    "cumsum_dim-1": (lambda m, x: x.cumsum(dim=-1), (-1, 1)),
    "cumprod_dim1": (lambda m, x: m.cumprod(x, 1), (-1.5, 1.5)),
    "cumprod_dim-1": (lambda m, x: x.cumprod(-1), (-1.5, 1.5)),
}


def _case(name, shape=(2, 3, 4), dtype=np.float64, seed=0):
    fn, (lo, hi) = CASES[name]
    return fn, rand(*shape, seed=seed, low=lo, high=hi, dtype=dtype)


def _differentiable(fn):
    """fn on ember with max(dim)/min(dim) reduced to their values: gradgradcheck wants float outputs only."""
    def f(x):
        r = fn(ember, x)
        return r.values if isinstance(r, tuple) else r
    return f


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    fn, a = _case(name)
    check_grad(_differentiable(fn), a)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck_noncontiguous(name):
    fn, a = _case(name, shape=(2, 3, 4), seed=5)
    check_grad(_differentiable(fn), noncontig(a), gradgrad=False)
    t = np.ascontiguousarray(a.transpose(2, 1, 0)).transpose(2, 1, 0)  # same values, Fortran-ordered strides
    check_grad(_differentiable(fn), t, gradgrad=False)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_parity(name, dtype):
    fn, a = _case(name, dtype=dtype, seed=3)
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), a)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", sorted(CASES))
def test_parity_noncontiguous(name, dtype):
    fn, a = _case(name, shape=(4, 3, 2), dtype=dtype, seed=4)
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), noncontig(a).transpose(2, 1, 0))


# cases meaningful on a 0-d tensor (PyTorch accepts dim 0 and -1 there)
SCALAR_CASES = {
    "sum": lambda m, x: x.sum(),
    "sum_dim0": lambda m, x: x.sum(0),
    "mean_dim-1_keep": lambda m, x: x.mean(-1, keepdim=True),
    "prod_dim0": lambda m, x: x.prod(0),
    "var_c0": lambda m, x: x.var(correction=0),
    "max": lambda m, x: x.max(),
    "max_dim0": lambda m, x: x.max(0),
    "amin_dim0": lambda m, x: x.amin(0),
    "logsumexp": lambda m, x: x.logsumexp(0),
    "norm": lambda m, x: x.norm(),
    "norm_3": lambda m, x: x.norm(3, 0),
    "cumsum": lambda m, x: x.cumsum(0),
    "cumprod": lambda m, x: x.cumprod(-1),
    "argmax": lambda m, x: x.argmax(0),
    "count_nonzero": lambda m, x: x.count_nonzero(0),
}


@requires_torch
@pytest.mark.parametrize("name", sorted(SCALAR_CASES))
def test_scalar_input(name):
    fn = SCALAR_CASES[name]
    a = np.array(0.7)
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), a)
    if name not in ("argmax", "count_nonzero"):
        check_grad(_differentiable(fn), a)


# ---------------------------------------------------------------------- values that need care
@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", ["max_all", "min_all", "max_dim1", "min_dim0", "amax_tuple", "amin_dim-2_keep",
                                  "norm_inf", "norm_-inf"])
def test_ties_match_pytorch(name, dtype):
    """amax and max() share the gradient among ties; max(dim) gives it to the returned index."""
    a = np.array([[[1, 3, 3, 0], [2, 2, 0, 2], [-1, -1, -1, -1]],
                  [[3, 0, 3, 3], [0, 0, 1, 0], [-3, 2, -3, 2]]], dtype)
    compare_torch(lambda x: CASES[name][0](ember, x), lambda x: CASES[name][0](torch, x), a)


@requires_torch
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_prod_with_zeros(dim):
    a = np.array([[0.0, 2.0, 3.0, -1.5], [0.5, 0.0, 0.0, 2.0], [1.5, -2.0, 0.5, 3.0]])
    f = (lambda m, x: x.prod()) if dim is None else (lambda m, x: x.prod(dim))
    compare_torch(lambda x: f(ember, x), lambda x: f(torch, x), a)
    check_grad(lambda x: f(ember, x), a, gradgrad=False)


def test_prod_with_one_zero_second_derivative():
    """With a single zero per slice the second derivative is exact too."""
    a = np.array([[0.0, 2.0, 3.0, -1.5], [0.5, 1.0, 0.0, 2.0]])
    check_grad(lambda x: x.prod(1), a)
    check_grad(lambda x: x.prod(), np.array([1.5, 0.0, -2.0, 0.5]))


@requires_torch
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_with_zeros(dim):
    a = np.array([[0.0, 2.0, 3.0, -1.5, 0.7], [0.5, 0.0, 1.2, 0.0, 2.0], [1.5, -2.0, 0.5, 3.0, 0.0]])
    compare_torch(lambda x: x.cumprod(dim), lambda x: x.cumprod(dim), a)
    check_grad(lambda x: x.cumprod(dim), a, gradgrad=False)


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logsumexp_stable(dtype):
    a = np.array([[1e4, -1e4, 1e4], [-1e4, -1e4, -1e4], [3.0, 1e4, -2.0]], dtype)
    x = ember.tensor(a, requires_grad=True)
    y = x.logsumexp(1)
    y.backward(ember.ones(3, dtype=y.dtype))
    assert np.isfinite(y.detach().numpy()).all() and np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(y.detach().numpy(), [1e4 + math.log(2), -1e4 + math.log(3), 1e4], rtol=1e-6)
    compare_torch(lambda t: t.logsumexp(1), lambda t: t.logsumexp(1), a)
    compare_torch(lambda t: t.logsumexp(0), lambda t: t.logsumexp(0), a)


def test_logsumexp_of_minus_inf_and_empty():
    x = ember.tensor([[-INF, -INF], [0.0, -INF]])
    np.testing.assert_array_equal(x.logsumexp(1).numpy(), [-INF, 0.0])
    assert ember.zeros(0, 3).logsumexp(0).tolist() == [-INF] * 3


@requires_torch
@pytest.mark.parametrize("p", [2, "fro", 1, 3, 1.5, 0.5, -1, INF, 0])
def test_norm_gradient_at_zero(p):
    """The norm of a zero vector has PyTorch's subgradient 0, never NaN, in every slice."""
    a = np.array([[0.0, 0.0, 0.0], [0.0, 3.0, -4.0], [0.0, 0.0, 0.0]])
    compare_torch(lambda x: x.norm(p, 1), lambda x: x.norm(p, 1), a)
    x = ember.zeros(4, dtype=ember.float64, requires_grad=True)
    (g,) = ember.autograd.grad(x.norm(p), [x], create_graph=True)
    assert g.tolist() == [0.0] * 4


def test_norm_does_not_overflow_float32():
    """Squares of large float32 values overflow; the 2-norm is still finite (as in PyTorch)."""
    x = ember.tensor([3e20, -4e20], requires_grad=True)
    y = x.norm()
    y.backward()
    np.testing.assert_allclose(y.item(), 5e20, rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), [0.6, -0.8], rtol=1e-6)
    h = ember.tensor([3e4, 4e4], dtype=ember.float16).norm()
    assert h.dtype == ember.float16 and abs(h.item() - 5e4) < 100


# ---------------------------------------------------------------------- dtypes
@requires_torch
@pytest.mark.parametrize("src", ["bool", "uint8", "int32", "int64", "float32"])
@pytest.mark.parametrize("op", ["sum", "prod", "cumsum", "cumprod", "amax", "argmax", "all", "any",
                                "count_nonzero", "logsumexp", "sum_dtype", "mean_dtype"])
def test_result_dtypes(op, src):
    fns = {"sum": lambda m, x: x.sum(0), "prod": lambda m, x: x.prod(), "cumsum": lambda m, x: x.cumsum(1),
           "cumprod": lambda m, x: m.cumprod(x, 0), "amax": lambda m, x: x.amax(1), "argmax": lambda m, x: x.argmax(),
           "all": lambda m, x: x.all(1), "any": lambda m, x: m.any(x), "count_nonzero": lambda m, x: x.count_nonzero(),
           "logsumexp": lambda m, x: x.logsumexp(1), "sum_dtype": lambda m, x: x.sum(1, dtype=m.float64),
           "mean_dtype": lambda m, x: x.mean(0, dtype=m.float64)}
    if op in ("amax", "argmax", "logsumexp") and src == "bool":
        pytest.skip("PyTorch does not define these on bool")
    a = np.array([[1, 0, 2], [3, 1, 1]]).astype(src)
    e = fns[op](ember, ember.tensor(a))
    t = fns[op](torch, torch.tensor(a))
    assert e.dtype.name == str(t.dtype).split(".")[-1]
    np.testing.assert_allclose(e.numpy().astype(np.float64), t.numpy().astype(np.float64), rtol=1e-6)


def test_sum_dtype_keeps_input_grad_dtype():
    x = ember.ones(2, 3, requires_grad=True)
    y = x.sum(1, dtype=ember.float64)
    assert y.dtype == ember.float64
    y.sum().backward()
    assert x.grad.dtype == ember.float32 and x.grad.tolist() == [[1.0] * 3] * 2


# ---------------------------------------------------------------------- other semantics
def test_max_dim_returns_named_tuple():
    x = ember.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    r = x.max(1)
    assert isinstance(r, tuple) and isinstance(r, ember.return_types.max)
    values, indices = r
    assert values is r.values and indices is r[1]
    assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0] and indices.dtype == ember.int64
    assert not indices.requires_grad
    assert "return_types.max(" in repr(r) and "indices=" in repr(r)
    m = ember.min(x, dim=0, keepdim=True)
    assert isinstance(m, ember.return_types.min) and m.indices.shape == (1, 3) and m.values.tolist() == [[1.0, 0.0, 2.0]]
    assert pickle.loads(pickle.dumps(r)).indices.tolist() == [1, 0]


def test_max_min_of_two_tensors_is_elementwise():
    a, b = ember.tensor([1.0, 5.0, -2.0]), ember.tensor([3.0, 0.0, -1.0])
    assert ember.max(a, b).tolist() == [3.0, 5.0, -1.0]
    assert a.min(b).tolist() == [1.0, 0.0, -2.0]
    assert ember.max(a, other=b).tolist() == [3.0, 5.0, -1.0]


@requires_torch
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_argmax_argmin(dim, keepdim):
    a = rand(3, 4, seed=2)
    for name in ("argmax", "argmin"):
        e = getattr(ember, name)(ember.tensor(a), dim, keepdim)
        t = getattr(torch, name)(torch.tensor(a), dim, keepdim)
        assert e.dtype == ember.int64 and e.shape == tuple(t.shape)
        assert e.tolist() == t.tolist()


@requires_torch
@pytest.mark.parametrize("dim", [None, 0, (0, 1), 1, ()])
def test_all_any_count_nonzero(dim):
    a = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 0.5]])
    e, t = ember.tensor(a), torch.tensor(a)
    kw = {} if dim is None else {"dim": dim}
    for name in ("all", "any"):
        for keepdim in (False, True):
            if dim is None and keepdim:
                continue
            r = getattr(e, name)(keepdim=keepdim, **kw)
            assert r.dtype == ember.bool and r.tolist() == getattr(t, name)(keepdim=keepdim, **kw).tolist()
    assert e.count_nonzero(**kw).tolist() == t.count_nonzero(**kw).tolist()


@requires_torch
def test_empty_reductions():
    e, t = ember.zeros(0, 3), torch.zeros(0, 3)
    for f in (lambda m, x: x.sum(), lambda m, x: x.sum(0), lambda m, x: x.prod(0), lambda m, x: x.mean(0),
              lambda m, x: x.amax(1), lambda m, x: x.max(1).values, lambda m, x: x.norm(), lambda m, x: x.cumsum(0),
              lambda m, x: x.all(), lambda m, x: x.any(0)):
        r, s = f(ember, e), f(torch, t)
        assert r.shape == tuple(s.shape)
        np.testing.assert_array_equal(r.numpy(), s.numpy())


def test_var_without_degrees_of_freedom_warns():
    x = ember.tensor([2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="var"):
        v = x.var()
    assert math.isnan(v.item())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.var(correction=0).item() == 0.0


def test_sum_gemv_fast_path_matches_numpy():
    """Sums over leading axes of contiguous float arrays take a GEMV path; values and grads are unchanged."""
    for dtype in (np.float32, np.float64):
        a = rand(500, 7, seed=1, dtype=dtype)
        x = ember.tensor(a, requires_grad=True)
        y = x.sum(0)
        assert y.dtype.name == np.dtype(dtype).name and y.shape == (7,)
        np.testing.assert_allclose(y.detach().numpy(), a.astype(np.float64).sum(0), rtol=1e-5)
        y.backward(ember.arange(7).to(y.dtype))
        np.testing.assert_array_equal(x.grad.numpy(), np.broadcast_to(np.arange(7, dtype=dtype), (500, 7)))
    b = rand(6, 5, 4, seed=2)
    for dims, keep in (((0, 1), True), ((0,), False), ((0, 1), False)):
        np.testing.assert_allclose(ember.tensor(b).sum(dims, keepdim=keep).numpy(), b.sum(dims, keepdims=keep))
        np.testing.assert_allclose(ember.tensor(b).mean(dims, keepdim=keep).numpy(), b.mean(dims, keepdims=keep))


def test_grad_of_sum_and_mean_higher_order():
    """Backward of sum/mean is made of ember ops: a third derivative goes through it."""
    x = ember.tensor([1.0, 2.0, 3.0], dtype=ember.float64, requires_grad=True)
    y = (x ** 4).mean()
    (g,) = ember.autograd.grad(y, [x], create_graph=True)
    (gg,) = ember.autograd.grad(g.sum(), [x], create_graph=True)
    (ggg,) = ember.autograd.grad(gg.sum(), [x])
    np.testing.assert_allclose(ggg.numpy(), 24 * np.array([1.0, 2.0, 3.0]) / 3)


def test_methods_are_bound():
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    for name in ("sum", "mean", "prod", "var", "std", "max", "min", "amax", "amin", "argmax", "argmin", "logsumexp",
                 "norm", "cumsum", "cumprod", "all", "any", "count_nonzero"):
        fn = getattr(ember, name)  # (ember.<name> may be the method wrapped with `out=`: ember/ops/_out.py)
        assert getattr(ember.Tensor, name) in (fn, getattr(fn, "__wrapped__", None)), name
    assert x.sum(1).tolist() == [3.0, 7.0]


# ---------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("op", ["sum", "mean", "prod", "var", "std", "max", "min", "amax", "amin", "argmax", "argmin",
                                "logsumexp", "norm", "cumsum", "cumprod", "all", "any", "count_nonzero"])
def test_dim_out_of_range(op):
    x = ember.ones(2, 3)
    kw = {"p": 2, "dim": 2} if op == "norm" else {"dim": 2}
    with pytest.raises(IndexError, match=rf"{op}\(\).*range of \[-2, 1\].*got 2"):
        getattr(ember, op)(x, **kw)


@pytest.mark.parametrize("op", ["sum", "mean", "max", "amax", "argmax", "cumsum", "logsumexp"])
def test_dim_of_wrong_type(op):
    with pytest.raises(TypeError, match=op):
        getattr(ember, op)(ember.ones(2, 3), dim=0.5)


@pytest.mark.parametrize("op", ["max", "min", "prod", "cumsum"])
def test_tuple_dim_where_an_int_is_needed(op):
    with pytest.raises(TypeError, match=rf"{op}\(\): dim must be an int"):
        getattr(ember, op)(ember.ones(2, 3), dim=(0, 1))


def test_repeated_dim():
    with pytest.raises(RuntimeError, match=r"sum\(\): dim 1 appears multiple times"):
        ember.ones(2, 3).sum((1, -1))


def test_mean_of_integers():
    with pytest.raises(RuntimeError, match=r"mean\(\): could not infer output dtype.*floating point.*int64"):
        ember.arange(3).mean()
    assert ember.arange(3).mean(dtype=ember.float32).item() == 1.0


@pytest.mark.parametrize("op", ["var", "std", "norm"])
def test_float_only_ops_reject_integers(op):
    with pytest.raises(RuntimeError, match=rf"{op}\(\).*floating point"):
        getattr(ember, op)(ember.arange(3))


@pytest.mark.parametrize("op", ["max", "min", "amax", "amin"])
def test_max_of_empty(op):
    with pytest.raises(RuntimeError, match=rf"{op}\(\): Expected reduction dim to be specified"):
        getattr(ember, op)(ember.zeros(0, 3))
    with pytest.raises(IndexError, match=rf"{op}\(\): Expected reduction dim 0 to have non-zero size"):
        getattr(ember, op)(ember.zeros(0, 3), 0)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_of_empty(op):
    with pytest.raises(IndexError, match=rf"{op}\(\).*numel\(\) == 0"):
        getattr(ember, op)(ember.zeros(0, 3))


def test_inf_norm_of_empty():
    with pytest.raises(RuntimeError, match=r"norm\(\).*empty"):
        ember.zeros(0, 3).norm(INF, 0)


def test_bad_norm_order():
    with pytest.raises(RuntimeError, match=r"norm\(\): p='nuc' is not supported"):
        ember.ones(2, 2).norm("nuc")
    with pytest.raises(TypeError, match=r"norm\(\): p must be a number"):
        ember.ones(2, 2).norm([2])


def test_var_with_both_unbiased_and_correction():
    with pytest.raises(RuntimeError, match=r"var\(\): cannot specify both"):
        ember.ones(3).var(0, unbiased=True, correction=0)


def test_max_keepdim_without_dim():
    with pytest.raises(TypeError, match=r"max\(\): keepdim=True needs a dim"):
        ember.ones(3).max(keepdim=True)


def test_non_tensor_input():
    with pytest.raises(TypeError, match=r"sum\(\): argument 'input' must be Tensor, not list"):
        ember.sum([1.0, 2.0])
