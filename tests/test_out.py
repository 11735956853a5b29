"""`out=` (ember/ops/_out.py): the keyword PyTorch gives many functions, added to ember's at bind time.

The result lands in `out` (cast when its dtype category allows, resized when its shape differs), `out` is
returned and its version counter moves; several results go to a tuple of tensors; autograd refuses it. Each
case runs on ember and PyTorch and compares what `out` holds.
"""
import inspect
import warnings

import numpy as np
import pytest
from helpers import raises_like_torch, rand, requires_torch, torch

import ember
from ember.ops import _out

A, B = rand(3, 4, seed=1).astype(np.float32), rand(3, 4, seed=2).astype(np.float32)


def _t(m, a):
    return m.tensor(a)


# name -> (call(m, out), make_out(m)): out already of the result's shape and dtype
CASES = {
    "add": (lambda m, o: m.add(_t(m, A), _t(m, B), alpha=2, out=o), lambda m: m.empty(3, 4)),
    "sub": (lambda m, o: m.sub(_t(m, A), 1.5, out=o), lambda m: m.empty(3, 4)),
    "mul": (lambda m, o: m.mul(_t(m, A), _t(m, B), out=o), lambda m: m.empty(3, 4)),
    "div": (lambda m, o: m.div(_t(m, A), _t(m, B) + 3, out=o), lambda m: m.empty(3, 4)),
    "matmul": (lambda m, o: m.matmul(_t(m, A), _t(m, B).t(), out=o), lambda m: m.empty(3, 3)),
    "mm": (lambda m, o: m.mm(_t(m, A), _t(m, B).t(), out=o), lambda m: m.empty(3, 3)),
    "bmm": (lambda m, o: m.bmm(_t(m, A)[None], _t(m, B).t()[None], out=o), lambda m: m.empty(1, 3, 3)),
    "cat": (lambda m, o: m.cat([_t(m, A), _t(m, B)], 1, out=o), lambda m: m.empty(3, 8)),
    "stack": (lambda m, o: m.stack([_t(m, A), _t(m, B)], out=o), lambda m: m.empty(2, 3, 4)),
    "sum": (lambda m, o: m.sum(_t(m, A), 1, out=o), lambda m: m.empty(3)),
    "mean": (lambda m, o: m.mean(_t(m, A), (0, 1), keepdim=True, out=o), lambda m: m.empty(1, 1)),
    "exp": (lambda m, o: m.exp(_t(m, A), out=o), lambda m: m.empty(3, 4)),
    "log": (lambda m, o: m.log(_t(m, A) + 2, out=o), lambda m: m.empty(3, 4)),
    "sqrt": (lambda m, o: m.sqrt(_t(m, A) + 2, out=o), lambda m: m.empty(3, 4)),
    "clamp": (lambda m, o: m.clamp(_t(m, A), -0.5, 0.5, out=o), lambda m: m.empty(3, 4)),
    "where": (lambda m, o: m.where(_t(m, A) > 0, _t(m, A), _t(m, B), out=o), lambda m: m.empty(3, 4)),
    "eq": (lambda m, o: m.eq(_t(m, A), _t(m, A)[0], out=o), lambda m: m.empty(3, 4, dtype=m.bool)),
    "argmax": (lambda m, o: m.argmax(_t(m, A), 1, out=o), lambda m: m.empty(3, dtype=m.int64)),
    "cumsum": (lambda m, o: m.cumsum(_t(m, A), 0, out=o), lambda m: m.empty(3, 4)),
    "index_select": (lambda m, o: m.index_select(_t(m, A), 1, _t(m, [2, 0]), out=o), lambda m: m.empty(3, 2)),
    "gather": (lambda m, o: m.gather(_t(m, A), 1, _t(m, [[0], [3], [1]]), out=o), lambda m: m.empty(3, 1)),
    "isin": (lambda m, o: m.isin(_t(m, [1, 2, 3]), _t(m, [2]), out=o), lambda m: m.empty(3, dtype=m.bool)),
    "arange": (lambda m, o: m.arange(5, out=o), lambda m: m.empty(5, dtype=m.int64)),
    "zeros": (lambda m, o: m.zeros(2, 3, out=o), lambda m: m.empty(2, 3)),
    "ones": (lambda m, o: m.ones((2, 3), out=o), lambda m: m.empty(2, 3, dtype=m.float64)),
    "full": (lambda m, o: m.full((2,), 1.5, out=o), lambda m: m.empty(2)),
    "linspace": (lambda m, o: m.linspace(0, 1, 5, out=o), lambda m: m.empty(5)),
    "eye": (lambda m, o: m.eye(3, out=o), lambda m: m.empty(3, 3)),
    "max_dim": (lambda m, o: m.max(_t(m, A), 1, out=o), lambda m: (m.empty(3), m.empty(3, dtype=m.int64))),
    "min_dim_keepdim": (lambda m, o: m.min(_t(m, A), 0, True, out=o),
                        lambda m: (m.empty(1, 4), m.empty(1, 4, dtype=m.int64))),
    "max_all": (lambda m, o: m.max(_t(m, A), out=o), lambda m: m.empty(())),
    "sort": (lambda m, o: m.sort(_t(m, A), 1, out=o), lambda m: (m.empty(3, 4), m.empty(3, 4, dtype=m.int64))),
    "topk": (lambda m, o: m.topk(_t(m, A), 2, out=o), lambda m: [m.empty(3, 2), m.empty(3, 2, dtype=m.int64)]),
    "aminmax": (lambda m, o: m.aminmax(_t(m, A), dim=0, out=o), lambda m: (m.empty(4), m.empty(4))),
    "index_copy": (lambda m, o: m.index_copy(_t(m, A), 1, _t(m, [0]), _t(m, B)[:, :1], out=o), lambda m: m.empty(3, 4)),
    "narrow_copy": (lambda m, o: m.narrow_copy(_t(m, A), 1, 1, 2, out=o), lambda m: m.empty(3, 2)),
    "column_stack": (lambda m, o: m.column_stack([_t(m, A), _t(m, B)], out=o), lambda m: m.empty(3, 8)),
    "bitwise_left_shift": (lambda m, o: m.bitwise_left_shift(_t(m, [1, 2]), 3, out=o),
                           lambda m: m.empty(2, dtype=m.int64)),
}


def _values(r):
    if isinstance(r, (tuple, list)):
        return [_values(v) for v in r]
    return str(r.dtype).split(".")[-1], tuple(r.shape), r.detach().cpu().numpy().tolist()


@requires_torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_out_parity(name):
    call, make = CASES[name]
    results = []
    for m in (ember, torch):
        out = make(m)
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        versions = [o._version for o in outs]
        r = call(m, out)
        if isinstance(out, (tuple, list)):
            assert all(a is b for a, b in zip(r, outs)) and type(r).__name__.startswith(name.split("_")[0])
        else:
            assert r is out
        assert all(o._version > v for o, v in zip(outs, versions))
        results.append(_values(outs))
    e, t = results
    for (ed, es, ev), (td, ts, tv) in zip(e, t):
        assert (ed, es) == (td, ts)
        np.testing.assert_allclose(np.asarray(ev, dtype=np.float64), np.asarray(tv, dtype=np.float64), rtol=1e-6,
                                   atol=1e-6)


@requires_torch
@pytest.mark.parametrize("case", [
    ("float_into_double", lambda m: m.add(_t(m, A), 1, out=m.empty(3, 4, dtype=m.float64))),
    ("long_into_float", lambda m: m.add(_t(m, [1, 2]), 1, out=m.empty(2))),
    ("long_into_uint8", lambda m: m.add(_t(m, [1, 2]), 1, out=m.empty(2, dtype=m.uint8))),
    ("bool_into_float", lambda m: m.gt(_t(m, A), 0, out=m.empty(3, 4))),
    ("sum_into_double", lambda m: m.sum(_t(m, A), 1, out=m.empty(3, dtype=m.float64))),
    ("cat_into_double", lambda m: m.cat([_t(m, A)], out=m.empty(3, 4, dtype=m.float64))),
    ("factory_dtype_from_out", lambda m: m.arange(5, out=m.empty(5, dtype=m.float64))),
    ("factory_int_out", lambda m: m.full((2,), 1.5, out=m.empty(2, dtype=m.int64))),
    ("zeros_into_long", lambda m: m.zeros(2, 3, out=m.empty(2, 3, dtype=m.int64))),
], ids=lambda c: c[0] if isinstance(c, tuple) else "")
def test_out_casts_within_category(case):
    _, fn = case
    (ed, es, ev), (td, ts, tv) = _values(fn(ember)), _values(fn(torch))
    assert (ed, es) == (td, ts)
    np.testing.assert_allclose(ev, tv, rtol=1e-6)  # (PyTorch sums in out's dtype: the last digits may differ)


@requires_torch
@pytest.mark.parametrize("case", [
    ("float_into_long", lambda m: m.add(_t(m, A), 1, out=m.empty(3, 4, dtype=m.int64)), RuntimeError,
     "add.*result type Float can't be cast to the desired output type Long"),
    ("long_into_bool", lambda m: m.add(_t(m, [1]), 1, out=m.empty(1, dtype=m.bool)), RuntimeError,
     "result type Long can't be cast to the desired output type Bool"),
    ("exp_into_long", lambda m: m.exp(_t(m, A), out=m.empty(3, 4, dtype=m.int64)), RuntimeError,
     "exp.*result type Float can't be cast to the desired output type Long"),
    ("mm_exact", lambda m: m.mm(_t(m, A), _t(m, B).t(), out=m.empty(3, 3, dtype=m.float64)), RuntimeError,
     "mm.*Expected out tensor to have dtype float, but got double instead"),
    ("argmax_exact", lambda m: m.argmax(_t(m, A), 1, out=m.empty(3)), RuntimeError,
     "argmax.*Expected out tensor to have dtype long int, but got float instead"),
    ("sort_values_exact", lambda m: m.sort(_t(m, A), out=(m.empty(0, dtype=m.float64), m.empty(0, dtype=m.int64))),
     RuntimeError, "sort.*Expected out tensor to have dtype float, but got double instead"),
    ("max_indices_exact", lambda m: m.max(_t(m, A), 1, out=(m.empty(3), m.empty(3))), RuntimeError,
     "max.*Expected out tensor to have dtype long int, but got float instead"),
    ("factory_dtype_mismatch", lambda m: m.zeros(2, dtype=m.float64, out=m.empty(2, dtype=m.int64)), RuntimeError,
     r"zeros.*dtype Double does not match dtype of out parameter \(Long\)"),
    ("out_not_tensor", lambda m: m.exp(_t(m, A), out=3), TypeError, "exp.*argument 'out' must be Tensor.*int"),
    ("tuple_length", lambda m: m.max(_t(m, A), 1, out=(m.empty(3),)), TypeError, "max.*out.*tuple of 2"),
    ("tuple_for_one_result", lambda m: m.exp(_t(m, A), out=(m.empty(3, 4),)), TypeError, "exp.*out.*Tensor"),
    ("tensor_for_two_results", lambda m: m.max(_t(m, A), 1, out=m.empty(3)), TypeError, "max.*out.*tuple of 2"),
    ("input_requires_grad", lambda m: m.exp(_t(m, A).requires_grad_(), out=m.empty(3, 4)), RuntimeError,
     r"exp\(\): functions with out=... arguments don't support automatic differentiation, but one of the arguments "
     r"requires grad"),
    ("out_requires_grad", lambda m: m.exp(_t(m, A), out=m.empty(3, 4, requires_grad=True)), RuntimeError,
     "exp.*functions with out=... arguments don't support automatic differentiation"),
    ("cat_input_requires_grad", lambda m: m.cat([_t(m, A).requires_grad_()], out=m.empty(3, 4)), RuntimeError,
     "cat.*don't support automatic differentiation"),
    ("factory_out_requires_grad", lambda m: m.zeros(2, out=m.empty(2, requires_grad=True)), RuntimeError,
     "zeros.*don't support automatic differentiation"),
], ids=lambda c: c[0] if isinstance(c, tuple) else "")
def test_out_errors(case):
    _, fn, exc, match = case
    raises_like_torch(fn, ember, exc, match)
    raises_like_torch(fn, torch, exc)


def test_out_without_grad_mode_writes_into_a_leaf_that_requires_grad():
    o = ember.empty(3, 4, requires_grad=True)
    with ember.no_grad():
        assert ember.exp(ember.tensor(A), out=o) is o
    np.testing.assert_allclose(o.detach().numpy(), np.exp(A), rtol=1e-6)


@requires_torch
def test_out_is_resized_with_pytorchs_warning():
    for m in (ember, torch):
        o = m.empty(3)
        with pytest.warns(UserWarning, match=r"An output with one or more elements was resized since it had shape "
                                             r"\[3\]"):
            m.exp(_t(m, A), out=o)
        assert tuple(o.shape) == (3, 4)
        o = m.empty(0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            m.exp(_t(m, A), out=o)  # an empty out is resized silently
        assert tuple(o.shape) == (3, 4) and np.allclose(o.numpy(), np.exp(A))
        o = m.empty(0, dtype=m.int64)
        v = o._version
        m.sort(_t(m, A), out=(m.empty(0), o))
        assert tuple(o.shape) == (3, 4) and o._version > v


def test_out_writes_through_a_view_and_into_an_input():
    base = ember.zeros(4, 3)
    o = base.t()  # non-contiguous, of the result's shape: written in place
    ember.add(ember.tensor(A), 1.0, out=o)
    np.testing.assert_allclose(base.numpy().T, A + 1, rtol=1e-6)
    assert base._version == 1 and o.stride() == (1, 3)
    x = ember.tensor(A)
    ember.mul(x, 2.0, out=x)  # out may be an input
    np.testing.assert_allclose(x.numpy(), A * 2, rtol=1e-6)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        ember.exp(ember.tensor(A), out=ember.zeros(3, 1).expand(3, 4))


def test_out_named_tuple_and_signature():
    v, i = ember.empty(3), ember.empty(3, dtype=ember.int64)
    r = ember.max(ember.tensor(A), 1, out=(v, i))
    assert type(r) is ember.return_types.max and r.values is v and r.indices is i
    r = ember.aminmax(ember.tensor(A), out=(ember.empty(()), ember.empty(())))
    assert type(r) is ember.return_types.aminmax and r.min.item() == A.min() and r.max.item() == A.max()
    for name in ("add", "exp", "cat", "sum", "zeros", "arange", "max", "index_copy"):
        params = inspect.signature(getattr(ember, name)).parameters
        assert params["out"].kind is inspect.Parameter.KEYWORD_ONLY and params["out"].default is None, name


def test_every_pytorch_out_function_ember_exports_takes_out():
    assert {"add", "matmul", "cat", "sum", "max", "sort", "zeros", "arange", "randn"} <= set(_out.OUT_FUNCTIONS)
    for name in _out.OUT_FUNCTIONS:  # (the functions ember's op families export: ember/ops/__init__.py binds them)
        fn = ember.ops.FUNCTIONS.get(name)
        if fn is None or name in _out.KEEP:
            continue
        assert getattr(ember, name) is fn and "out" in inspect.signature(fn).parameters, name
    def own(x, *, out=None):  # a function with an `out` of its own keeps it (not wrapped again)
        return x
    assert _out.with_out("own", own) is own
    assert ember.softmax is ember.ops.nn_activation.softmax  # (KEEP: tests/test_registry.py holds this identity)


def test_random_factories_fill_out():
    ember.manual_seed(0)
    o = ember.empty(2, 3, dtype=ember.float64)
    assert ember.randn(2, 3, out=o) is o and o.dtype == ember.float64 and float(o.abs().sum()) > 0
    o = ember.empty(4, dtype=ember.int64)
    ember.randperm(4, out=o)
    assert sorted(o.tolist()) == [0, 1, 2, 3]
    o = ember.empty(3)
    ember.normal(ember.zeros(3), ember.ones(3), out=o)
    assert o.shape == (3,)


def test_out_under_lazy_mode():
    with ember.lazy():
        x = ember.tensor(A) * 2.0
        o = ember.empty(3, 4)
        ember.exp(x, out=o)
        y = o + 1
    np.testing.assert_allclose(y.numpy(), np.exp(A * 2) + 1, rtol=1e-5)
