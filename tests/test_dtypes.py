"""dtypes (ember/_dtype.py) and PyTorch's type promotion, checked against PyTorch programmatically."""
import operator

import numpy as np
import pytest
from helpers import requires_torch, torch

import ember

DTYPES = ["bool", "uint8", "int32", "int64", "float16", "float32", "float64"]
OPS = {
    "add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv,
    "floor_divide": operator.floordiv, "remainder": operator.mod,
    "lt": operator.lt, "le": operator.le, "gt": operator.gt, "ge": operator.ge, "eq": operator.eq, "ne": operator.ne,
}
FUNCS = ["add", "mul", "div", "floor_divide", "remainder", "eq", "lt"]  # also called as lib.<name>(a, b)


def _make(lib, dtype: str, zero_d: bool, seed: int):
    vals = [True, True, True] if dtype == "bool" else [seed + 1, seed + 2, seed + 3]
    return lib.tensor(vals[0] if zero_d else vals, dtype=getattr(lib, dtype))


def _run(lib, fn):
    """(dtype name, values) of fn's result, or the exception type it raised."""
    try:
        r = fn(lib)
    except Exception as e:  # the exception types are compared with PyTorch's
        return type(e), None
    return str(r.dtype).split(".")[-1], np.asarray(r.tolist(), np.float64)


def _check_same(e, t, values: bool = True) -> None:
    if isinstance(t[0], type):
        assert isinstance(e[0], type) and issubclass(e[0], t[0]), (e[0], t[0])
        return
    assert e[0] == t[0]
    if values:
        np.testing.assert_allclose(e[1], t[1], rtol=2e-3 if "float16" in e[0] else 1e-6)


@requires_torch
@pytest.mark.parametrize("b", DTYPES)
@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("op", sorted(OPS))
def test_tensor_tensor_promotion(op, a, b):
    f = OPS[op]
    for za, zb in [(False, False), (True, False), (False, True), (True, True)]:
        res = [_run(lib, lambda L: f(_make(L, a, za, 1), _make(L, b, zb, 0))) for lib in (ember, torch)]
        _check_same(*res)


@requires_torch
@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("op", FUNCS)
def test_function_form_promotion(op, a):
    for b in DTYPES:
        res = [_run(lib, lambda L: getattr(L, op)(_make(L, a, False, 1), _make(L, b, True, 0))) for lib in (ember, torch)]
        _check_same(*res)


@requires_torch
@pytest.mark.parametrize("scalar", [2, 2.5, True, -3], ids=repr)
@pytest.mark.parametrize("a", DTYPES)
@pytest.mark.parametrize("op", sorted(OPS))
def test_tensor_scalar_promotion(op, a, scalar):
    f = OPS[op]
    for zero_d in (False, True):
        for reflected in (False, True):
            def fn(L):
                t = _make(L, a, zero_d, 1)
                return f(scalar, t) if reflected else f(t, scalar)
            # PyTorch wraps -3 to 253 before comparing with a uint8 tensor; ember compares the true values
            wraps = a == "uint8" and scalar == -3 and op in ("lt", "le", "gt", "ge")
            _check_same(_run(ember, fn), _run(torch, fn), values=not wraps)


def test_uint8_arithmetic_wraps_and_comparison_is_exact():
    t = ember.tensor([2, 3, 4], dtype=ember.uint8)
    assert (t + -3).tolist() == [255, 0, 1] and (t * 300).tolist() == [88, 132, 176]
    assert (t < -3).tolist() == [False] * 3 and (t > -3).tolist() == [True] * 3


def test_integer_true_division_gives_float32():
    assert (ember.tensor([1, 2]) / ember.tensor([2, 4])).dtype == ember.float32
    assert (ember.tensor([1, 2], dtype=ember.int32) / 2).dtype == ember.float32
    assert (3 / ember.tensor([1, 2], dtype=ember.uint8)).dtype == ember.float32
    assert (ember.tensor([1, 2]) / ember.tensor(2)).tolist() == [0.5, 1.0]
    assert ember.true_divide(ember.tensor([1]), ember.tensor([3], dtype=ember.int32)).dtype == ember.float32


def test_float64_integer_division_follows_default_dtype():
    ember.set_default_dtype(ember.float64)
    try:
        assert (ember.tensor([1, 2]) / 2).dtype == ember.float64
        assert ember.tensor([1.5]).dtype == ember.float64
        assert (ember.tensor([1, 2]) * 0.5).dtype == ember.float64
    finally:
        ember.set_default_dtype(ember.float32)
    assert ember.tensor([1.5]).dtype == ember.float32


# ---------------------------------------------------------------------- comparisons and bitwise logic
@requires_torch
@pytest.mark.parametrize("op", ["&", "|", "^"])
@pytest.mark.parametrize("b", ["bool", "uint8", "int32", "int64"])
@pytest.mark.parametrize("a", ["bool", "uint8", "int32", "int64"])
def test_bitwise_ops(a, b, op):
    def fn(L):
        x = L.tensor([True, False, True, False] if a == "bool" else [5, 3, 0, 12], dtype=getattr(L, a))
        y = L.tensor([True, True, False, False] if b == "bool" else [6, 1, 7, 10], dtype=getattr(L, b))
        return eval(f"x {op} y")
    _check_same(_run(ember, fn), _run(torch, fn))


@requires_torch
@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64"])
def test_invert_and_scalar_bitwise(dtype):
    for fn in (lambda L: ~L.tensor([1, 0, 5], dtype=getattr(L, dtype)),
               lambda L: L.tensor([1, 0, 5], dtype=getattr(L, dtype)) & 1,
               lambda L: True | L.tensor([1, 0, 5], dtype=getattr(L, dtype)),
               lambda L: L.bitwise_not(L.tensor([1, 0, 5], dtype=getattr(L, dtype))),
               lambda L: L.logical_not(L.tensor([1, 0, 5], dtype=getattr(L, dtype))),
               lambda L: L.logical_and(L.tensor([1, 0, 5], dtype=getattr(L, dtype)), L.tensor([1, 1, 0])),
               lambda L: L.logical_xor(L.tensor([1, 0, 5], dtype=getattr(L, dtype)), L.tensor([1.0, 1.0, 0.0]))):
        _check_same(_run(ember, fn), _run(torch, fn))


@pytest.mark.parametrize("expr", ["~x", "x & m", "m | x", "x ^ 1", "x & 1.5"])
def test_bitwise_on_float_raises_type_error(expr):
    x, m = ember.tensor([1.0, 2.0]), ember.tensor([True, False])  # noqa: F841 (used by eval)
    with pytest.raises(TypeError, match="bitwise|~"):
        eval(expr)


def test_comparisons_give_bool_and_never_require_grad():
    x = ember.tensor([1.0, 2.0, 3.0], requires_grad=True)
    for r in (x < 2, x <= 2, x > 2, x >= 2, x == 2, x != 2, 2 < x, ember.eq(x, x)):
        assert r.dtype == ember.bool and not r.requires_grad
    assert (x == 2).tolist() == [False, True, False]
    assert (x.detach() != ember.tensor([1.0, 0.0, 3.0])).tolist() == [False, True, False]


def test_comparison_with_foreign_objects_as_pytorch():
    t = ember.ones(2)
    assert (t == None) is False and (t != "a") is True and t not in [None, "a"]  # noqa: E711
    with pytest.raises(TypeError, match="<"):
        t < "a"  # noqa: B015
    with pytest.raises(TypeError, match="eq"):
        ember.eq(t, "a")


# ---------------------------------------------------------------------- the dtype objects
@pytest.mark.parametrize("name", DTYPES + ["int8", "int16"])
def test_dtype_attributes_match_pytorch(name):
    d = getattr(ember, name)
    assert repr(d) == f"ember.{name}" and d.name == name
    if torch is not None:
        td = getattr(torch, name)
        assert d.is_floating_point == td.is_floating_point and d.is_signed == td.is_signed and d.itemsize == td.itemsize


def test_dtype_aliases():
    assert ember.float is ember.float32 and ember.double is ember.float64 and ember.half is ember.float16
    assert ember.long is ember.int64 and ember.int is ember.int32 and ember.short is ember.int16


@pytest.mark.parametrize("spelling,expected", [("float32", "float32"), ("torch.float64", "float64"), ("ember.int32", "int32"),
                                               ("double", "float64"), ("long", "int64"), (float, "float64"),
                                               (int, "int64"), (bool, "bool"), (np.float16, "float16"),
                                               (np.dtype("uint8"), "uint8")])
def test_dtype_spellings_accepted(spelling, expected):
    assert ember.zeros(1, dtype=spelling).dtype is getattr(ember, expected)


@pytest.mark.parametrize("bad", ["flaot32", "complex64", "float128"])
def test_bad_dtype_name_lists_valid_names(bad):
    with pytest.raises(TypeError, match="valid names are: .*float32"):
        ember.zeros(2, dtype=bad)


@pytest.mark.parametrize("bad", [np.complex64, object, 3])
def test_bad_dtype_object(bad):
    with pytest.raises(TypeError, match="dtype"):
        ember.zeros(2, dtype=bad)


def test_set_default_dtype_rejects_ints():
    with pytest.raises(TypeError, match="set_default_dtype.*floating"):
        ember.set_default_dtype(ember.int64)
    assert ember.get_default_dtype() is ember.float32


def test_dtype_pickles_as_singleton():
    import pickle
    assert pickle.loads(pickle.dumps(ember.float64)) is ember.float64
