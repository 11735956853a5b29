"""Sorting and selection (ember/ops/sorting.py): sort, argsort, msort, topk, kthvalue, median, nanmedian, mode.

PyTorch parity of values, indices, dtypes and gradients (random cotangent), finite-difference checks,
ties and NaN, integer inputs, 0-d and empty inputs, named tuples and errors. Each case is a function of
(module, tensor) so the same code runs on ember and on PyTorch.
"""
import math
import pickle

import numpy as np
import pytest
from helpers import check_grad, compare_torch, noncontig, rand, requires_torch, torch

import ember

NAN = math.nan

# name -> fn(m, x); on tie-free inputs every case is deterministic in both libraries and differentiable
CASES = {
    "sort": lambda m, x: m.sort(x),
    "sort_dim0_desc": lambda m, x: m.sort(x, 0, descending=True),
    "sort_neg_dim_stable": lambda m, x: m.sort(x, dim=-2, stable=True),
    "sort_method_desc": lambda m, x: x.sort(descending=True, stable=True),
    "sort_values_only": lambda m, x: m.sort(x, 1).values * 2,
    "argsort": lambda m, x: m.argsort(x),
    "argsort_dim0_desc": lambda m, x: x.argsort(0, True),
    "msort": lambda m, x: m.msort(x),
    "msort_method": lambda m, x: x.msort(),
    "topk": lambda m, x: m.topk(x, 2),
    "topk_smallest_dim0": lambda m, x: m.topk(x, 1, 0, largest=False),
    "topk_neg_dim": lambda m, x: x.topk(3, dim=-1, largest=True, sorted=True),
    "topk_all": lambda m, x: x.topk(x.shape[-1]),
    "topk_k0": lambda m, x: m.topk(x, 0),
    "kthvalue": lambda m, x: m.kthvalue(x, 2),
    "kthvalue_dim0_keep": lambda m, x: m.kthvalue(x, 1, 0, keepdim=True),
    "kthvalue_last_neg": lambda m, x: x.kthvalue(x.shape[-2], dim=-2),
    "median_all": lambda m, x: m.median(x),
    "median_dim": lambda m, x: m.median(x, 1),
    "median_neg_keep": lambda m, x: x.median(-1, keepdim=True),
    "nanmedian_all": lambda m, x: x.nanmedian(),
    "nanmedian_dim0": lambda m, x: m.nanmedian(x, 0),
    "mode": lambda m, x: m.mode(x),
    "mode_dim0_keep": lambda m, x: x.mode(0, keepdim=True),
}

SHAPES = [(4, 5), (3, 4, 6), (2, 3, 5, 4)]


def _distinct(shape, seed=0, dtype=np.float64):
    """Values without ties (a shuffled grid, spaced for float32 and finite differences)."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * 0.37 - n * 0.15).reshape(shape).astype(dtype)


def _ties(shape, seed=0, nan=False, dtype=np.float64):
    """Values from a small set (many ties), with NaNs when asked."""
    a = np.random.default_rng(seed).integers(-2, 3, shape).astype(dtype)
    if nan:
        a[np.random.default_rng(seed + 1).random(shape) < 0.2] = NAN
    return a


# ---------------------------------------------------------------------- parity: values, indices, dtypes, gradients
@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_parity(name, shape, dtype):
    fn = CASES[name]
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), _distinct(shape, 3, dtype))


@requires_torch
@pytest.mark.parametrize("name", ["sort", "median_dim", "kthvalue", "topk", "argsort"])
def test_parity_noncontiguous(name):
    fn = CASES[name]
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), noncontig(_distinct((4, 5), 7)))


@requires_torch
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("name", ["sort", "sort_dim0_desc", "sort_neg_dim_stable", "sort_method_desc", "argsort",
                                  "argsort_dim0_desc", "msort", "median_all", "nanmedian_all"])
def test_parity_ties_and_nan(name, nan, dtype):
    """Stable sorting (ascending and descending), NaN as the largest value, and median()'s gradient shared
    among the elements equal to it: deterministic in PyTorch too, so indices and gradients are compared."""
    fn = CASES[name]
    compare_torch(lambda x: fn(ember, x), lambda x: fn(torch, x), _ties((6, 7), 5, nan, dtype))


@requires_torch
@pytest.mark.parametrize("nan", [False, True])
@pytest.mark.parametrize("case", [
    ("topk", lambda m, x: m.topk(x, 3, 1)), ("topk_smallest", lambda m, x: m.topk(x, 4, 0, largest=False)),
    ("kthvalue", lambda m, x: m.kthvalue(x, 3, 1)), ("kthvalue_keep", lambda m, x: m.kthvalue(x, 5, 0, True)),
    ("median", lambda m, x: m.median(x, 1)), ("nanmedian", lambda m, x: m.nanmedian(x, 0, keepdim=True)),
    ("mode", lambda m, x: m.mode(x, 1))], ids=lambda c: c[0])
def test_selection_with_ties(case, nan):
    """With ties PyTorch's CPU kernels pick an implementation-defined index among equal values: compare values and
    dtypes, check each index selects an equal value, and that the gradient lands exactly at the returned index."""
    _, fn = case
    if case[0] == "mode" and nan:
        pytest.skip("PyTorch's mode orders NaN inconsistently (see test_mode_nan)")
    a = _ties((6, 7), 11, nan)
    x = ember.tensor(a, requires_grad=True)
    e, t = fn(ember, x), fn(torch, torch.tensor(a))
    np.testing.assert_array_equal(e.values.detach().numpy(), t.values.numpy())
    assert e.indices.dtype == ember.int64 and e.values.dtype == ember.float64 and not e.indices.requires_grad
    assert e.values.shape == tuple(t.values.shape) and e.indices.shape == tuple(t.indices.shape)
    dim = 1 if case[0] in ("topk", "kthvalue", "median", "mode") else 0
    c = np.random.default_rng(0).standard_normal(e.values.shape)
    v, i, ck = e.values.detach().numpy(), e.indices.numpy(), c
    if v.ndim < a.ndim:  # (a reduction without keepdim)
        v, i, ck = np.expand_dims(v, dim), np.expand_dims(i, dim), np.expand_dims(c, dim)
    np.testing.assert_array_equal(np.take_along_axis(a, i, dim), v)
    e.values.backward(ember.tensor(c))
    want = np.zeros_like(a)
    np.put_along_axis(want, i, ck, dim)
    np.testing.assert_array_equal(x.grad.numpy(), want)


@requires_torch
def test_topk_unsorted_selects_the_same_elements():
    a = _distinct((5, 8), 2)
    e, t = ember.topk(ember.tensor(a), 3, sorted=False), torch.topk(torch.tensor(a), 3, sorted=False)
    for r in range(5):
        assert sorted(zip(e.indices[r].tolist(), e.values[r].tolist())) == sorted(zip(t.indices[r].tolist(),
                                                                                     t.values[r].tolist()))


@requires_torch
@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "int16"])
@pytest.mark.parametrize("name", ["sort", "sort_dim0_desc", "argsort", "msort", "median_all", "mode", "mode_dim0_keep"])
def test_integer_parity(name, dtype):
    """Integer inputs sort and select with their own dtype (no gradient); these rules are deterministic with ties."""
    a = np.random.default_rng(4).integers(0, 4, (5, 6)).astype(dtype)
    e, t = CASES[name](ember, ember.tensor(a)), CASES[name](torch, torch.tensor(a))
    for eo, to in zip(e if isinstance(e, tuple) else (e,), t if isinstance(t, tuple) else (t,)):
        assert str(eo.dtype) == str(to.dtype).replace("torch", "ember")
        np.testing.assert_array_equal(eo.numpy(), to.numpy())


@requires_torch
@pytest.mark.parametrize("name", ["topk", "kthvalue", "median_dim", "nanmedian_dim0", "topk_smallest_dim0"])
def test_integer_selection_values(name):
    a = np.random.default_rng(1).permutation(20).reshape(4, 5) - 10  # distinct integers
    e, t = CASES[name](ember, ember.tensor(a)), CASES[name](torch, torch.tensor(a))
    assert e.values.dtype == ember.int64 and e.indices.dtype == ember.int64
    np.testing.assert_array_equal(e.values.numpy(), t.values.numpy())
    np.testing.assert_array_equal(e.indices.numpy(), t.indices.numpy())


@requires_torch
def test_bool_sort_and_mode():
    a = np.array([[True, False, True, False], [False, False, True, True]])
    for fn in (lambda m, x: m.sort(x), lambda m, x: m.sort(x, descending=True), lambda m, x: m.mode(x)):
        e, t = fn(ember, ember.tensor(a)), fn(torch, torch.tensor(a))
        assert e.values.dtype == ember.bool
        np.testing.assert_array_equal(e.values.numpy(), t.values.numpy())
        np.testing.assert_array_equal(e.indices.numpy(), t.indices.numpy())


@requires_torch
def test_median_float16_and_nan_rules():
    x = np.array([[NAN, 5.0, NAN], [2.0, 3.0, 1.0], [NAN, NAN, NAN], [1.0, NAN, NAN]])
    for fn in (lambda m, t: m.median(t, 1), lambda m, t: m.nanmedian(t, 1)):
        e, t = fn(ember, ember.tensor(x)), fn(torch, torch.tensor(x))
        np.testing.assert_array_equal(e.values.numpy(), t.values.numpy())
        np.testing.assert_array_equal(e.indices.numpy(), t.indices.numpy())
    h = np.array([3.0, 1.0, 2.0, 7.0], np.float16)
    assert ember.median(ember.tensor(h)).dtype == ember.float16
    assert ember.median(ember.tensor(h)).item() == torch.median(torch.tensor(h)).item() == 2.0


@requires_torch
@pytest.mark.parametrize("op, values", [("nanmedian", [NAN, NAN]), ("median", [1.0, NAN, 2.0, NAN]),
                                        ("nanmedian", [1.0, NAN, 2.0, NAN]), ("median", [2.0, 2.0, 2.0]),
                                        ("median", [[1.0, 2.0], [2.0, 3.0]])])
def test_median_all_gradient_shared_like_torch(op, values):
    """median(input) splits the gradient among the elements equal to the result (NaN matching a NaN result)."""
    e, t = ember.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    getattr(ember, op)(e).backward(), getattr(torch, op)(t).backward()
    np.testing.assert_allclose(e.grad.numpy(), t.grad.numpy())


@requires_torch
def test_mode_last_occurrence_like_torch():
    """On short slices (where PyTorch's CPU sort keeps equal values in order) the index is the last occurrence."""
    rng = np.random.default_rng(8)
    for _ in range(30):
        a = rng.integers(0, 4, (3, int(rng.integers(1, 15)))).astype(np.float64)
        e, t = ember.mode(ember.tensor(a)), torch.mode(torch.tensor(a))
        np.testing.assert_array_equal(e.values.numpy(), t.values.numpy())
        np.testing.assert_array_equal(e.indices.numpy(), t.indices.numpy())


def test_mode_nan():
    """NaN never equals NaN: each NaN is counted once, so a repeated number wins over repeated NaNs."""
    r = ember.mode(ember.tensor([NAN, 2.0, NAN, 2.0, 0.0]))
    assert r.values.item() == 2.0 and r.indices.item() == 3
    r = ember.mode(ember.tensor([5.0, NAN, NAN, 1.0]))
    assert r.values.item() == 1.0 and r.indices.item() == 3


# ---------------------------------------------------------------------- finite differences
@pytest.mark.parametrize("name", [n for n in sorted(CASES) if "argsort" not in n and n != "topk_k0"])
def test_gradcheck(name):
    fn = CASES[name]

    def f(x):
        r = fn(ember, x)
        return r.values if isinstance(r, tuple) else r
    check_grad(f, _distinct((3, 4), 6))
    check_grad(f, _distinct((2, 3, 4), 9))


def test_gradcheck_median_with_shared_ties():
    check_grad(lambda x: ember.median(x * 1.0), np.array([1.0, 2.0, 3.0, 4.0]))


# ---------------------------------------------------------------------- results: named tuples, 0-d, empty
def test_named_tuples_fields_pickle_repr():
    x = ember.tensor([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]], requires_grad=True)
    results = {"sort": x.sort(), "topk": x.topk(2), "kthvalue": x.kthvalue(2), "median": x.median(1),
               "nanmedian": x.nanmedian(1), "mode": x.mode()}
    for name, r in results.items():
        cls = getattr(ember.return_types, name)
        assert isinstance(r, cls) and isinstance(r, tuple) and len(r) == 2
        values, indices = r
        assert values is r.values and indices is r[1] and indices.dtype == ember.int64
        assert values.requires_grad and not indices.requires_grad and indices.grad_fn is None
        assert f"return_types.{name}(" in repr(r) and "indices=" in repr(r)
        back = pickle.loads(pickle.dumps(r))
        assert type(back) is cls and back.indices.tolist() == indices.tolist()
        assert back.values.tolist() == values.tolist()
    assert results["sort"].indices.tolist() == [[1, 2, 0], [0, 2, 1]]
    assert results["kthvalue"].values.tolist() == [2.0, 4.0]


def test_argsort_never_requires_grad():
    x = ember.tensor([3.0, 1.0, 2.0], requires_grad=True)
    i = x.argsort(descending=True)
    assert i.tolist() == [0, 2, 1] and i.dtype == ember.int64 and not i.requires_grad


def test_stable_descending_keeps_original_order():
    x = ember.tensor([1.0, 2.0, 1.0, 2.0, NAN, 1.0, NAN])
    r = x.sort(descending=True, stable=True)
    assert r.indices.tolist() == [4, 6, 1, 3, 0, 2, 5]
    assert ember.argsort(x, stable=True).tolist() == [0, 2, 5, 1, 3, 4, 6]


@requires_torch
@pytest.mark.parametrize("fn", [lambda m, x: m.sort(x), lambda m, x: m.sort(x, 0, True), lambda m, x: m.argsort(x, -1),
                                lambda m, x: m.msort(x), lambda m, x: m.topk(x, 1), lambda m, x: m.topk(x, 0),
                                lambda m, x: m.kthvalue(x, 1, 0, True), lambda m, x: m.median(x),
                                lambda m, x: m.median(x, -1, True), lambda m, x: m.nanmedian(x, 0),
                                lambda m, x: m.mode(x, 0, True)])
def test_zero_dim_input(fn):
    """A 0-d tensor is one slice of one element: its own result, at index 0, and still 0-d."""
    e, t = fn(ember, ember.tensor(2.5, requires_grad=True)), fn(torch, torch.tensor(2.5))
    for eo, to in zip(e if isinstance(e, tuple) else (e,), t if isinstance(t, tuple) else (t,)):
        assert eo.shape == tuple(to.shape) == () and str(eo.dtype)[6:] == str(to.dtype)[6:]
        assert eo.item() == to.item()
    v = e.values if isinstance(e, tuple) else e
    if v.requires_grad:
        v.backward()


@requires_torch
@pytest.mark.parametrize("fn", [lambda m, x: m.sort(x, 0), lambda m, x: m.sort(x, 1), lambda m, x: m.argsort(x, 0),
                                lambda m, x: m.topk(x, 0, 0), lambda m, x: m.topk(x, 2, 1),
                                lambda m, x: m.median(x, 1), lambda m, x: m.kthvalue(x, 1, 1, True),
                                lambda m, x: m.mode(x, 1), lambda m, x: m.nanmedian(x, 1), lambda m, x: m.msort(x)])
def test_empty_input(fn):
    e, t = fn(ember, ember.zeros(0, 3)), fn(torch, torch.zeros(0, 3))
    for eo, to in zip(e if isinstance(e, tuple) else (e,), t if isinstance(t, tuple) else (t,)):
        assert eo.shape == tuple(to.shape) and str(eo.dtype)[6:] == str(to.dtype)[6:]


@requires_torch
def test_median_of_nothing_is_nan():
    assert math.isnan(ember.median(ember.zeros(0)).item()) and math.isnan(torch.median(torch.zeros(0)).item())
    assert math.isnan(ember.nanmedian(ember.zeros(2, 0)).item())


# ---------------------------------------------------------------------- errors
X = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]


@requires_torch
@pytest.mark.parametrize("call, exc, words", [
    (lambda m, x: m.sort(x, 2), IndexError, ["sort()", "range of [-2, 1]", "got 2"]),
    (lambda m, x: m.argsort(x, -3), IndexError, ["argsort()", "got -3"]),
    (lambda m, x: m.topk(x, 4), RuntimeError, ["topk()", "selected index k out of range", "k=4"]),
    (lambda m, x: m.topk(x, -1), RuntimeError, ["topk()", "k out of range", "k=-1"]),
    (lambda m, x: m.topk(x, 1, dim=5), IndexError, ["topk()", "got 5"]),
    (lambda m, x: m.topk(x, 1.5), TypeError, ["topk()", "'k'", "float"]),
    (lambda m, x: m.topk(x, True), TypeError, ["topk()", "'k'", "bool"]),
    (lambda m, x: m.kthvalue(x, 4), RuntimeError, ["kthvalue()", "k out of range for dimension 1", "k=4"]),
    (lambda m, x: m.kthvalue(x, 0), RuntimeError, ["kthvalue()", "k out of range", "k=0"]),
    (lambda m, x: m.kthvalue(x, 1, 2), IndexError, ["kthvalue()", "got 2"]),
    (lambda m, x: m.kthvalue(x, 1.0), TypeError, ["kthvalue()", "'k'", "float"]),
    (lambda m, x: m.median(x, 2), IndexError, ["median()", "got 2"]),
    (lambda m, x: m.nanmedian(x, -3), IndexError, ["nanmedian()", "got -3"]),
    (lambda m, x: m.mode(x, 2), IndexError, ["mode()", "got 2"]),
    (lambda m, x: m.median(m.zeros(0, 3), 0), IndexError, ["median()", "reduction dim 0", "non-zero size"]),
    (lambda m, x: m.mode(m.zeros(2, 0), 1), IndexError, ["mode()", "reduction dim 1", "non-zero size"]),
    (lambda m, x: m.kthvalue(m.zeros(2, 0), 1, 1), IndexError, ["kthvalue()", "reduction dim 1"]),
    (lambda m, x: m.mode(m.zeros(0)), IndexError, ["mode()", "reduction dim 0"]),
    (lambda m, x: m.topk(m.tensor(1.0), 2), RuntimeError, ["topk()", "k out of range", "k=2"]),
    (lambda m, x: m.kthvalue(m.tensor(1.0), 2), RuntimeError, ["kthvalue()", "k out of range", "k=2"]),
    (lambda m, x: m.sort(m.tensor(1.0), 1), IndexError, ["sort()", "range of [-1, 0]", "got 1"]),
    (lambda m, x: m.topk(m.tensor([True, False]), 1), RuntimeError, ["topk", "bool"]),
    (lambda m, x: m.kthvalue(m.tensor([True, False]), 1), NotImplementedError, ["kthvalue", "Bool"]),
    (lambda m, x: m.median(m.tensor([True, False])), NotImplementedError, ["median", "Bool"]),
    (lambda m, x: m.nanmedian(m.tensor([True, False]), 0), NotImplementedError, ["nanmedian", "Bool"]),
    (lambda m, x: m.sort([1.0, 2.0]), TypeError, ["sort()", "'input'", "list"]),
    (lambda m, x: m.topk(np.ones(3), 1), TypeError, ["topk()", "'input'", "ndarray"]),
    (lambda m, x: m.median((1, 2)), TypeError, ["median()", "'input'", "tuple"]),
    (lambda m, x: m.mode(3.0), TypeError, ["mode()", "'input'", "float"]),
    (lambda m, x: m.sort(x, dim=1.0), TypeError, ["sort()", "dim", "float"]),
    (lambda m, x: m.median(x, keepdim=True), TypeError, ["median()"]),
])
def test_errors(call, exc, words):
    with pytest.raises(exc) as info:
        call(ember, ember.tensor(X))
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    with pytest.raises(exc):  # PyTorch raises the same type
        call(torch, torch.tensor(X))


def test_errors_without_torch():
    """The checks that need no oracle, so they run everywhere."""
    x = ember.tensor(X)
    with pytest.raises(RuntimeError, match=r"topk\(\): selected index k out of range \(k=7"):
        x.topk(7)
    with pytest.raises(RuntimeError, match=r"kthvalue\(\): selected number k out of range for dimension 0"):
        x.kthvalue(3, 0)
    with pytest.raises(IndexError, match=r"sort\(\): Dimension out of range"):
        x.sort(-3)
    with pytest.raises(TypeError, match=r"argsort\(\): argument 'input' must be Tensor, not list"):
        ember.argsort([3, 1])


def test_values_shapes_and_methods_without_torch():
    x = ember.tensor([[4.0, 1.0, 3.0, 2.0], [0.0, 9.0, 9.0, -1.0]])
    assert x.sort().values.tolist() == [[1.0, 2.0, 3.0, 4.0], [-1.0, 0.0, 9.0, 9.0]]
    assert x.topk(2).indices.tolist() == [[0, 2], [1, 2]]
    assert x.kthvalue(1, keepdim=True).values.shape == (2, 1)
    assert x.median().item() == 2.0 and x.median(1).indices.tolist() == [3, 0]
    assert x.nanmedian(0).values.tolist() == [0.0, 1.0, 3.0, -1.0]
    assert x.mode(1).values.tolist() == [1.0, 9.0] and x.mode(1).indices.tolist() == [1, 2]
    assert x.msort().tolist() == [[0.0, 1.0, 3.0, -1.0], [4.0, 9.0, 9.0, 2.0]]
    assert x.argsort(1, True).tolist() == [[0, 2, 3, 1], [1, 2, 0, 3]]


# ---------------------------------------------------------------------- topk of a few among many (the partition path)
@requires_torch
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("shape,dim", [((6, 500), -1), ((400, 3), 0), ((1000,), 0)])
def test_topk_few_of_many_matches_torch(shape, dim, largest):
    a = np.random.default_rng(3).standard_normal(shape)  # no ties
    for k in (1, 7, 40):
        xe, xt = ember.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
        e, t = ember.topk(xe, k, dim, largest), torch.topk(xt, k, dim, largest)
        np.testing.assert_array_equal(e.values.detach().numpy(), t.values.detach().numpy())
        np.testing.assert_array_equal(e.indices.numpy(), t.indices.numpy())
        g = np.random.default_rng(4).standard_normal(tuple(e.values.shape))
        e.values.backward(ember.tensor(g))
        t.values.backward(torch.tensor(g))
        np.testing.assert_array_equal(xe.grad.numpy(), xt.grad.numpy())


def test_topk_few_of_many_with_ties_and_nan():
    a = np.array([3.0, 1.0, np.nan, 3.0, 2.0, 3.0] * 20)
    v, i = ember.topk(ember.tensor(a), 5)
    assert np.isnan(v.numpy()[:5]).all() and (np.isnan(a[i.numpy()])).all()  # NaN is the largest
    v, i = ember.topk(ember.tensor(a), 5, largest=False)
    assert v.tolist() == [1.0] * 5 and (a[i.numpy()] == 1.0).all() and len(set(i.tolist())) == 5
    assert i.tolist() == sorted(i.tolist())  # equal values in their original order
