"""Counting, binning and running extremes (ember/ops/counting.py): PyTorch parity of values, indices,
counts and dtypes; gradients of cummax/cummin/logcumsumexp; edge cases; errors; pickling.

Each case is a function of (module, tensor...) so the same code runs on ember and on PyTorch.
"""
import math
import pickle

import numpy as np
import pytest
from helpers import check_grad, compare_torch, host, noncontig, rand, raises_like_torch, requires_torch, torch

import ember

NAN, INF = math.nan, math.inf


def _same(e, t):
    """ember result(s) `e` equal PyTorch's `t`: same structure, shapes, dtypes and values (NaN == NaN)."""
    if isinstance(t, (tuple, list)):
        assert isinstance(e, tuple) and len(e) == len(t), (type(e), e, t)
        if hasattr(t, "_fields") or type(t).__module__ == "torch.return_types":
            assert type(e).__name__ == type(t).__name__
        for a, b in zip(e, t):
            _same(a, b)
        return
    assert isinstance(e, ember.Tensor), type(e)
    assert tuple(e.shape) == tuple(t.shape), (e.shape, t.shape)
    assert str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1], (e.dtype, t.dtype)
    np.testing.assert_allclose(host(e), t.numpy(), rtol=1e-6, atol=0, equal_nan=True)


def _both(fn, *arrays):
    """fn(module, *tensors) on ember and on PyTorch, compared."""
    e = fn(ember, *[ember.from_numpy(np.array(a)) for a in arrays])
    t = fn(torch, *[torch.from_numpy(np.array(a)) for a in arrays])
    _same(e, t)


I64 = np.int64
INTS = np.array([3, 1, 2, 3, 1, 0, 2, 2], I64)
MAT = np.array([[3, 1, 3], [2, 3, 2], [3, 1, 3], [0, 0, 0]], I64)

# ---------------------------------------------------------------------- unique, unique_consecutive
UNIQUE = {
    "plain": (lambda m, x: m.unique(x), INTS),
    "inverse": (lambda m, x: m.unique(x, return_inverse=True), INTS),
    "counts": (lambda m, x: m.unique(x, return_counts=True), INTS),
    "both": (lambda m, x: m.unique(x, return_inverse=True, return_counts=True), INTS),
    "unsorted_arg": (lambda m, x: m.unique(x, sorted=False), INTS),
    "2d_inverse_shape": (lambda m, x: m.unique(x, return_inverse=True, return_counts=True), MAT),
    "dim0": (lambda m, x: m.unique(x, dim=0, return_inverse=True, return_counts=True), MAT),
    "dim1": (lambda m, x: m.unique(x, dim=1, return_inverse=True, return_counts=True), MAT),
    "dim-1": (lambda m, x: m.unique(x, return_inverse=True, dim=-1), MAT),
    "dim3d": (lambda m, x: m.unique(x, dim=1, return_counts=True), np.stack([MAT, MAT[::-1]])),
    "float": (lambda m, x: m.unique(x, return_inverse=True, return_counts=True), np.array([2.5, -1.0, 2.5, 0.0], np.float32)),
    "nan": (lambda m, x: m.unique(x, return_inverse=True, return_counts=True), np.array([1.0, NAN, NAN, 2.0, 1.0])),
    "bool": (lambda m, x: m.unique(x, return_counts=True), np.array([True, False, True])),
    "scalar": (lambda m, x: m.unique(x, return_inverse=True, return_counts=True), np.array(5)),
    "empty": (lambda m, x: m.unique(x, return_inverse=True, return_counts=True), np.zeros(0, np.float32)),
    "empty_dim": (lambda m, x: m.unique(x, dim=0, return_inverse=True, return_counts=True), np.zeros((0, 3), np.float32)),
    "method": (lambda m, x: x.unique(return_counts=True), INTS),
    "consec": (lambda m, x: m.unique_consecutive(x), np.array([1, 1, 2, 2, 3, 1, 1], I64)),
    "consec_all": (lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True), np.array([1, 1, 2, 2, 3, 1, 1])),
    "consec_2d": (lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True), MAT),
    "consec_dim0": (lambda m, x: m.unique_consecutive(x, dim=0, return_inverse=True, return_counts=True),
                    np.array([[1, 1], [1, 1], [2, 3], [1, 1]])),
    "consec_dim1": (lambda m, x: x.unique_consecutive(return_counts=True, dim=1), np.array([[1, 1, 2], [1, 1, 2]])),
    "consec_nan": (lambda m, x: x.unique_consecutive(return_counts=True), np.array([1.0, NAN, NAN, 1.0])),
    "consec_scalar": (lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True), np.array(3)),
    "consec_empty": (lambda m, x: m.unique_consecutive(x, return_inverse=True, return_counts=True), np.zeros(0)),
}


@requires_torch
@pytest.mark.parametrize("name", UNIQUE)
def test_unique_parity(name):
    fn, a = UNIQUE[name]
    _same(fn(ember, ember.from_numpy(np.array(a))), fn(torch, torch.from_numpy(np.array(a))))


def test_unique_contract():
    """output[inverse] == input and counts sum to the number of elements, with and without dim."""
    x = ember.tensor([[4, 1, 4], [1, 1, 9]])
    out, inv, cnt = ember.unique(x, return_inverse=True, return_counts=True)
    assert out.tolist() == [1, 4, 9] and out[inv].tolist() == x.tolist() and cnt.tolist() == [3, 2, 1]
    out, inv = x.unique(dim=1, return_inverse=True)
    assert out[:, inv].tolist() == x.tolist() and out.shape == (2, 3)
    assert not ember.unique(x.float().requires_grad_()).requires_grad


# ---------------------------------------------------------------------- searchsorted, bucketize
SEQ = np.array([1, 3, 5, 7], I64)
SEARCH = {
    "left": (lambda m, s, v: m.searchsorted(s, v), SEQ, np.array([3, 6, 9, 0, 1], I64)),
    "right": (lambda m, s, v: m.searchsorted(s, v, right=True), SEQ, np.array([3, 6, 9, 0, 1], I64)),
    "side_right_int32": (lambda m, s, v: m.searchsorted(s, v, side="right", out_int32=True), SEQ, np.array([3, 7, 8])),
    "side_left": (lambda m, s, v: m.searchsorted(s, v, side="left"), SEQ, np.array([3, 7])),
    "2d_values": (lambda m, s, v: m.searchsorted(s, v), SEQ, np.array([[3, 6], [9, 1]])),
    "batched": (lambda m, s, v: m.searchsorted(s, v), np.array([[1, 3, 5, 7], [2, 4, 6, 8]]), np.array([[3, 6, 9], [3, 6, 9]])),
    "batched_right": (lambda m, s, v: m.searchsorted(s, v, right=True),
                      np.array([[[1.0, 3.0], [2.0, 4.0]]]), np.array([[[3.0, 0.5, 4.0], [4.0, 2.0, 9.0]]])),
    "float_vs_int": (lambda m, s, v: m.searchsorted(s, v), np.array([1.0, 2.5, 4.0]), np.array([2, 3, 5])),
    "int_vs_float": (lambda m, s, v: m.searchsorted(s, v), SEQ, np.array([2.5, 3.0, 7.5])),
    "nan": (lambda m, s, v: m.searchsorted(s, v), np.array([1.0, 2.0, NAN]), np.array([NAN, 1.5, 2.0])),
    "nan_right": (lambda m, s, v: m.searchsorted(s, v, right=True), np.array([1.0, 2.0, NAN]), np.array([NAN, 1.5, 0.5])),
    "sorter": (lambda m, s, v: m.searchsorted(s, v, sorter=m.tensor([1, 3, 2, 0])), np.array([7, 1, 5, 3]), np.array([3, 6, 9])),
    "empty_seq": (lambda m, s, v: m.searchsorted(s, v), np.zeros(0, np.float32), np.array([1.0], np.float32)),
    "empty_values": (lambda m, s, v: m.searchsorted(s, v), np.array([1.0, 2.0]), np.zeros(0)),
    "bool_values": (lambda m, s, v: m.searchsorted(s, v), np.array([0.5, 1.0, 2.0]), np.array([True, False])),
    "scalar_tensor": (lambda m, s, v: m.searchsorted(s, v), SEQ, np.array(3)),
    "bucketize": (lambda m, s, v: m.bucketize(v, s), SEQ, np.array([[3, 6], [9, 1]])),
    "bucketize_right_int32": (lambda m, s, v: m.bucketize(v, s, right=True, out_int32=True), SEQ, np.array([[3, 6], [9, 1]])),
    "bucketize_0d": (lambda m, s, v: m.bucketize(v, s), SEQ, np.array(3)),
}


@requires_torch
@pytest.mark.parametrize("name", SEARCH)
def test_searchsorted_parity(name):
    fn, s, v = SEARCH[name]
    _both(fn, s, v)


@requires_torch
@pytest.mark.parametrize("value", [3, 3.5, -1, 10])
def test_searchsorted_number_input(value):
    _same(ember.searchsorted(ember.tensor([1, 3, 5, 7]), value), torch.searchsorted(torch.tensor([1, 3, 5, 7]), value))
    _same(ember.bucketize(value, ember.tensor([1, 3, 5, 7]), right=True),
          torch.bucketize(value, torch.tensor([1, 3, 5, 7]), right=True))


def test_searchsorted_is_a_function_only():
    """PyTorch has no Tensor.searchsorted/bucketize methods; neither has ember."""
    assert not hasattr(ember.Tensor, "searchsorted") and not hasattr(ember.Tensor, "bucketize")


# ---------------------------------------------------------------------- histc, histogram, bincount
F4 = np.array([1.0, 2.0, 1.0, 4.0, 2.5, -3.0, 0.25], np.float32)
HIST = {
    "histc_default_range": (lambda m, x: m.histc(x, bins=4), F4),
    "histc_range": (lambda m, x: m.histc(x, bins=5, min=0, max=3), F4),
    "histc_default_bins": (lambda m, x: x.histc(), F4.astype(np.float64)),
    "histc_constant": (lambda m, x: m.histc(x, bins=4), np.array([1.0, 1.0], np.float32)),
    "histc_empty": (lambda m, x: m.histc(x, bins=3), np.zeros(0, np.float32)),
    "histc_2d_min_eq_max": (lambda m, x: m.histc(x, 4, 1, 1), np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)),
    "histc_nan_ignored": (lambda m, x: m.histc(x, bins=3, min=0, max=3), np.array([1.0, NAN, 2.0], np.float32)),
    "histc_random": (lambda m, x: m.histc(x, bins=7, min=-0.5, max=0.5), rand(200, seed=3, dtype=np.float32)),
    "histogram_int": (lambda m, x: m.histogram(x, 4), F4),
    "histogram_range_density": (lambda m, x: m.histogram(x, 4, range=(0.0, 8.0), density=True), F4),
    "histogram_edges": (lambda m, x: m.histogram(x, m.tensor([0.0, 1.0, 2.5, 5.0])), F4),
    "histogram_weight_density": (lambda m, x: x.histogram(m.tensor([0.0, 1.0, 2.5, 5.0]), weight=m.ones(7) * 2, density=True), F4),
    "histogram_empty": (lambda m, x: m.histogram(x, 3), np.zeros(0, np.float32)),
    "histogram_constant": (lambda m, x: m.histogram(x, 3), np.array([2.0, 2.0], np.float32)),
    "histogram_2d_f64": (lambda m, x: m.histogram(x, 3), np.array([[1.0, 5.0], [3.0, 10.0]])),
    "histogram_range_edges_inclusive": (lambda m, x: m.histogram(x, 3, range=(1.0, 10.0)), np.array([1.0, 5.0, 10.0, 11.0])),
}


@requires_torch
@pytest.mark.parametrize("name", HIST)
def test_histogram_parity(name):
    fn, a = HIST[name]
    e, t = fn(ember, ember.from_numpy(a.copy())), fn(torch, torch.from_numpy(a.copy()))
    if isinstance(t, tuple):  # edges from linspace may differ by an ulp between libraries
        assert type(e).__name__ == "histogram" and e._fields == ("hist", "bin_edges")
        np.testing.assert_allclose(host(e.bin_edges), t.bin_edges.numpy(), rtol=1e-6)
        assert e.bin_edges.dtype == e.hist.dtype
        e, t = e.hist, t.hist
    _same(e, t)


BINCOUNT = {
    "plain": (lambda m, x: m.bincount(x), np.array([0, 1, 1, 3, 7], I64)),
    "minlength": (lambda m, x: m.bincount(x, minlength=10), np.array([0, 1, 1, 3], I64)),
    "minlength_short": (lambda m, x: x.bincount(minlength=2), np.array([0, 1, 1, 3], I64)),
    "uint8": (lambda m, x: m.bincount(x), np.array([0, 1, 1, 3], np.uint8)),
    "int32": (lambda m, x: m.bincount(x), np.array([0, 2], np.int32)),
    "w_f32": (lambda m, x: m.bincount(x, m.tensor([0.5, 1.0, 1.0, 2.0])), np.array([0, 1, 1, 3], I64)),
    "w_f64": (lambda m, x: m.bincount(x, weights=m.tensor([0.5, 1.0, 1.0, 2.0], dtype=m.float64)), np.array([0, 1, 1, 3])),
    "w_int": (lambda m, x: m.bincount(x, m.tensor([1, 2, 3, 4])), np.array([0, 1, 1, 3], I64)),
    "w_f16": (lambda m, x: m.bincount(x, m.tensor([1, 2, 3, 4], dtype=m.float16)), np.array([0, 1, 1, 3], I64)),
    "w_bool": (lambda m, x: m.bincount(x, m.tensor([True, False, True, True])), np.array([0, 1, 1, 3], I64)),
    "empty": (lambda m, x: m.bincount(x), np.zeros(0, I64)),
    "empty_minlength_weights": (lambda m, x: m.bincount(x, m.zeros(0), minlength=3), np.zeros(0, I64)),
}


@requires_torch
@pytest.mark.parametrize("name", BINCOUNT)
def test_bincount_parity(name):
    fn, a = BINCOUNT[name]
    _both(fn, a)


# ---------------------------------------------------------------------- cummax, cummin
CUM = {
    "cummax_dim1": lambda m, x: m.cummax(x, 1),
    "cummax_dim-1": lambda m, x: x.cummax(-1),
    "cummax_dim0": lambda m, x: m.cummax(x, dim=0),
    "cummin_dim2": lambda m, x: m.cummin(x, 2),
    "cummin_dim-3": lambda m, x: x.cummin(dim=-3),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", CUM)
def test_cum_extreme_parity(name, dtype):
    fn = CUM[name]
    compare_torch(lambda x: tuple(fn(ember, x)), lambda x: tuple(fn(torch, x)), rand(3, 4, 5, seed=2, dtype=dtype))


@pytest.mark.parametrize("name", CUM)
def test_cum_extreme_gradcheck(name):
    check_grad(lambda x: CUM[name](ember, x).values, rand(3, 4, 5, seed=4))


TIES = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, 1.0], [2.0, 2.0, 2.0, -1.0, -1.0, 5.0]])


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cum_extreme_ties_pick_last_index(op):
    """Equal extremes: the index is the LAST of them, and the gradient goes only there (as in PyTorch)."""
    x = ember.tensor(TIES, requires_grad=True)
    v, i = getattr(ember, op)(x, 1)
    want = {"cummax": [[0, 1, 2, 2, 4, 4], [0, 1, 2, 2, 2, 5]], "cummin": [[0, 0, 0, 0, 0, 5], [0, 1, 2, 3, 4, 4]]}[op]
    assert i.tolist() == want and i.dtype == ember.int64
    v.sum().backward()
    g = np.zeros_like(TIES)
    for r, row in enumerate(want):
        for k in row:
            g[r, k] += 1
    np.testing.assert_array_equal(x.grad.numpy(), g)
    compare_torch(lambda t: tuple(getattr(ember, op)(t, 1)), lambda t: tuple(getattr(torch, op)(t, 1)), TIES)


@requires_torch
@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("a", [np.array([1.0, NAN, 3.0, NAN, 0.0]), np.array([NAN, 1.0, 2.0]), np.array([-INF, 1.0, INF, 0.0])],
                         ids=["nan_mid", "nan_first", "inf"])
def test_cum_extreme_nan_inf(op, a):
    _both(lambda m, x: getattr(m, op)(x, 0), a)


@requires_torch
@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("a", [np.array([1, 2, 2, 1], np.int32), np.array([3, 1, 4, 1, 5], I64), np.array([True, False, True]),
                               np.array(3.0), np.zeros((0, 3), np.float32), np.zeros((2, 0))],
                         ids=["int32", "int64", "bool", "0d", "empty_dim0", "empty_dim1"])
def test_cum_extreme_dtypes_and_shapes(op, a):
    _both(lambda m, x: getattr(m, op)(x, -1 if a.ndim else 0), a)
    _both(lambda m, x: getattr(m, op)(x, 0), a)


@pytest.mark.parametrize("op", ["cummax", "cummin", "logcumsumexp"])
def test_noncontiguous_input(op):
    a = noncontig(rand(3, 5, seed=8))
    fn = (lambda m, x: getattr(m, op)(x, 1)) if op == "logcumsumexp" else (lambda m, x: tuple(getattr(m, op)(x, 1)))
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), a)
    check_grad(lambda x: getattr(ember, op)(x, 1) if op == "logcumsumexp" else getattr(ember, op)(x, 1).values, a)


def test_cum_extreme_0d_grad():
    x = ember.tensor(2.0, dtype=ember.float64, requires_grad=True)
    v, i = ember.cummax(x, 0)
    assert v.shape == () and i.shape == () and i.item() == 0
    v.backward()
    assert x.grad.item() == 1.0


def test_return_types_pickle_and_repr():
    x = ember.tensor([[1.0, 3.0, 2.0]])
    for r in (ember.cummax(x, 1), x.cummin(1)):
        assert isinstance(r, tuple) and r._fields == ("values", "indices")
        back = pickle.loads(pickle.dumps(r))
        assert type(back) is type(r) and back.indices.tolist() == r.indices.tolist()
        assert f"return_types.{type(r).__name__}(" in repr(r)
    assert isinstance(ember.cummax(x, 1), ember.return_types.cummax)
    assert isinstance(ember.cummin(x, 1), ember.return_types.cummin)
    h = ember.histogram(ember.tensor([1.0, 2.0, 2.0]), 2)
    assert isinstance(h, ember.return_types.histogram) and h._fields == ("hist", "bin_edges")
    hist, edges = pickle.loads(pickle.dumps(h))
    assert hist.tolist() == [1.0, 2.0] and edges.tolist() == [1.0, 1.5, 2.0]
    assert "hist=" in repr(h) and "bin_edges=" in repr(h)


# ---------------------------------------------------------------------- logcumsumexp
LCSE = {
    "dim0": lambda m, x: m.logcumsumexp(x, 0),
    "dim1": lambda m, x: x.logcumsumexp(1),
    "dim-1": lambda m, x: m.logcumsumexp(x, dim=-1),
    "dim-3": lambda m, x: x.logcumsumexp(dim=-3),
}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", LCSE)
def test_logcumsumexp_parity(name, dtype):
    fn = LCSE[name]
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), rand(3, 4, 5, seed=5, low=-3, high=3, dtype=dtype))


@pytest.mark.parametrize("name", LCSE)
def test_logcumsumexp_gradcheck(name):
    check_grad(lambda x: LCSE[name](ember, x), rand(3, 4, 5, seed=6, low=-3, high=3))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_logcumsumexp_large_values_stable(dtype):
    """1000.0 must neither overflow forward nor give inf/nan gradients (nor -1000.0 underflow to 0/0)."""
    a = np.array([[1000.0, 1000.0, -1000.0, 999.0], [-1000.0, -1001.0, -999.0, -1000.0]], dtype)
    x = ember.from_numpy(a.copy()).requires_grad_()
    y = ember.logcumsumexp(x, 1)
    assert np.isfinite(host(y)).all()
    np.testing.assert_allclose(host(y)[0, :2], [1000.0, 1000.0 + math.log(2)], rtol=1e-6)
    g = np.random.default_rng(0).standard_normal(a.shape).astype(dtype)
    y.backward(ember.from_numpy(g))
    assert np.isfinite(host(x.grad)).all()
    compare_torch(lambda t: ember.logcumsumexp(t, 1), lambda t: torch.logcumsumexp(t, 1), a)
    check_grad(lambda t: ember.logcumsumexp(t, 1), a.astype(np.float64) / 10 + np.array([[0.0], [5.0]]))


@requires_torch
@pytest.mark.parametrize("a", [np.array([-INF, -INF, 1.0]), np.array([INF, 1.0, -INF]), np.array([1.0, NAN, 1.0]),
                               np.array(2.0), np.zeros((0, 2), np.float32), np.zeros((2, 0))],
                         ids=["-inf", "inf", "nan", "0d", "empty0", "empty1"])
def test_logcumsumexp_edge_values(a):
    _both(lambda m, x: m.logcumsumexp(x, -1 if a.ndim else 0), a)


def test_logcumsumexp_all_neg_inf_prefix_grad_is_finite():
    x = ember.tensor([-INF, -INF, 0.0], dtype=ember.float64, requires_grad=True)
    ember.logcumsumexp(x, 0).backward(ember.tensor([1.0, -2.0, 3.0], dtype=ember.float64))
    np.testing.assert_allclose(host(x.grad), [0.0, 0.0, 3.0], rtol=1e-12)


def test_logcumsumexp_0d_grad():
    x = ember.tensor(1.5, dtype=ember.float64, requires_grad=True)
    y = x.logcumsumexp(0)
    assert y.shape == () and y.item() == 1.5
    y.backward()
    assert x.grad.item() == 1.0


# ---------------------------------------------------------------------- errors
ERRORS = {
    "bincount_negative": (lambda m: m.bincount(m.tensor([0, -1])), RuntimeError, r"bincount.*negative.*-1"),
    "bincount_2d": (lambda m: m.bincount(m.tensor([[0, 1]])), RuntimeError, r"bincount.*1-d.*\[1, 2\]"),
    "bincount_float": (lambda m: m.bincount(m.tensor([0.0, 1.0])), NotImplementedError, r"bincount.*Float"),
    "bincount_bool": (lambda m: m.bincount(m.tensor([True, False])), NotImplementedError, r"bincount.*Bool"),
    "bincount_minlength": (lambda m: m.bincount(m.tensor([0, 1]), minlength=-1), RuntimeError, r"bincount.*minlength.*-1"),
    "bincount_weights": (lambda m: m.bincount(m.tensor([0, 1]), weights=m.tensor([1.0])), RuntimeError, r"bincount.*weights.*\[1\]"),
    "histc_min_gt_max": (lambda m: m.histc(m.tensor([1.0, 2.0]), bins=4, min=3, max=1), RuntimeError, r"histc.*min=3.*max=1"),
    "histc_int": (lambda m: m.histc(m.tensor([1, 2]), bins=4), NotImplementedError, r"histc.*Long"),
    "histc_bins0": (lambda m: m.histc(m.tensor([1.0, 2.0]), bins=0), RuntimeError, r"histc.*bins.*0"),
    "histc_bins_float": (lambda m: m.histc(m.tensor([1.0, 2.0]), bins=2.5), TypeError, r"histc.*bins.*float"),
    "histc_nan_range": (lambda m: m.histc(m.tensor([1.0, NAN]), bins=4), RuntimeError, r"histc.*nan.*not finite"),
    "histogram_int": (lambda m: m.histogram(m.tensor([1, 2]), 3), NotImplementedError, r"histogram.*Long"),
    "histogram_range": (lambda m: m.histogram(m.tensor([1.0, 2.0]), 3, range=(2.0, 1.0)), RuntimeError, r"histogram.*min.*2.*max.*1"),
    "histogram_bins_neg": (lambda m: m.histogram(m.tensor([1.0, 2.0]), -1), RuntimeError, r"histogram.*bins.*-1"),
    "histogram_weight": (lambda m: m.histogram(m.tensor([1.0, 2.0]), 3, weight=m.tensor([1.0])), RuntimeError, r"histogram.*weight.*\[1\]"),
    "histogram_edges_dtype": (lambda m: m.histogram(m.tensor([1.0, 2.0]), m.tensor([0.0, 1.0], dtype=m.float64)), RuntimeError, r"histogram.*dtype.*Double"),
    "histogram_edges_2d": (lambda m: m.histogram(m.tensor([1.0, 2.0]), m.tensor([[0.0, 1.0]])), RuntimeError, r"histogram.*bins.*2 dimensions"),
    "search_leading": (lambda m: m.searchsorted(m.tensor([[1.0, 2.0], [3, 4]]), m.tensor([[1.0, 2.0], [3, 4], [5, 6]])),
                       RuntimeError, r"searchsorted.*\[2, 2\].*\[3, 2\]"),
    "search_side": (lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.0]), side="foo"), RuntimeError, r"searchsorted.*side.*foo"),
    "search_side_right": (lambda m: m.searchsorted(m.tensor([1.0, 2.0]), m.tensor([1.0]), side="left", right=True),
                          RuntimeError, r"searchsorted.*side.*right"),
    "search_0d_seq": (lambda m: m.searchsorted(m.tensor(1.0), m.tensor([1.0])), RuntimeError, r"searchsorted.*0 dimension"),
    "search_scalar_batched": (lambda m: m.searchsorted(m.tensor([[1, 3], [2, 4]]), 3), RuntimeError, r"searchsorted.*scalar.*dim\(2\)"),
    "search_sorter_dtype": (lambda m: m.searchsorted(m.tensor([7, 1]), m.tensor([3]), sorter=m.tensor([1.0, 0.0])),
                            RuntimeError, r"searchsorted.*sorter.*Float"),
    "search_sorter_size": (lambda m: m.searchsorted(m.tensor([7, 1, 5]), m.tensor([3]), sorter=m.tensor([1, 0])),
                           RuntimeError, r"searchsorted.*sorter.*\[2\]"),
    "search_sorter_range": (lambda m: m.searchsorted(m.tensor([7, 1]), m.tensor([3]), sorter=m.tensor([1, 5])),
                            RuntimeError, r"searchsorted.*sorter.*out of range"),
    "search_not_tensor": (lambda m: m.searchsorted([1, 2], m.tensor([1])), TypeError, r"searchsorted.*sorted_sequence.*list"),
    "bucketize_2d": (lambda m: m.bucketize(m.tensor([1.0, 2.0]), m.tensor([[1.0, 2.0]])), RuntimeError, r"bucketize.*dim\(2\)"),
    "cummax_dim": (lambda m: m.cummax(m.tensor([1.0, 2.0]), 1), IndexError, r"cummax.*range.*1"),
    "cummin_dim_none": (lambda m: m.cummin(m.tensor([1.0, 2.0]), None), TypeError, r"cummin.*dim.*NoneType"),
    "cummax_list": (lambda m: m.cummax([1.0, 2.0], 0), TypeError, r"cummax.*input.*list"),
    "logcumsumexp_int": (lambda m: m.logcumsumexp(m.tensor([1, 2]), 0), NotImplementedError, r"logcumsumexp.*Long"),
    "logcumsumexp_dim": (lambda m: m.logcumsumexp(m.tensor([1.0, 2.0]), -2), IndexError, r"logcumsumexp.*-2"),
    "unique_dim": (lambda m: m.unique(m.tensor([1, 2]), dim=2), IndexError, r"unique.*2"),
    "unique_list": (lambda m: m.unique([1, 2]), TypeError, r"unique.*list"),
    "unique_zero_sized_other_dim": (lambda m: m.unique(m.zeros(2, 0), dim=0), RuntimeError, r"unique.*0 sized"),
    "unique_consecutive_dim": (lambda m: m.unique_consecutive(m.zeros(2, 3), dim=-3), IndexError, r"unique_consecutive.*-3"),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors(name):
    fn, exc, match = ERRORS[name]
    raises_like_torch(fn, ember, exc, match)
    if torch is not None:
        raises_like_torch(fn, torch, exc)  # the same exception type in PyTorch


def test_methods_bound():
    for n in ("unique", "unique_consecutive", "bincount", "histc", "histogram", "cummax", "cummin", "logcumsumexp"):
        assert hasattr(ember.Tensor, n), n
        if torch is not None:
            assert hasattr(torch.Tensor, n), n
