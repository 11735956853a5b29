"""Property-based tests (hypothesis, PyTorch as the oracle) for in-place ops, indexing writes and
gathers, and pow / remainder / fmod / clamp / where.

Random shapes (0-size and 0-d included), dtypes and layouts; for each case ember must match
PyTorch: the same builtin exception type on misuse, else the same shape, dtype and values -- and,
for in-place ops, the same object returned and the write visible through the base of a view.
Gradients: float64 `gradcheck` for the out-of-place ops, and torch-compared gradients through
in-place ops on non-leaf tensors (directly and through views).

Every in-place case runs on separate ember and torch storage (`Pair` in test_properties shares one
NumPy buffer between the two, which an in-place op would write twice).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from helpers import requires_torch, torch
from test_properties import (
    DTYPES, LAYOUTS, Pair, _builtin_type, _compare, _same_outcome, _settings, _values, broadcast_pairs, check,
    nonempty_shapes, shapes, tensors,
)

import ember

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import assume, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = requires_torch

NUMERIC = [d for d in DTYPES if d != "bool"]


# ----------------------------------------------------------------------------- helpers
class Twin:
    """The same values in separate ember and torch storage, optionally seen through a view.

    `layout` "transposed" or "strided" makes `e`/`t` non-contiguous views of a larger base
    (`eb`/`tb`), so that in-place writes can be checked through the base as well."""

    def __init__(self, a: np.ndarray, layout: str = "contiguous") -> None:
        self.a = a
        self.layout = layout if a.ndim >= (2 if layout == "transposed" else 1) else "contiguous"
        self.eb, self.e = self._make(ember, a)
        self.tb, self.t = self._make(torch, a)

    def _make(self, lib, a: np.ndarray) -> tuple:
        if self.layout == "transposed":
            base = lib.tensor(np.ascontiguousarray(np.swapaxes(a, 0, -1)))
            return base, base.transpose(0, -1)
        if self.layout == "strided":
            big = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 1,), a.dtype)
            big[..., 1::2] = a
            base = lib.tensor(big)
            return base, base[..., 1::2]
        base = lib.tensor(np.array(a, copy=True))
        return base, base


@st.composite
def twins(draw, shape: tuple, dtypes=DTYPES, low: float = -3.0, high: float = 3.0) -> Twin:
    dtype = draw(st.sampled_from(dtypes))
    return Twin(_values(shape, dtype, draw(st.integers(0, 2**31 - 1)), low, high), draw(st.sampled_from(LAYOUTS)))


def _arg(x: Any, lib) -> Any:
    """A Twin/Pair becomes its `lib` tensor; anything else (a Python scalar) passes through."""
    if isinstance(x, Twin):
        return x.e if lib is ember else x.t
    if isinstance(x, Pair):
        return x.e if lib is ember else x.t
    return x




def check_inplace(x: Twin, fn: Callable, *args: Any) -> None:
    """`fn(self, *args)` mutates `self`: same outcome as torch; returns self; base sees the write."""
    try:
        t_ret = fn(x.t, *[_arg(a, torch) for a in args])
    except Exception as exc:
        with pytest.raises(_builtin_type(exc)):
            fn(x.e, *[_arg(a, ember) for a in args])
        return
    e_ret = fn(x.e, *[_arg(a, ember) for a in args])
    if t_ret is x.t:
        assert e_ret is x.e, "an in-place op must return self"
    _compare(x.e, x.t)
    _compare(x.eb, x.tb)


# ----------------------------------------------------------------------------- in-place: values
INPLACE_BINARY = ["add_", "sub_", "mul_", "div_"]


@given(op=st.sampled_from(INPLACE_BINARY), sh=broadcast_pairs(), scalar=st.one_of(
    st.none(), st.integers(-3, 3), st.sampled_from([-1.5, 0.5, 2.5]), st.booleans()), data=st.data())
@_settings(150)
def test_inplace_binary(op: str, sh: tuple, scalar, data) -> None:
    """x.op_(y): y broadcasts to x (not the other way); a result dtype x cannot hold is a RuntimeError."""
    x = data.draw(twins(sh[0]))
    if scalar is None:
        y = data.draw(tensors(sh[1], low=0.5 if op == "div_" else -3.0))
        if op == "div_" and y.a.dtype.kind in "iu":
            y = Pair(np.where(y.a == 0, np.ones((), y.a.dtype), y.a))
        elif op == "div_" and y.a.dtype.kind == "b":
            y = Pair(np.ones_like(y.a))
    else:
        y = 2 if op == "div_" and not scalar else scalar
    check_inplace(x, lambda s, o: getattr(s, op)(o), y)


@given(shape=shapes, kind=st.sampled_from(["both", "min", "max", "crossed"]),
       lo=st.sampled_from([-1, -0.5, 0]), data=st.data())
@_settings(80)
def test_inplace_clamp(shape: tuple, kind: str, lo, data) -> None:
    """clamp_ with min and max, only one, or min > max (max wins, like torch)."""
    x = data.draw(twins(shape, dtypes=NUMERIC))
    hi = lo + 1.5 if kind != "crossed" else lo - 1
    kw = {"both": dict(min=lo, max=hi), "min": dict(min=lo), "max": dict(max=hi), "crossed": dict(min=lo, max=hi)}[kind]
    check_inplace(x, lambda s: s.clamp_(**kw))


@given(shape=shapes, value=st.one_of(st.integers(-3, 3), st.sampled_from([-1.5, 2.5, 0.0]), st.booleans()),
       data=st.data())
@_settings(60)
def test_inplace_fill_zero(shape: tuple, value, data) -> None:
    """fill_(value) casts the value to x's dtype; zero_() zeroes; both write through views."""
    x = data.draw(twins(shape))
    check_inplace(x, lambda s: s.fill_(value))
    x = data.draw(twins(shape))
    check_inplace(x, lambda s: s.zero_())


@given(sh=broadcast_pairs(), data=st.data())
@_settings(80)
def test_inplace_copy(sh: tuple, data) -> None:
    """copy_(src): src broadcasts to x and is cast to x's dtype (any dtype pair)."""
    x = data.draw(twins(sh[0]))
    src = data.draw(tensors(sh[1]))
    check_inplace(x, lambda s, o: s.copy_(o), src)


# ----------------------------------------------------------------------------- in-place: autograd
@given(op=st.sampled_from(INPLACE_BINARY + ["clamp_", "fill_", "zero_", "copy_"]), shape=nonempty_shapes)
@_settings(30)
def test_inplace_on_leaf_requiring_grad_raises(op: str, shape: tuple) -> None:
    """An in-place op on a leaf that requires grad is a RuntimeError (and leaves it untouched)."""
    args = {"clamp_": (0.0, 1.0), "fill_": (1.0,), "zero_": ()}.get(op)
    for lib in (ember, torch):
        x = lib.ones(shape, dtype=lib.float64, requires_grad=True)
        a = args if args is not None else (lib.full(shape, 2.0, dtype=lib.float64),)
        with pytest.raises(RuntimeError, match="leaf|requires grad"):
            getattr(x, op)(*a)
        assert float(x.detach().sum()) == float(np.prod(shape))


@given(op=st.sampled_from(INPLACE_BINARY + ["clamp_", "copy_"]),
       shape=st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple), data=st.data())
@_settings(40)
def test_inplace_gradient_on_non_leaf(op: str, shape: tuple, data) -> None:
    """y = x * 2 (non-leaf); an in-place op on y; the gradients of x and of the in-place operand
    match torch's (a missing gradient counts as zeros). (Views and fill_/zero_: test_inplace_graph_rewrites.)"""
    seed = data.draw(st.integers(0, 1000))
    xa = _values(shape, "float64", seed)
    oa = _values(shape, "float64", seed + 1, 0.5, 2.0)
    ga = _values(shape, "float64", seed + 2)
    grads = []
    for lib in (ember, torch):
        x = lib.tensor(xa, requires_grad=True)
        o = lib.tensor(oa, requires_grad=True)
        y = x * 2.0
        if op == "clamp_":
            y.clamp_(-1.0, 1.0)
        else:
            getattr(y, op)(o)
        (y * lib.tensor(ga)).sum().backward()
        grads.append([y.detach().numpy().copy()]
                     + [np.zeros(shape) if g is None else g.numpy().copy() for g in (x.grad, o.grad)])
    for e, t in zip(*grads):
        np.testing.assert_allclose(e, t, rtol=1e-12)


# ----------------------------------------------------------------------------- indexing writes
@st.composite
def write_index(draw, shape: tuple) -> tuple:
    """(kind, index as NumPy data): basic ints/slices, an int array along dim 0 (some out of
    range), or a bool mask over the leading dims."""
    kind = draw(st.sampled_from(["basic", "int", "mask"]))
    if kind == "basic":
        items = []
        for size in shape[: draw(st.integers(0, len(shape)))]:
            if draw(st.booleans()):
                items.append(draw(st.integers(-size - 1, size)))
            else:
                items.append(slice(draw(st.one_of(st.none(), st.integers(-3, 3))),
                                   draw(st.one_of(st.none(), st.integers(-3, 3))), draw(st.integers(1, 2))))
        return kind, tuple(items)
    if kind == "int":
        size = shape[0]
        # distinct in-range indices (duplicates with differing values are unspecified in torch)
        ix = draw(st.lists(st.integers(-size, size - 1), max_size=3, unique_by=lambda i: i % size))
        if draw(st.integers(0, 7)) == 0:
            ix = ix + [size]  # out of range
        return kind, np.array(ix, np.int64)
    k = draw(st.integers(1, len(shape)))
    return kind, _values(shape[:k], "bool", draw(st.integers(0, 1000)))


def _index(kind: str, idx, lib):
    return idx if kind == "basic" else lib.from_numpy(np.array(idx, copy=True))


@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), data=st.data())
@_settings(150)
def test_setitem(shape: tuple, data) -> None:
    """t[idx] = v for basic, integer-array and bool-mask indices; v a scalar or a tensor that
    broadcasts to t[idx] (sometimes not); v is cast to t's dtype; views see the write."""
    x = data.draw(twins(shape))
    kind, idx = data.draw(write_index(shape))
    try:
        sub = tuple(x.t[_index(kind, idx, torch)].shape)
    except Exception:
        sub = ()
    vkind = data.draw(st.sampled_from(["scalar", "full", "trailing", "bad"]))
    if vkind == "scalar":
        v: Any = data.draw(st.one_of(st.integers(-3, 3), st.sampled_from([1.5, -0.5]), st.booleans()))
    else:
        vs = {"full": sub, "trailing": sub[-1:] if sub else (), "bad": sub[:-1] + (sub[-1] + 1,) if sub else (2,)}[vkind]
        v = data.draw(tensors(vs))

    def write(t, val, lib):
        t[_index(kind, idx, lib)] = val
        return t

    check_inplace(x, lambda t, val: write(t, val, ember if isinstance(t, ember.Tensor) else torch), v)


@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=2).map(tuple), data=st.data())
@_settings(50)
def test_setitem_gradient(shape: tuple, data) -> None:
    """y = x * 2; y[idx] = v * 3: x's gradient is zero where overwritten, v gets the written slots'."""
    kind, idx = data.draw(write_index(shape))
    seed = data.draw(st.integers(0, 1000))
    xa = _values(shape, "float64", seed)
    try:
        sub = tuple(torch.zeros(shape)[_index(kind, idx, torch)].shape)
    except Exception:
        assume(False)
    va = _values(sub, "float64", seed + 1)
    ga = _values(shape, "float64", seed + 2)
    res = []
    for lib in (ember, torch):
        x = lib.tensor(xa, requires_grad=True)
        v = lib.tensor(va, requires_grad=True)
        y = x * 2.0
        y[_index(kind, idx, lib)] = v * 3.0
        (y * lib.tensor(ga)).sum().backward()
        res.append([y.detach().numpy().copy(), x.grad.numpy().copy(), v.grad.numpy().copy()])
    for e, t in zip(*res):
        np.testing.assert_allclose(e, t, rtol=1e-12)


@st.composite
def index_vectors(draw, size: int, allow_bad: bool = True) -> np.ndarray:
    """An int64 index vector into a dim of `size` (duplicates allowed; one in 8 out of range)."""
    ix = draw(st.lists(st.integers(-size if draw(st.booleans()) else 0, size - 1), max_size=4)) if size else []
    if allow_bad and draw(st.integers(0, 7)) == 0:
        ix = ix + [draw(st.sampled_from([size, -size - 1]))]
    return np.array(ix, np.int64)


@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), data=st.data())
@_settings(80)
def test_index_select_and_index_add(shape: tuple, data) -> None:
    """index_select / index_add along any dim: duplicate indices accumulate in index_add;
    out-of-range indices and dims fail alike; gradients pass gradcheck."""
    x = data.draw(tensors(shape))
    n = len(shape)
    dim = data.draw(st.integers(-n - 1, n))
    d = dim % n if -n <= dim < n else 0
    ix = data.draw(index_vectors(shape[d]))
    # negative indices are rejected by torch's index_add and index_select: keep them in the mix
    alpha = data.draw(st.sampled_from([1, 2]))
    check(lambda t: ember.index_select(t, dim, ember.from_numpy(ix)),
          lambda t: torch.index_select(t, dim, torch.from_numpy(ix)), [x])
    src_shape = tuple(len(ix) if i == d else s for i, s in enumerate(shape))
    src = data.draw(tensors(src_shape, dtypes=[str(x.a.dtype)]))
    check(lambda t, s: ember.index_add(t, dim, ember.from_numpy(ix), s, alpha=alpha),
          lambda t, s: torch.index_add(t, dim, torch.from_numpy(ix), s, alpha=alpha), [x, src])


@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=3).map(tuple), data=st.data())
@_settings(80)
def test_scatter_family(shape: tuple, data) -> None:
    """scatter (scalar value) and scatter_add (duplicates accumulate) along any dim, plus
    take_along_dim; out-of-range indices/dims fail alike; gradients pass gradcheck."""
    x = data.draw(tensors(shape))
    n = len(shape)
    dim = data.draw(st.integers(-n - 1, n))
    d = dim % n if -n <= dim < n else 0
    ishape = tuple(data.draw(st.integers(0, s)) for s in shape)
    hi = shape[d] - 1 + (1 if data.draw(st.integers(0, 7)) == 0 else 0)
    ix = np.random.default_rng(data.draw(st.integers(0, 1000))).integers(0, hi + 1, ishape).astype(np.int64)
    src = data.draw(tensors(ishape, dtypes=[str(x.a.dtype)]))
    value = data.draw(st.sampled_from([1.5, -2, True]))
    check(lambda t, s: ember.scatter_add(t, dim, ember.from_numpy(ix), s),
          lambda t, s: torch.scatter_add(t, dim, torch.from_numpy(ix), s), [x, src])
    check(lambda t: ember.scatter(t, dim, ember.from_numpy(ix), value),
          lambda t: torch.scatter(t, dim, torch.from_numpy(ix), value), [x])
    full = tuple(s if i == d else shape[i] for i, s in enumerate(ishape))
    # no out-of-range indices here: torch's CPU take_along_dim does not check them (reads past the end)
    ix2 = np.random.default_rng(1).integers(0, shape[d], full).astype(np.int64)
    check(lambda t: ember.take_along_dim(t, ember.from_numpy(ix2), dim),
          lambda t: torch.take_along_dim(t, torch.from_numpy(ix2), dim), [x])


@given(sh=broadcast_pairs(), value=st.one_of(st.integers(-3, 3), st.sampled_from([1.5, -0.5]), st.booleans()),
       data=st.data())
@_settings(80)
def test_masked_fill(sh: tuple, value, data) -> None:
    """masked_fill: the mask broadcasts to x (not x to the mask); a non-bool mask fails alike;
    masked_fill_ writes through views."""
    x = data.draw(tensors(sh[0]))
    mdtype = "bool" if data.draw(st.integers(0, 7)) else "int64"
    mask = _values(sh[1], mdtype, data.draw(st.integers(0, 1000)), 0, 1)
    check(lambda t: ember.masked_fill(t, ember.from_numpy(mask), value),
          lambda t: torch.masked_fill(t, torch.from_numpy(mask), value), [x])
    xt = Twin(x.a, data.draw(st.sampled_from(LAYOUTS)))
    check_inplace(xt, lambda t, m: t.masked_fill_(m, value), Pair(mask))


# ----------------------------------------------------------------------------- pow / remainder / fmod
@given(sh=broadcast_pairs(), data=st.data())
@_settings(120)
def test_pow_tensor_tensor(sh: tuple, data) -> None:
    """pow(a, b) with tensor exponents, negative bases included (NaN for fractional exponents, like
    torch); integer ** negative integer is the truncated integer power; gradients on positive bases."""
    a = data.draw(tensors(sh[0], dtypes=NUMERIC))
    b = data.draw(tensors(sh[1], dtypes=NUMERIC, low=-2, high=3))
    grad = bool(a.a.size and (a.a > 0.2).all())
    check(ember.pow, torch.pow, [a, b], grad=grad)


@given(shape=shapes, exp=st.sampled_from([0, 1, 2, 3, -1, -2, 0.5, 2.0, -1.5, 0.0, True]), reverse=st.booleans(),
       data=st.data())
@_settings(120)
def test_pow_scalar(shape: tuple, exp, reverse: bool, data) -> None:
    """x ** k and k ** x with Python scalars: weak typing (int ** 2.0 -> float32), int ** negative
    int raises, 0 ** 0 == 1; gradients where defined."""
    pos = reverse is False and isinstance(exp, float) and exp != int(exp)
    x = data.draw(tensors(shape, low=0.3 if pos else -3.0))
    if reverse:
        check(lambda t: exp ** t, lambda t: exp ** t, [x], grad=exp > 0)
    else:
        grad = not (x.a.size and exp < 0 and (np.abs(x.a) < 0.3).any())
        check(lambda t: t ** exp, lambda t: t ** exp, [x], grad=grad)


def test_pow_zero_to_zero() -> None:
    """0 ** 0 is 1 for every dtype and for tensor and scalar exponents; its gradient is finite."""
    for dt in ("int64", "float32", "float64"):
        _same_outcome(lambda: ember.pow(ember.zeros(2, dtype=getattr(ember, dt)), 0),
                      lambda: torch.pow(torch.zeros(2, dtype=getattr(torch, dt)), 0))
        _same_outcome(lambda: ember.zeros(2, dtype=getattr(ember, dt)) ** ember.zeros(2, dtype=getattr(ember, dt)),
                      lambda: torch.zeros(2, dtype=getattr(torch, dt)) ** torch.zeros(2, dtype=getattr(torch, dt)))
    gs = []
    for lib in (ember, torch):
        x = lib.zeros(2, dtype=lib.float64, requires_grad=True)
        e = lib.zeros(2, dtype=lib.float64, requires_grad=True)
        (x ** e).sum().backward()
        gs.append((x.grad.numpy().copy(), e.grad.numpy().copy()))
    np.testing.assert_array_equal(gs[0][0], gs[1][0])
    np.testing.assert_array_equal(gs[0][1], gs[1][1])


REM = {"remainder": (ember.remainder, lambda a, b: torch.remainder(a, b)),
       "fmod": (ember.fmod, lambda a, b: torch.fmod(a, b))}


@given(op=st.sampled_from(sorted(REM)), sh=broadcast_pairs(), zero=st.integers(0, 5), data=st.data())
@_settings(120)
def test_remainder_fmod(op: str, sh: tuple, zero: int, data) -> None:
    """remainder takes the divisor's sign, fmod the dividend's; integer division by zero raises
    like torch (float: NaN); gradients away from the jumps."""
    a = data.draw(tensors(sh[0], dtypes=NUMERIC, low=-6, high=6))
    b = data.draw(tensors(sh[1], dtypes=NUMERIC))
    if zero:  # mostly keep divisors away from 0; otherwise keep the zeros in
        b = Pair(np.where(np.abs(b.a) < 0.5, np.full((), 2, b.a.dtype), b.a).astype(b.a.dtype))
    # gradcheck needs a and b well away from the jumps at multiples of b
    q = a.a.astype(np.float64) / np.where(b.a == 0, 1, b.a) if a.a.size and b.a.size and sh[0] == sh[1] else None
    grad = q is not None and bool((np.abs(q - np.round(q)) > 0.05).all())
    check(*REM[op], [a, b], grad=grad)


@given(op=st.sampled_from(sorted(REM)), shape=shapes, scalar=st.sampled_from([2, -2, 1.5, -0.75, 0, 0.0]),
       data=st.data())
@_settings(80)
def test_remainder_fmod_scalar(op: str, shape: tuple, scalar, data) -> None:
    """Scalar divisors, negative and zero; int % 0 raises ZeroDivisionError/RuntimeError like torch."""
    a = data.draw(tensors(shape, dtypes=NUMERIC, low=-6, high=6))
    e_fn, t_fn = REM[op]
    check(lambda t: e_fn(t, scalar), lambda t: t_fn(t, scalar), [a], grad=False)


# ----------------------------------------------------------------------------- clamp / where
@given(shape=shapes, kind=st.sampled_from(["both", "min", "max", "crossed", "tensor", "none"]),
       data=st.data())
@_settings(120)
def test_clamp(shape: tuple, kind: str, data) -> None:
    """clamp with scalar min/max (one only, crossed: min > max gives max), tensor bounds that
    broadcast; neither bound is an error; gradients (away from the bounds) pass gradcheck."""
    x = data.draw(tensors(shape, dtypes=NUMERIC))
    if kind == "tensor":
        bs = shape[len(shape) - data.draw(st.integers(0, len(shape))):]
        lo = data.draw(tensors(bs, dtypes=NUMERIC, low=-2, high=0))
        hi = data.draw(tensors(bs, dtypes=NUMERIC, low=0, high=2))
        check(lambda t, p, q: ember.clamp(t, p, q), lambda t, p, q: torch.clamp(t, p, q), [x, lo, hi], grad=False)
        check(lambda t, p: ember.clamp(t, min=p), lambda t, p: torch.clamp(t, min=p), [x, lo], grad=False)
        return
    kw = {"both": dict(min=-1, max=1.5), "min": dict(min=-0.5), "max": dict(max=0.75),
          "crossed": dict(min=1, max=-1), "none": {}}[kind]
    grad = x.a.dtype.kind == "f" and not (np.abs(x.a[..., None] - np.array([-1, 1.5, -0.5, 0.75, 1])) < 1e-3).any()
    check(lambda t: ember.clamp(t, **kw), lambda t: torch.clamp(t, **kw), [x], grad=grad)


@st.composite
def three_shapes(draw) -> tuple:
    """Three mutually broadcastable shapes (one in eight not)."""
    full = draw(st.lists(st.integers(0, 3), max_size=3))
    out = []
    for _ in range(3):
        k = draw(st.integers(0, len(full)))
        out.append(tuple(1 if draw(st.booleans()) else d for d in full[len(full) - k:]))
    if draw(st.integers(0, 7)) == 0 and out[0]:
        out[0] = out[0][:-1] + (out[0][-1] + 2,)
    return tuple(out)


@given(sh=three_shapes(), cond_dtype=st.sampled_from(["bool", "bool", "int64", "float32"]),
       scalars=st.sampled_from(["none", "x", "y", "both"]), data=st.data())
@_settings(120)
def test_where(sh: tuple, cond_dtype: str, scalars: str, data) -> None:
    """where(cond, x, y) broadcasting all three, dtype promotion of x and y (scalars weakly typed);
    gradients flow to the chosen side; an int or float condition is a RuntimeError like torch's."""
    cond = _values(sh[0], cond_dtype, data.draw(st.integers(0, 1000)), 0, 1)
    x = data.draw(tensors(sh[1]))
    y = data.draw(tensors(sh[2]))
    sx, sy = 1.5, -2
    if scalars == "none":
        check(lambda p, q: ember.where(ember.from_numpy(cond), p, q),
              lambda p, q: torch.where(torch.from_numpy(cond), p, q), [x, y])
    elif scalars == "x":
        check(lambda q: ember.where(ember.from_numpy(cond), sx, q),
              lambda q: torch.where(torch.from_numpy(cond), sx, q), [y])
    elif scalars == "y":
        check(lambda p: ember.where(ember.from_numpy(cond), p, sy),
              lambda p: torch.where(torch.from_numpy(cond), p, sy), [x])
    else:
        check(lambda: ember.where(ember.from_numpy(cond), sx, sy),
              lambda: torch.where(torch.from_numpy(cond), sx, sy), [])


# ----------------------------------------------------------------------------- known mismatches
def _graph_grads(lib, op: Callable) -> list:
    """x -> y = x * 2 -> op(y) in place -> y.sum().backward(); returns [y, x.grad]."""
    x = lib.ones(2, 2, dtype=lib.float64, requires_grad=True)
    y = x * 2
    op(y, lib)
    y.sum().backward()
    return [y.detach(), x.grad]


GRAPH_REWRITES: dict[str, Callable] = {
    # in place on a view of a graph tensor: the base's history is rewritten (PyTorch's CopySlices)
    "view_row_mul_": lambda y, lib: y[0].mul_(3),
    "view_transposed_add_": lambda y, lib: y.t().add_(lib.ones(2, 2, dtype=lib.float64)),
    "view_column_fill_": lambda y, lib: y[:, 1].fill_(0.5),
    "view_of_view_setitem": lambda y, lib: y.t()[1].__setitem__(0, 7.0),
    # fill_/zero_ on a graph tensor: it stays in the graph, the old values get a zero gradient
    "fill_": lambda y, lib: y.fill_(0.5),
    "zero_": lambda y, lib: y.zero_(),
}


@pytest.mark.parametrize("case", sorted(GRAPH_REWRITES))
def test_inplace_graph_rewrites(case: str) -> None:
    """In-place writes to (views of) a non-leaf graph tensor: values and x's gradient match torch."""
    _same_outcome(lambda: _graph_grads(ember, GRAPH_REWRITES[case]), lambda: _graph_grads(torch, GRAPH_REWRITES[case]))
