"""Tensor factories and random sampling (ember/_creation.py), and Tensor basics: conversion, metadata, repr."""
import re

import numpy as np
import pytest
from helpers import requires_torch, torch

import ember


def _same_dtype(e, t) -> bool:
    return str(e.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


# ---------------------------------------------------------------------- tensor(): dtype inference and copying
@pytest.mark.parametrize("data,dtype", [
    ([1.0, 2.0], "float32"), ([1, 2], "int64"), ([True, False], "bool"), ([1, 2.5, True], "float32"),
    ([True, 2], "int64"), (3.5, "float32"), (7, "int64"), (False, "bool"), ([], "float32"), ([[1], [2]], "int64"),
    (np.array([1.0, 2.0]), "float64"), (np.array([1, 2], np.int32), "int32"), (np.array([1.0], np.float16), "float16"),
    (np.float64(1.5), "float64"), (np.int32(3), "int32"), (np.array([True]), "bool"), (np.array(2, np.uint8), "uint8"),
])
def test_tensor_dtype_inference(data, dtype):
    t = ember.tensor(data)
    assert t.dtype is getattr(ember, dtype)
    if torch is not None:
        assert _same_dtype(t, torch.tensor(data)) and tuple(t.shape) == tuple(torch.tensor(data).shape)


def test_tensor_copies_data():
    a = np.array([1.0, 2.0])
    t = ember.tensor(a)
    a[0] = 100.0
    assert t.tolist() == [1.0, 2.0]
    u = ember.tensor(t)
    t._data[1] = -1.0
    assert u.tolist() == [1.0, 2.0]
    lst = [1, 2]
    v = ember.tensor(lst)
    lst[0] = 9
    assert v.tolist() == [1, 2]


def test_tensor_with_dtype_and_requires_grad():
    t = ember.tensor([1, 2], dtype=ember.float64, requires_grad=True)
    assert t.dtype is ember.float64 and t.requires_grad and t.is_leaf and t.grad is None
    assert ember.tensor([1.7, -2.2], dtype=ember.int64).tolist() == [1, -2]


def test_tensor_of_tensors_list():
    t = ember.tensor([ember.tensor(1.0), ember.tensor(2.0)])
    assert t.tolist() == [1.0, 2.0] and t.shape == (2,)


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[1], [2, 3]], [[[1, 2]], [[3]]]])
def test_non_rectangular_lists_raise(data):
    with pytest.raises(ValueError, match="tensor.*rectangular"):
        ember.tensor(data)


@pytest.mark.parametrize("data", ["abc", ["a", "b"], object(), {1: 2}, None, [1, None], 1 + 2j])
def test_unsupported_data_raises(data):
    with pytest.raises(TypeError, match="tensor"):
        ember.tensor(data)


def test_requires_grad_on_int_tensor_raises():
    with pytest.raises(RuntimeError, match="floating point"):
        ember.tensor([1, 2], requires_grad=True)
    with pytest.raises(RuntimeError, match="floating point"):
        ember.tensor([1, 2]).requires_grad_()
    with pytest.raises(RuntimeError, match="floating point"):
        ember.zeros(2, dtype=ember.int32, requires_grad=True)


# ---------------------------------------------------------------------- as_tensor, from_numpy
def test_as_tensor_shares_memory_when_it_can():
    a = np.array([1.0, 2.0])
    t = ember.as_tensor(a)
    a[0] = 5.0
    assert t.tolist() == [5.0, 2.0] and t.dtype is ember.float64
    c = ember.as_tensor(a, dtype=ember.float32)  # a cast copies
    a[1] = 7.0
    assert c.tolist() == [5.0, 2.0] and c.dtype is ember.float32
    e = ember.tensor([1.0])
    assert ember.as_tensor(e) is e and ember.as_tensor([1, 2]).dtype is ember.int64


def test_from_numpy_shares_memory_both_ways():
    a = np.arange(6.0).reshape(2, 3)
    t = ember.from_numpy(a)
    a[0, 0] = -1.0
    assert t.tolist()[0][0] == -1.0
    t._data[1, 2] = 42.0
    assert a[1, 2] == 42.0 and t.dtype is ember.float64 and t.shape == (2, 3)
    assert np.shares_memory(t.numpy(), a)


def test_from_numpy_keeps_strides():
    a = np.arange(12.0).reshape(3, 4).T
    t = ember.from_numpy(a)
    assert t.shape == (4, 3) and not t.is_contiguous() and t.tolist() == a.tolist()


@pytest.mark.parametrize("bad,exc", [([1, 2], TypeError), (np.array([1j]), TypeError), (np.array(["a"]), TypeError)])
def test_from_numpy_bad_input(bad, exc):
    with pytest.raises(exc, match="from_numpy"):
        ember.from_numpy(bad)


# ---------------------------------------------------------------------- filled factories
@requires_torch
@pytest.mark.parametrize("call", [
    "zeros(2, 3)", "zeros((2, 3))", "zeros([4])", "zeros(())", "zeros(0, 2)", "ones(3, dtype=L.int32)",
    "ones(2, 2, dtype=L.float64)", "full((2, 2), 3)", "full((2,), 1.5)", "full((2,), True)",
    "full((3,), 2, dtype=L.float64)", "eye(3)", "eye(2, 4)", "eye(3, 1, dtype=L.int64)", "eye(0)",
    "zeros(2, dtype=L.bool)", "ones(1, 0)",
])
def test_filled_factories_as_pytorch(call):
    e, t = eval("L." + call, {"L": ember}), eval("L." + call, {"L": torch})
    assert _same_dtype(e, t) and tuple(e.shape) == tuple(t.shape)
    np.testing.assert_array_equal(e.numpy(), t.numpy())


def test_empty_shape_and_dtype():
    e = ember.empty(2, 3, dtype=ember.float64)
    assert e.shape == (2, 3) and e.dtype is ember.float64


def test_factories_requires_grad():
    rg = dict(requires_grad=True)
    for t in (ember.zeros(2, **rg), ember.ones(2, **rg), ember.full((2,), 1.0, **rg), ember.eye(2, **rg),
              ember.arange(3.0, **rg), ember.linspace(0, 1, 3, **rg), ember.logspace(0, 1, 3, **rg), ember.rand(2, **rg),
              ember.randn(2, **rg), ember.empty(2, **rg)):
        assert t.requires_grad and t.is_leaf


@pytest.mark.parametrize("call", ["zeros(-1)", "zeros(2, -3)", "ones((2, -1))", "empty(-2)", "full((-1,), 2.0)",
                                  "rand(-1)", "randn(3, -1)"])
def test_negative_sizes_raise(call):
    name = call.split("(")[0]
    with pytest.raises(RuntimeError, match=rf"{name}.*negative dimension"):
        eval("ember." + call)


@pytest.mark.parametrize("call", ["zeros(2.5)", "ones('a')", "empty(None)", "rand([2, 1.5])"])
def test_non_integer_sizes_raise(call):
    with pytest.raises(TypeError, match=call.split("(")[0] + r".*size"):
        eval("ember." + call)


def test_eye_negative_raises():
    with pytest.raises(RuntimeError, match="eye.*non-negative"):
        ember.eye(-1)


@pytest.mark.parametrize("fn", ["zeros", "ones", "empty", "rand", "randn"])
def test_bad_dtype_name_lists_valid_names(fn):
    with pytest.raises(TypeError, match="flaot32.*valid names are: .*float32"):
        getattr(ember, fn)(2, dtype="flaot32")


# ---------------------------------------------------------------------- ranges
ARANGES = [(5,), (2.5,), (0, 1, 0.1), (1, 2.5, 0.5), (10, 0, -3), (0.0, 1.0, 0.3), (-1, 1, 0.25), (0, 10, 3),
           (1.0, 0.0, -0.1), (0, 1, 1 / 3), (0.5, 10.3, 0.7), (-5, -10, -1), (0, 0, 1), (0.1, 0.9, 0.2),
           (1e-3, 1, 0.0777), (0, 2.2, 0.1), (3, 7.1)]


@requires_torch
@pytest.mark.parametrize("dtype", [None, "float64", "float32"])
@pytest.mark.parametrize("args", ARANGES, ids=str)
def test_arange_as_pytorch(args, dtype):
    e = ember.arange(*args, **({} if dtype is None else {"dtype": getattr(ember, dtype)}))
    t = torch.arange(*args, **({} if dtype is None else {"dtype": getattr(torch, dtype)}))
    assert e.shape == tuple(t.shape) and _same_dtype(e, t)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6, atol=1e-7)


@requires_torch
@pytest.mark.parametrize("args", [(3, 7.1), (2.5,), (0, 10, 3), (10, 0, -3), (-3.7, 4)], ids=str)
def test_arange_integer_dtype_truncates_bounds(args):
    e, t = ember.arange(*args, dtype=ember.int64), torch.arange(*args, dtype=torch.int64)
    assert e.tolist() == t.tolist() and e.dtype is ember.int64


def test_arange_tensor_bounds():
    assert ember.arange(ember.tensor(3)).tolist() == [0, 1, 2]


@pytest.mark.parametrize("args,match", [((0, 10, 0), "step must be nonzero"), ((0, -10, 1), "inconsistent with step sign"),
                                        ((1, 5, 0.5, "int64"), "step must be nonzero")])
def test_arange_bad_arguments(args, match):
    with pytest.raises(RuntimeError, match="arange.*" + match):
        ember.arange(*args[:3], dtype=args[3] if len(args) > 3 else None)


@requires_torch
@pytest.mark.parametrize("dtype", [None, "float64", "int64"])
@pytest.mark.parametrize("args", [(0, 1, 5), (0, 1, 1), (0, 1, 0), (-2, 3.5, 7), (1, 0, 4), (0, 10, 5)], ids=str)
def test_linspace_as_pytorch(args, dtype):
    e = ember.linspace(*args, **({} if dtype is None else {"dtype": getattr(ember, dtype)}))
    t = torch.linspace(*args, **({} if dtype is None else {"dtype": getattr(torch, dtype)}))
    assert e.shape == tuple(t.shape) and _same_dtype(e, t)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


@requires_torch
@pytest.mark.parametrize("kw", [{}, {"base": 2.0}, {"dtype": "float64"}, {"base": 3, "dtype": "float64"}], ids=str)
@pytest.mark.parametrize("args", [(0, 3, 4), (-2, 3.5, 7), (1, 0, 1), (0, 1, 0)], ids=str)
def test_logspace_as_pytorch(args, kw):
    ek = {k: getattr(ember, v) if k == "dtype" else v for k, v in kw.items()}
    tk = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
    e, t = ember.logspace(*args, **ek), torch.logspace(*args, **tk)
    assert e.shape == tuple(t.shape) and _same_dtype(e, t)
    np.testing.assert_allclose(e.numpy(), t.numpy(), rtol=1e-6)


def test_linspace_negative_steps_raises():
    with pytest.raises(RuntimeError, match="linspace.*non-negative"):
        ember.linspace(0, 1, -1)


# ---------------------------------------------------------------------- *_like
@pytest.mark.parametrize("fn,check", [
    ("zeros_like", lambda r: (r.numpy() == 0).all()), ("ones_like", lambda r: (r.numpy() == 1).all()),
    ("empty_like", lambda r: True), ("rand_like", lambda r: ((r.numpy() >= 0) & (r.numpy() < 1)).all()),
    ("randn_like", lambda r: np.isfinite(r.numpy()).all()),
])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_like_factories(fn, check, dtype):
    src = ember.ones(2, 3, dtype=getattr(ember, dtype), requires_grad=True)
    r = getattr(ember, fn)(src)
    assert r.shape == (2, 3) and r.dtype is src.dtype and not r.requires_grad and check(r)
    assert getattr(ember, fn)(src, dtype=ember.float16).dtype is ember.float16
    assert getattr(ember, fn)(src, requires_grad=True).requires_grad


def test_full_like_and_randint_like_keep_dtype():
    src = ember.ones(2, dtype=ember.int32)
    assert ember.full_like(src, 2.7).tolist() == [2, 2] and ember.full_like(src, 2.7).dtype is ember.int32
    r = ember.randint_like(src, 3, 6)
    assert r.dtype is ember.int32 and ((r.numpy() >= 3) & (r.numpy() < 6)).all()
    assert ember.zeros_like(src).dtype is ember.int32


def test_new_factories():
    x = ember.ones(2, dtype=ember.float64)
    assert x.new_zeros(3).dtype is ember.float64 and x.new_ones((2, 2)).shape == (2, 2)
    assert x.new_full((2,), 4).tolist() == [4.0, 4.0] and x.new_tensor([1, 2]).dtype is ember.float64
    assert x.new_empty(1, dtype=ember.int32).dtype is ember.int32


# ---------------------------------------------------------------------- random
@pytest.mark.parametrize("fn", ["rand", "randn"])
def test_rand_randn_shapes_dtypes(fn):
    f = getattr(ember, fn)
    assert f(2, 3).shape == (2, 3) and f((4,)).shape == (4,) and f(()).shape == () and f(0).shape == (0,)
    assert f(2).dtype is ember.float32 and f(2, dtype=ember.float64).dtype is ember.float64
    assert f(2, dtype=ember.float16).dtype is ember.float16


def test_rand_range_and_randn_moments():
    ember.manual_seed(0)
    u = ember.rand(20000, dtype=ember.float64).numpy()
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    n = ember.randn(20000, dtype=ember.float64).numpy()
    assert abs(n.mean()) < 0.03 and abs(n.std() - 1) < 0.03


@pytest.mark.parametrize("fn", ["rand", "randn"])
def test_rand_integer_dtype_raises(fn):
    with pytest.raises(NotImplementedError, match=f"{fn}.*floating"):
        getattr(ember, fn)(2, dtype=ember.int64)


@pytest.mark.parametrize("fn", [lambda: ember.rand(5), lambda: ember.randn(2, 2), lambda: ember.randint(0, 100, (6,)),
                                lambda: ember.randperm(10), lambda: ember.bernoulli(ember.full((8,), 0.5)),
                                lambda: ember.multinomial(ember.tensor([0.1, 0.2, 0.7]), 4, replacement=True),
                                lambda: ember.normal(0.0, 1.0, (3,)), lambda: ember.rand_like(ember.ones(3))])
def test_manual_seed_reproducibility(fn):
    ember.manual_seed(123)
    a = fn().tolist()
    ember.manual_seed(123)
    assert fn().tolist() == a
    ember.manual_seed(124)
    b, c = fn().tolist(), fn().tolist()
    assert b != a or c != a  # a different seed (and the next draw) differ


def test_rng_state_roundtrip_and_initial_seed():
    ember.manual_seed(7)
    assert ember.initial_seed() == 7
    state = ember.get_rng_state()
    a = ember.rand(4).tolist()
    ember.set_rng_state(state)
    assert ember.rand(4).tolist() == a
    s = ember.seed()
    assert isinstance(s, int) and ember.initial_seed() == s


def test_generator_objects_are_independent():
    g1, g2 = ember.Generator().manual_seed(5), ember.Generator().manual_seed(5)
    ember.manual_seed(0)
    a = ember.rand(3, generator=g1).tolist()
    ember.rand(10)  # the global generator does not disturb g2
    assert ember.rand(3, generator=g2).tolist() == a
    assert ember.randn(2, generator=g1).tolist() == ember.randn(2, generator=g2).tolist()
    assert ember.randint(0, 9, (4,), generator=g1).tolist() == ember.randint(0, 9, (4,), generator=g2).tolist()
    assert ember.randperm(6, generator=g1).tolist() == ember.randperm(6, generator=g2).tolist()
    assert g1.initial_seed() == 5 and isinstance(g1.manual_seed(1), ember.Generator)
    st = g1.get_state()
    x = ember.rand(2, generator=g1).tolist()
    g1.set_state(st)
    assert ember.rand(2, generator=g1).tolist() == x


@pytest.mark.parametrize("args,kw,lo,hi,shape", [((10, (50,)), {}, 0, 10, (50,)), ((-3, 4, (5, 6)), {}, -3, 4, (5, 6)),
                                                 ((5,), {"size": (7,)}, 0, 5, (7,)), ((2, 3, ()), {}, 2, 3, ())])
def test_randint(args, kw, lo, hi, shape):
    r = ember.randint(*args, **kw)
    assert r.shape == shape and r.dtype is ember.int64
    assert ((r.numpy() >= lo) & (r.numpy() < hi)).all()


def test_randint_dtype_and_errors():
    assert ember.randint(0, 3, (2,), dtype=ember.int32).dtype is ember.int32
    assert ember.randint(0, 3, (2,), dtype=ember.float32).dtype is ember.float32
    with pytest.raises(RuntimeError, match="randint.*from.*to"):
        ember.randint(5, 2, (3,))
    with pytest.raises(TypeError, match="randint.*size"):
        ember.randint(5)


def test_randint_covers_range():
    ember.manual_seed(0)
    assert sorted(set(ember.randint(0, 4, (400,)).tolist())) == [0, 1, 2, 3]


def test_randperm():
    ember.manual_seed(3)
    p = ember.randperm(20)
    assert p.dtype is ember.int64 and sorted(p.tolist()) == list(range(20)) and p.tolist() != list(range(20))
    assert ember.randperm(0).shape == (0,) and ember.randperm(5, dtype=ember.int32).dtype is ember.int32
    with pytest.raises(RuntimeError, match="randperm.*non-negative"):
        ember.randperm(-1)


def test_bernoulli():
    ember.manual_seed(0)
    p = ember.tensor([0.0, 1.0, 0.3], dtype=ember.float64)
    draws = np.stack([ember.bernoulli(p).numpy() for _ in range(2000)])
    assert draws.dtype == np.float64 and set(np.unique(draws)) <= {0.0, 1.0}
    assert (draws[:, 0] == 0).all() and (draws[:, 1] == 1).all() and abs(draws[:, 2].mean() - 0.3) < 0.04
    assert ember.bernoulli(ember.zeros(3), p=1.0).tolist() == [1.0] * 3


@pytest.mark.parametrize("bad", [[0.5, 1.5], [-0.1, 0.2], [0.5, float("nan")]])
def test_bernoulli_bad_probabilities(bad):
    with pytest.raises(RuntimeError, match="bernoulli.*\\[0, 1\\]"):
        ember.bernoulli(ember.tensor(bad))


def test_multinomial():
    ember.manual_seed(0)
    w = ember.tensor([0.0, 1.0, 3.0])
    s = ember.multinomial(w, 2000, replacement=True).numpy()
    assert s.dtype == np.int64 and s.shape == (2000,) and 0 not in s and abs((s == 2).mean() - 0.75) < 0.04
    no_rep = ember.multinomial(ember.tensor([[1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 1.0, 5.0]]), 3)
    assert no_rep.shape == (2, 3)
    for row in no_rep.tolist():
        assert len(set(row)) == 3
    assert 0 not in no_rep.tolist()[1]


@pytest.mark.parametrize("w,n,rep,match", [([0.2, 0.8], 3, False, "without replacement"),
                                           ([-0.2, 0.8], 1, False, "element < 0"),
                                           ([0.0, 0.0], 1, True, "sum of probabilities"),
                                           ([float("inf"), 1.0], 1, True, "inf")])
def test_multinomial_errors(w, n, rep, match):
    with pytest.raises(RuntimeError, match="multinomial.*" + match):
        ember.multinomial(ember.tensor(w), n, replacement=rep)


# ---------------------------------------------------------------------- Tensor basics
def test_metadata():
    t = ember.zeros(2, 3, 4, dtype=ember.float64)
    assert t.shape == (2, 3, 4) and t.size() == (2, 3, 4) and t.size(1) == 3 and t.size(-1) == 4
    assert t.dim() == 3 and t.ndim == 3 and t.numel() == 24 and t.nelement() == 24 and t.element_size() == 8
    assert t.dtype is ember.float64 and t.device == ember.device("cpu") and str(t.device) == "cpu"
    assert t.is_floating_point() and not t.is_cuda and t.is_contiguous() and t.is_leaf and t.grad_fn is None
    with pytest.raises(IndexError, match="size.*Dimension out of range"):
        t.size(3)


def test_item_tolist_numpy_array():
    assert ember.tensor(2.5).item() == 2.5 and isinstance(ember.tensor(3).item(), int)
    assert isinstance(ember.tensor(True).item(), bool) and ember.tensor([[7]]).item() == 7
    assert ember.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]] and ember.tensor(1.5).tolist() == 1.5
    t = ember.tensor([1.0, 2.0])
    assert np.shares_memory(t.numpy(), t._data) and np.asarray(t).dtype == np.float32
    assert np.array(t, dtype=np.float64).dtype == np.float64
    assert float(ember.tensor([2.5])) == 2.5 and int(ember.tensor(3.9)) == 3
    with pytest.raises(RuntimeError, match="2 elements cannot be converted to Scalar"):
        t.item()


def test_numpy_of_requires_grad_tensor_raises():
    t = ember.ones(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="requires grad.*detach"):
        t.numpy()
    with pytest.raises(RuntimeError, match="requires grad"):
        np.asarray(t)
    assert t.detach().numpy().tolist() == [1.0, 1.0]


def test_len_iter_and_zero_d():
    t = ember.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(t) == 3
    s = ember.tensor(1.0)
    with pytest.raises(TypeError, match="len.*0-d"):
        len(s)
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(s)


def test_bool_conversion():
    assert bool(ember.tensor([1.0])) and not bool(ember.tensor(0))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(ember.tensor([1, 2]))
    with pytest.raises(RuntimeError, match="no value is ambiguous"):
        bool(ember.tensor([]))


def test_index_conversion():
    assert [10, 20, 30][ember.tensor(1)] == 20
    with pytest.raises(TypeError, match="integer tensors of a single element"):
        [1, 2][ember.tensor(1.0)]


def test_format_spec():
    assert f"{ember.tensor(2.5):.2f}" == "2.50" and f"{ember.tensor([1.0])}" == "tensor([1.])"


# ---------------------------------------------------------------------- repr, character for character like PyTorch's
REPRS = [
    "L.tensor([2.0, 7.5, 14.6667])", "L.tensor([-1.0, 0.0])", "L.tensor([0.0, 0.0])", "L.tensor([1.0, 2.0, 3.0])",
    "L.tensor([float('nan'), 1.0, float('inf')])", "L.tensor([float('-inf'), 2.5])", "L.tensor([1e-5, 1.0])",
    "L.tensor([1e10, 1.0])", "L.tensor([100000.0, 1.0])", "L.tensor([1e-4, 1.0])", "L.tensor([123456789.0, 1])",
    "L.tensor([-0.0, 1])", "L.tensor([-3.25])", "L.tensor(0.0)", "L.tensor(-0.5)", "L.tensor(float('nan'))",
    "L.tensor(1e-20)", "L.tensor(3)", "L.tensor(True)", "L.tensor([True, False])", "L.tensor([[True], [False]])",
    "L.tensor([[1, -20], [3, 4]])", "L.tensor([1, 2, 3], dtype=L.int32)", "L.arange(12, dtype=L.uint8)",
    "L.tensor([1.5, 2], dtype=L.float16)", "L.tensor([], dtype=L.int64)", "L.tensor([])", "L.zeros(0, 3)",
    "L.tensor([[]])", "L.ones(2, 0, dtype=L.int32)", "L.tensor([], dtype=L.bool)", "L.zeros(2, 3, 4, dtype=L.float64)",
    "L.ones(2, 2, dtype=L.float64, requires_grad=True)", "L.tensor([1.0, 2.0], requires_grad=True)",
    "L.arange(2000.0)", "L.arange(1002.0) / 7", "L.arange(40.0) * 1.5", "L.tensor([1e-9, 0.0])",
    "L.from_numpy(np.arange(30.0).reshape(2, 3, 5) / 7)", "L.from_numpy(np.arange(1200).reshape(40, 30))",
    "L.from_numpy(np.arange(1200).reshape(2, 20, 30))", "L.from_numpy(np.arange(300.0, dtype=np.float32).reshape(3, 100) / 3)",
    "L.from_numpy(np.arange(100.0, dtype=np.float32).reshape(10, 10) * 1.5)",
    "L.tensor([[1e-5, 3.0], [2, 4]], dtype=L.float64, requires_grad=True)",
    "L.tensor([1.0, 2.0], dtype=L.float64, requires_grad=True) * 2", "L.tensor([0.5, 1.5], requires_grad=True).exp()",
]


@requires_torch
@pytest.mark.parametrize("expr", REPRS)
def test_repr_matches_pytorch(expr):
    e, t = repr(eval(expr, {"L": ember, "np": np})), repr(eval(expr, {"L": torch, "np": np}))
    # grad_fn names: PyTorch numbers its backward classes (MulBackward0), ember does not
    t = re.sub(r"(Backward)\d+", r"\1", t.replace("torch.", "ember."))
    assert e == t


def test_repr_exact_strings():
    assert repr(ember.tensor([2.0, 7.5, 14.6667])) == "tensor([ 2.0000,  7.5000, 14.6667])"
    assert repr(ember.tensor([1, 2], dtype=ember.int32)) == "tensor([1, 2], dtype=ember.int32)"
    assert repr(ember.tensor(1.0, requires_grad=True)) == "tensor(1., requires_grad=True)"
    assert repr(ember.tensor([True, False])) == "tensor([ True, False])"
    assert repr(ember.tensor([1.0, 2.0], requires_grad=True) * 2) == "tensor([2., 4.], grad_fn=<MulBackward>)"
    assert repr(ember.tensor([], dtype=ember.float64)) == "tensor([], dtype=ember.float64)"
    assert str(ember.tensor([0.25])) == "tensor([0.2500])"
