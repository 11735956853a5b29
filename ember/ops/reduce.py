"""Reductions: sum, mean, prod, var/std, max/min, amax/amin, argmax/argmin, logsumexp, norm,
cumulative sums and products, all/any, count_nonzero.

A reduction's backward puts the reduced dimensions back as size 1 (`KeepDims`, unless the
forward ran with keepdim) and lets broadcasting spread the gradient over them, so every
backward is made of ember ops and differentiates again under create_graph=True.
"""
from __future__ import annotations

import builtins
import collections
import math
import warnings

import numpy as np

from .. import _dtype as dt
from ..backend import array_module, on_device_of
from .._tensor import Tensor, normalize_dim, make
from ..autograd.forward_ad import is_dual
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from .arithmetic import broadcast_to, maximum, minimum, sum_array, where
from .registry import Exports
from .shape import Cat, Flip, Narrow
from .._capture import traced

__all__ = ["sum", "mean", "prod", "var", "std", "max", "min", "amax", "amin", "argmax", "argmin", "logsumexp",
           "norm", "cumsum", "cumprod", "all", "any", "count_nonzero", "return_types"]

_INT64 = np.dtype(np.int64)


# ---------------------------------------------------------------------- argument handling
def _check(x, op: str) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(x).__name__}")
    return x


def _axes(dim, ndim: int, op: str, empty_is_all: bool = True) -> tuple:
    """The sorted, non-negative axes that `dim` names (an int, a tuple/list of ints, or None for all).

    An empty tuple means every axis for sum-like reductions, and no axis for all/any, as in PyTorch."""
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (tuple, list)):
        if not dim:
            return tuple(range(ndim)) if empty_is_all else ()
        axes = [normalize_dim(d, ndim, op) for d in dim]
        for i, a in enumerate(axes):
            if a in axes[:i]:
                raise RuntimeError(f"{op}(): dim {a} appears multiple times in the list of dims {list(dim)}")
        return tuple(sorted(axes)) if ndim else ()
    d = normalize_dim(dim, ndim, op)
    return (d,) if ndim else ()


def _keep_shape(shape: tuple, axes: tuple) -> tuple:
    """`shape` with the reduced axes kept as size 1 (the keepdim=True result shape)."""
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _reduced_shape(shape: tuple, axes: tuple, keepdim: bool) -> tuple:
    return _keep_shape(shape, axes) if keepdim else tuple(s for i, s in enumerate(shape) if i not in axes)


def _count(shape: tuple, axes: tuple) -> int:
    """Number of elements reduced into each output element."""
    return math.prod(shape[a] for a in axes)


def _float_only(x: Tensor, op: str, what: str) -> None:
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"{op}(): {what}, got {x.dtype}")


def _nonempty(x: Tensor, axes: tuple, op: str, all_dims: bool) -> None:
    """max/min/amax/argmax have no identity: PyTorch refuses to reduce over nothing."""
    if all_dims and x._data.size == 0:
        raise RuntimeError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0 "
                           f"(input shape {list(x.shape)}). Specify the reduction dim with the 'dim' argument.")
    for a in axes:
        if x._data.ndim and x._data.shape[a] == 0:
            raise IndexError(f"{op}(): Expected reduction dim {a} to have non-zero size (input shape {list(x.shape)}).")


def _apply(cls, x: Tensor, *consts) -> Tensor:
    """`cls.apply(x, *consts)` for one Tensor input followed by constants (no device check needed)."""
    return dispatch(object.__new__(cls), (x,) + consts, (x._data,) + consts)


# ---------------------------------------------------------------------- shape helpers for backward
class KeepDims(Op):
    """z = x reshaped to the same size (a reduction's result with its reduced dims restored as 1);
    dz/dx = gz reshaped back."""

    saves_inputs = False

    def forward(self, x, shape):
        self.in_shape = x.shape
        return x.reshape(shape)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return _apply(KeepDims, gz, self.in_shape)


def _keep(t: Tensor, in_shape: tuple, axes: tuple, keepdim: bool) -> Tensor:
    """A reduction's result (or its gradient) with the reduced dims restored as size 1, ready to broadcast."""
    if keepdim:
        return t
    ks = _keep_shape(in_shape, axes)
    return t if t.shape == ks else _apply(KeepDims, t, ks)


def _expand(gz: Tensor, in_shape: tuple, axes: tuple, keepdim: bool) -> Tensor:
    """gz broadcast back over the reduced dims to the input's shape."""
    return broadcast_to(_keep(gz, in_shape, axes, keepdim), in_shape)


def _as_array(r):
    """A NumPy scalar result (full reductions) as a 0-d array; arrays pass through."""
    return np.asarray(r) if isinstance(r, np.generic) else r


# ---------------------------------------------------------------------- sum, mean, prod
class Sum(Op):
    """z = Σ x over `axes`;  dz/dx = gz broadcast back over the summed dims."""

    saves_inputs = False

    def forward(self, x, axes, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        return sum_array(x, axes, keepdim)

    jvp = Op.linear_jvp  # z' = Σ x'

    def backward(self, gz):
        return _expand(gz, self.in_shape, self.axes, self.keepdim)


class Mean(Op):
    """z = Σ x / N over `axes` (N elements each);  dz/dx = gz / N broadcast back."""

    saves_inputs = False

    def forward(self, x, axes, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        self.n = _count(x.shape, axes)
        if x.dtype == np.float16:  # divide before rounding to float16: the sum alone may not fit
            return (x.sum(axis=axes, dtype=np.float32, keepdims=keepdim) / self.n).astype(np.float16)
        return sum_array(x, axes, keepdim) / self.n  # an empty mean is 0/0 = nan, as in PyTorch

    jvp = Op.linear_jvp  # z' = Σ x' / N

    def backward(self, gz):
        return _expand(gz / self.n if self.n else gz, self.in_shape, self.axes, self.keepdim)


class Prod(Op):
    """z = Π x along `axis` (None: over all elements);  dz/dx_i = Π_{j≠i} x_j (= z / x_i when no x is 0)."""

    saves_output = True

    def forward(self, x, axis, keepdim):
        return x.prod(axis=axis, keepdims=keepdim, dtype=_INT64 if x.dtype.kind in "biu" else None)

    def jvp(self, t, x, axis, keepdim):
        # z' = Σ_i x_i' Π_{j≠i} x_j
        return sum(t[0] * self._others(x, axis, keepdim), axis, keepdim)

    def backward(self, gz, x, axis, keepdim):
        axes = tuple(range(x.ndim)) if axis is None else (axis,)
        return _keep(gz, x.shape, axes, keepdim) * self._others(x, axis, keepdim)

    def _others(self, x: Tensor, axis, keepdim: bool) -> Tensor:
        """dz/dx_i = Π_{j≠i} x_j, shaped as x."""
        if not bool((x._data == 0).any()):  # a branch on the values, not gradient math on arrays
            axes = tuple(range(x.ndim)) if axis is None else (axis,)
            return _keep(self.output(), x.shape, axes, keepdim) / x
        return _prod_of_others(x, axis)


def _prod_of_others(x: Tensor, axis) -> Tensor:
    """Π_{j≠i} x_j along `axis` (None: over all elements) for every i, without a division: the product of the
    elements before i times that of the elements after i. Exact where x has zeros, and so are its derivatives of
    any order (Cumprod's are)."""
    if axis is None:
        return _apply(KeepDims, _prod_of_others(_apply(KeepDims, x, (x._data.size,)), 0), x.shape)
    after = Flip.apply(_exclusive_cumprod(Flip.apply(x, (axis,)), axis), (axis,))
    return _exclusive_cumprod(x, axis) * after


def _exclusive_cumprod(x: Tensor, axis: int) -> Tensor:
    """Π_{j<i} x_j along `axis`: the cumprod shifted by one place, 1 first."""
    with on_device_of(x._data):
        one = make(array_module(x._data).ones(x.shape[:axis] + (1,) + x.shape[axis + 1:], x._data.dtype))
    head = _apply(Cumprod, Narrow.apply(x, axis, 0, x.shape[axis] - 1), axis)
    return Cat.apply(one, head, dim=axis, dtype=None)


def sum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Σ input over `dim` (int, tuple, or None/() for all); bool and integer inputs sum to int64."""
    x = _check(input, "sum")
    if dtype is not None:
        x = x.to(dtype)
    return _apply(Sum, x, _axes(dim, x._data.ndim, "sum"), keepdim)


def mean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Arithmetic mean over `dim`; integer inputs need an explicit floating `dtype`, as in PyTorch."""
    x = _check(input, "mean")
    if dtype is not None:
        x = x.to(dtype)
    if not dt.is_float(x._data.dtype):
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point or "
                           f"complex dtype. Got: {x.dtype} (pass dtype=ember.float32 to average integers)")
    return _apply(Mean, x, _axes(dim, x._data.ndim, "mean"), keepdim)


def prod(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
    """Π input over all elements, or along the single int `dim`; bool and integer inputs give int64."""
    x = _check(input, "prod")
    if dtype is not None:
        x = x.to(dtype)
    if dim is None:
        return _apply(Prod, x, None, False)
    axis = normalize_dim(dim, x._data.ndim, "prod")
    if x._data.ndim == 0:
        return _apply(Prod, x, None, False)
    return _apply(Prod, x, axis, keepdim)


# ---------------------------------------------------------------------- var, std
class Var(Op):
    """z = Σ (x - x̄)² / (N - correction) over `axes`;  dz/dx = 2 (x - x̄) / (N - correction)."""

    def forward(self, x, axes, correction, keepdim):
        return _var_array(array_module(x).var, x, axes, correction, keepdim, "var")

    def jvp(self, t, x, axes, correction, keepdim):
        return _var_jvp(t[0], x, axes, correction, keepdim)

    def backward(self, gz, x, axes, correction, keepdim):
        return _var_grad(_keep(gz, x.shape, axes, keepdim), x, axes, correction)


class Std(Op):
    """z = √var(x);  dz/dx = dvar/dx / (2z), taken as 0 where z = 0 (PyTorch's subgradient)."""

    saves_output = True

    def forward(self, x, axes, correction, keepdim):
        return _var_array(array_module(x).std, x, axes, correction, keepdim, "std")

    def jvp(self, t, x, axes, correction, keepdim):
        z = self.output()
        flat = z == 0
        return where(flat, 0.0, _var_jvp(t[0], x, axes, correction, keepdim) / (2 * where(flat, 1.0, z)))

    def backward(self, gz, x, axes, correction, keepdim):
        s = _keep(self.output(), x.shape, axes, keepdim)
        flat = s == 0
        g = where(flat, 0.0, _keep(gz, x.shape, axes, keepdim) / (2 * where(flat, 1.0, s)))
        return _var_grad(g, x, axes, correction)


def _var_array(fn, x, axes, correction, keepdim, op):
    denom = _count(x.shape, axes) - correction
    if denom > 0:
        return fn(x, axis=axes, ddof=correction, keepdims=keepdim)
    # PyTorch warns once with its own words and returns inf/nan; NumPy's two RuntimeWarnings would point into NumPy
    warnings.warn(f"{op}(): degrees of freedom is <= 0 (correction={correction} with {denom + correction} elements "
                  f"per reduction); the result is inf or nan", UserWarning, stacklevel=5)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(x, axis=axes, ddof=correction, keepdims=keepdim)


def _var_jvp(t: Tensor, x: Tensor, axes: tuple, correction, keepdim: bool) -> Tensor:
    """var' = Σ 2 (x - x̄) x' / (N - correction) (the x̄' terms sum to zero)."""
    return sum(_var_grad(t, x, axes, correction), axes, keepdim)


def _var_grad(g: Tensor, x: Tensor, axes: tuple, correction) -> Tensor:
    denom = _count(x.shape, axes) - correction
    scale = 2.0 / denom if denom > 0 else math.inf  # no degrees of freedom: the variance is nan/inf anyway
    return g * (x - mean(x, axes, keepdim=True)) * scale


def _correction(op: str, dim, unbiased, correction):
    """Resolve PyTorch's three spellings: var(x, unbiased), var(x, dim, unbiased), var(x, dim, correction=c)."""
    if type(dim) is bool:  # var(x, True): the old (input, unbiased) overload
        if unbiased is not None:
            raise TypeError(f"{op}(): got unbiased twice (as the second argument {dim} and as unbiased={unbiased})")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise RuntimeError(f"{op}(): cannot specify both unbiased={unbiased} and correction={correction}")
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    if isinstance(correction, bool) or not isinstance(correction, (int, float, np.integer, np.floating)):
        raise TypeError(f"{op}(): correction must be a number, got {type(correction).__name__}")
    return dim, correction


def var(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Variance over `dim` with Bessel's correction by default (correction=1, i.e. unbiased=True)."""
    x = _check(input, "var")
    dim, c = _correction("var", dim, unbiased, correction)
    _float_only(x, "var", "std and var only support floating point dtypes")
    return _apply(Var, x, _axes(dim, x._data.ndim, "var"), c, keepdim)


def std(input: Tensor, dim=None, unbiased: bool | None = None, keepdim: bool = False, *, correction=None) -> Tensor:
    """Standard deviation over `dim` (√var, same correction rules)."""
    x = _check(input, "std")
    dim, c = _correction("std", dim, unbiased, correction)
    _float_only(x, "std", "std and var only support floating point dtypes")
    return _apply(Std, x, _axes(dim, x._data.ndim, "std"), c, keepdim)


# ---------------------------------------------------------------------- max, min and friends
class AMax(Op):
    """z = max (or min) of x over `axes`;  dz/dx = gz split evenly among the elements equal to z. Where z is NaN:
    among the NaN elements for max()/min() of a whole tensor (`nan_hits`), else 0/0 = NaN (PyTorch's amax/amin)."""

    saves_output = True

    def forward(self, x, axes, keepdim, largest, nan_hits=False):
        return (x.max if largest else x.min)(axis=axes, keepdims=keepdim)

    def jvp(self, t, x, axes, keepdim, largest, nan_hits=False):
        # the mean tangent of the ties; NaN where z is NaN (none equal it), as PyTorch's
        return sum(t[0] * self._share(x, axes, keepdim, False), axes, keepdim)

    def backward(self, gz, x, axes, keepdim, largest, nan_hits=False):
        return _keep(gz, x.shape, axes, keepdim) * self._share(x, axes, keepdim, nan_hits)

    def _share(self, x: Tensor, axes: tuple, keepdim: bool, nan_hits: bool) -> Tensor:
        """dz/dx: 1/k at the k elements equal to z, 0 elsewhere."""
        z = _keep(self.output(), x.shape, axes, keepdim)
        hit = ((x == z) | ((x != x) & (z != z)) if nan_hits else x == z).to(x.dtype)
        return hit / sum(hit, axes, keepdim=True)


class TakeAt(Op):
    """z = x at `idx` along `axis` (idx: an int64 Tensor shaped as x but along axis; keepdim False squeezes
    axis, for idx of size 1 there);  dz/dx = gz put back at idx into zeros of x's shape (PutAt)."""

    saves_inputs = False

    def forward(self, x, idx, axis, keepdim):
        self.in_shape, self.idx, self.axis, self.keepdim = x.shape, idx, axis, keepdim
        v = array_module(x).take_along_axis(x, idx, axis)
        return v if keepdim else v.squeeze(axis)

    jvp = Op.linear_jvp  # the tangent at the same positions

    def backward(self, gz):
        return gather_scatter(PutAt, gz, self.idx, self.axis, self.keepdim, self.in_shape), None


class PutAt(Op):
    """z = zeros of `shape` holding g at `idx` along `axis` (distinct positions per slice);
    dz/dg = gz taken at idx (TakeAt)."""

    saves_inputs = False

    def forward(self, g, idx, axis, keepdim, shape):
        self.idx, self.axis, self.keepdim = idx, axis, keepdim
        xp = array_module(g)
        with on_device_of(g):
            out = xp.zeros(shape, g.dtype)
        xp.put_along_axis(out, idx, g if keepdim else xp.expand_dims(g, axis), axis)
        return out

    jvp = Op.linear_jvp

    def backward(self, gz):
        return gather_scatter(TakeAt, gz, self.idx, self.axis, self.keepdim), None


def gather_scatter(cls, t: Tensor, idx, axis: int, keepdim: bool, *shape) -> Tensor:
    """Apply TakeAt or PutAt to t with the int64 index `idx` (a Tensor, or an array: from a saved node or an
    index rule). The index is an input, not an attribute, so lazy mode can defer the op on a pending index."""
    it = idx if isinstance(idx, Tensor) else make(idx)
    return dispatch(object.__new__(cls), (t, it, axis, keepdim) + shape, (t._data, it._data, axis, keepdim) + shape)


def _result_type(name: str, fields: tuple = ("values", "indices")):
    """A named tuple like torch.return_types.<name>, printed as PyTorch prints them."""
    cls = collections.namedtuple(name, fields)
    cls.__module__, cls.__qualname__ = __name__, "return_types." + name  # picklable as ember.ops.reduce.return_types.<name>

    def __repr__(self) -> str:
        body = ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self))
        return f"ember.return_types.{name}(\n{body})"
    cls.__repr__ = __repr__
    return cls


class return_types:
    """Named tuples `(values, indices)` returned by max(dim) and min(dim), like torch.return_types."""

    max = _result_type("max")
    min = _result_type("min")


def register_return_type(name: str, fields: tuple) -> type:
    """Make (and return) the named tuple `ember.return_types.<name>` with `fields`."""
    cls = _result_type(name, fields)
    setattr(return_types, name, cls)
    return cls


def _max_min(x, dim, keepdim: bool, largest: bool, op: str):
    if dim is None:
        if keepdim:
            raise TypeError(f"{op}(): keepdim=True needs a dim; {op}(input) reduces over every element")
        _nonempty(x, (), op, True)
        return _apply(AMax, x, tuple(range(x._data.ndim)), False, largest, True)
    axis = normalize_dim(dim, x._data.ndim, op)
    result = return_types.max if largest else return_types.min
    if x._data.ndim == 0:  # a 0-d tensor is its own max, at index 0
        xp = array_module(x._data)
        v = _apply(KeepDims, x, (1,))
        with on_device_of(x._data):
            zero, zero0 = xp.zeros((1,), _INT64), xp.zeros((), _INT64)
        return result(gather_scatter(TakeAt, v, zero, 0, False), make(zero0))
    _nonempty(x, (axis,), op, False)
    idx = (x._data.argmax if largest else x._data.argmin)(axis=axis, keepdims=True)
    # the gradient goes to the returned index only (PyTorch's rule for max(dim), unlike amax)
    values = gather_scatter(TakeAt, x, idx, axis, keepdim)
    return result(values, make(idx if keepdim else idx.squeeze(axis)))


def max(input: Tensor, dim=None, keepdim: bool = False, *, other: Tensor | None = None):
    """max(input): the largest element (0-d); max(input, dim, keepdim): named tuple (values, indices);
    max(input, other): the elementwise maximum."""
    x = _check(input, "max")
    if isinstance(dim, Tensor) or other is not None:
        return maximum(x, dim if other is None else other)
    return _max_min(x, dim, keepdim, True, "max")


def min(input: Tensor, dim=None, keepdim: bool = False, *, other: Tensor | None = None):
    """min(input): the smallest element (0-d); min(input, dim, keepdim): named tuple (values, indices);
    min(input, other): the elementwise minimum."""
    x = _check(input, "min")
    if isinstance(dim, Tensor) or other is not None:
        return minimum(x, dim if other is None else other)
    return _max_min(x, dim, keepdim, False, "min")


def _amax_amin(x, dim, keepdim: bool, largest: bool, op: str) -> Tensor:
    axes = _axes(dim, x._data.ndim, op)
    # only an implicit "every dim" (None, () or []) is the RuntimeError; a named empty dim is an IndexError
    _nonempty(x, axes, op, dim is None or (isinstance(dim, (tuple, list)) and not dim))
    return _apply(AMax, x, axes, keepdim, largest)


def amax(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Largest value over `dim` (int or tuple; () for all); the gradient is shared evenly among ties."""
    return _amax_amin(_check(input, "amax"), dim, keepdim, True, "amax")


def amin(input: Tensor, dim=(), keepdim: bool = False) -> Tensor:
    """Smallest value over `dim` (int or tuple; () for all); the gradient is shared evenly among ties."""
    return _amax_amin(_check(input, "amin"), dim, keepdim, False, "amin")


@traced
def _arg(x, dim, keepdim: bool, largest: bool, op: str) -> Tensor:
    a = x._data
    if a.dtype.kind == "b":  # checked first, as in PyTorch (an empty bool input reports the dtype)
        raise RuntimeError(f"{op}(): does not support bool input; convert it with .long() or .to(ember.uint8) first")
    fn = a.argmax if largest else a.argmin
    if dim is None:
        if a.size == 0:  # an IndexError in PyTorch, unlike max()/amax() of an empty input (RuntimeError)
            raise IndexError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0 "
                             f"(input shape {list(a.shape)}).")
        i = _as_array(fn()).astype(_INT64, copy=False)
        return make(i.reshape((1,) * a.ndim) if keepdim else i)
    axis = normalize_dim(dim, a.ndim, op)
    if a.ndim == 0:
        with on_device_of(a):
            return make(array_module(a).zeros((), _INT64))
    _nonempty(x, (axis,), op, False)
    return make(_as_array(fn(axis=axis, keepdims=keepdim)).astype(_INT64, copy=False))  # 1-d: NumPy gives a scalar


def argmax(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index (int64) of the largest value along `dim`, or in the flattened input when dim is None."""
    return _arg(_check(input, "argmax"), dim, keepdim, True, "argmax")


def argmin(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Index (int64) of the smallest value along `dim`, or in the flattened input when dim is None."""
    return _arg(_check(input, "argmin"), dim, keepdim, False, "argmin")


# ---------------------------------------------------------------------- logsumexp, norm
class LogSumExp(Op):
    """z = m + ln Σ e^(x - m) over `axes`, m = max x (shift for stability);  dz/dx = e^(x - z) (the softmax)."""

    saves_output = True

    def forward(self, x, axes, keepdim):
        m = _shift(x, axes)
        s = np.log(np.exp(x - m).sum(axis=axes, keepdims=True)) + m
        return s if keepdim else s.reshape(_reduced_shape(x.shape, axes, False))

    def jvp(self, t, x, axes, keepdim):
        # z' = Σ softmax(x) x', the softmax normalised from exponentials shifted by a constant, as forward's (e^(x - z)
        # would carry z's rounding: 1e-4 relative in float32 at z = 1e4)
        if x._data.size == 0:
            return 0  # an empty sum: z = -inf, whatever x
        e = (x - make(_shift(x._data, axes))).exp()
        return sum(t[0] * e, axes, keepdim) / sum(e, axes, keepdim)

    def backward(self, gz, x, axes, keepdim):
        z = _keep(self.output(), x.shape, axes, keepdim)
        return _keep(gz, x.shape, axes, keepdim) * (x - z).exp()


def _shift(x, axes: tuple):
    """logsumexp's stabilising shift of array x: its max over `axes` (kept as size 1), 0 where that is not finite
    (all -inf, or an inf: shifting by it would make inf - inf = nan) or the reduction is empty."""
    if builtins.any(x.shape[a] == 0 for a in axes):
        with on_device_of(x):
            return array_module(x).zeros(_keep_shape(x.shape, axes), x.dtype)
    m = x.max(axis=axes, keepdims=True)
    finite = np.isfinite(m)
    return m if finite.all() else array_module(x).where(finite, m, 0)


def logsumexp(input: Tensor, dim, keepdim: bool = False) -> Tensor:
    """ln Σ exp(input) over `dim` (required, as in PyTorch: an int or tuple), without overflow;
    integer inputs are promoted to the default float dtype."""
    x = _check(input, "logsumexp")
    if not dt.is_float(x._data.dtype):
        x = x.to(dt.get_default_dtype())
    return _apply(LogSumExp, x, _axes(dim, x._data.ndim, "logsumexp"), keepdim)


class Norm(Op):
    """z = (Σ |x|^p)^(1/p) over `axes` (p = ±inf: max/min |x|; p = 0: number of nonzeros);
    dz/dx = sign(x) |x|^(p-1) / z^(p-1), with PyTorch's subgradients: 0 where z = 0 for p ≥ 1."""

    saves_output = True

    def forward(self, x, p, axes, keepdim):
        if p == 2:
            r = np.sqrt(sum_array(x * x, axes, keepdim))
            if x.dtype.itemsize < 8 and not np.isfinite(r).all() and np.isfinite(x).all():
                # the squares overflowed (float16 from 256, float32 from 1.8e19): accumulate in float64,
                # as PyTorch's reduction does for low-precision floats
                x64 = x.astype(np.float64)
                r = np.sqrt(sum_array(x64 * x64, axes, keepdim)).astype(x.dtype)
            return r
        a = np.abs(x)
        if p == 1:
            return sum_array(a, axes, keepdim)
        if p == math.inf:
            return a.max(axis=axes, keepdims=keepdim)
        if p == -math.inf:
            return a.min(axis=axes, keepdims=keepdim)
        if p == 0:
            return sum_array(x != 0, axes, keepdim).astype(x.dtype)
        return sum_array(a ** p, axes, keepdim) ** (1.0 / p)

    def jvp(self, t, x, p, axes, keepdim):
        if p == 0:
            return 0  # a count of nonzeros: piecewise constant
        return sum(t[0] * self._dzdx(x, p, axes, keepdim), axes, keepdim)

    def backward(self, gz, x, p, axes, keepdim):
        g = _keep(gz, x.shape, axes, keepdim)
        if p == 0:
            return broadcast_to(g * 0.0, x.shape)
        return g * self._dzdx(x, p, axes, keepdim)

    def _dzdx(self, x: Tensor, p: float, axes: tuple, keepdim: bool) -> Tensor:
        """dz/dx for p != 0, with PyTorch's subgradients."""
        if p == 1:
            return x.sign()
        z = _keep(self.output(), x.shape, axes, keepdim)
        if math.isinf(p):
            hit = (x.abs() == z).to(x.dtype)
            return x.sign() * (hit / sum(hit, axes, keepdim=True))
        z_safe = where(z == 0, 1.0, z)  # z = 0 only where the whole slice is 0, and there x-terms are 0
        if p == 2:
            return x / z_safe
        if p < 1:
            # |x|^(p-1) is infinite at 0: PyTorch takes 0 there
            return x.sign() * where(x == 0, 1.0, x.abs()) ** (p - 1) * z ** (1 - p)
        if p < 2:
            return x.sign() * x.abs() ** (p - 1) / z_safe ** (p - 1)
        return x * x.abs() ** (p - 2) / z_safe ** (p - 1)


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:
    """Vector p-norm of `input` over `dim` (all elements when None): p a number, ±inf, or 'fro' (= 2)."""
    x = _check(input, "norm")
    if dtype is not None:
        x = x.to(dtype)
    _float_only(x, "norm", "input dtype should be floating point")
    if isinstance(p, str):
        if p != "fro":
            raise RuntimeError(f"norm(): p={p!r} is not supported; use a number, inf, -inf or 'fro'")
        p = 2
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"norm(): p must be a number or 'fro', got {type(p).__name__}")
    p = float(p)
    axes = _axes(dim, x._data.ndim, "norm")
    if math.isinf(p):
        for a in axes:
            if x._data.shape[a] == 0:
                raise RuntimeError(f"norm(): cannot compute the {p} norm over an empty dimension {a} of shape "
                                   f"{list(x.shape)}: the operation has no identity")
    return _apply(Norm, x, p, axes, keepdim)


# ---------------------------------------------------------------------- cumulative sums and products
class Cumsum(Op):
    """z_k = Σ_{j≤k} x_j along `axis` (reverse: Σ_{j≥k});  dz/dx = cumsum of gz in the other direction."""

    saves_inputs = False

    def forward(self, x, axis, reverse):
        self.axis, self.reverse = axis, reverse
        acc = _INT64 if x.dtype.kind in "biu" else None
        if x.ndim == 0:
            return x.astype(acc or x.dtype)
        xp = array_module(x)
        if reverse:
            return xp.flip(xp.cumsum(xp.flip(x, axis), axis=axis, dtype=acc), axis)
        return xp.cumsum(x, axis=axis, dtype=acc)

    jvp = Op.linear_jvp

    def backward(self, gz):
        return _apply(Cumsum, gz, self.axis, not self.reverse)


class Cumprod(Op):
    """z_k = Π_{j≤k} x_j along `axis`;  dz/dx_i = Σ_{k≥i} gz_k Π_{j≤k, j≠i} x_j (backward),
    z_k' = Σ_{i≤k} x_i' Π_{j≤k, j≠i} x_j (jvp).

    Without zeros: revcumsum(gz·z)_i / x_i and z_k · cumsum(x'/x)_k. With zeros, let f be a slice's first zero
    and x1 = x with x_f taken as 1 (z1 = cumprod(x1)): before f the same formulas; at f (backward) or from f on
    (jvp) only the terms without the factor x_f remain: revcumsum(gz·z1)_f, x_f'·z1_k; every other term has
    the factor x_f: x_f times the same derivative of cumprod(x1), 0 in value but not in derivative, kept when
    the result will be differentiated (`_differentiated`) so that second derivatives are exact too."""

    saves_output = True

    def forward(self, x, axis):
        acc = _INT64 if x.dtype.kind in "biu" else None
        if x.ndim == 0:
            return x.astype(acc or x.dtype)
        return array_module(x).cumprod(x, axis=axis, dtype=acc)

    def jvp(self, t, x, axis):
        return t[0] if x._data.ndim == 0 else _cumprod_jvp(t[0], x, self.output(), axis)

    def backward(self, gz, x, axis):
        return gz if x._data.ndim == 0 else _cumprod_vjp(gz, x, self.output(), axis)


def _cumprod_jvp(t: Tensor, x: Tensor, z: Tensor, axis: int) -> Tensor:
    if not bool((x._data == 0).any()):  # a branch on the values, not tangent math on arrays
        return z * _apply(Cumsum, t / x, axis, False)
    before, first, x1, z1 = _first_zero(x, axis)
    t_before = z * _apply(Cumsum, t / where(before, x, 1.0), axis, False)
    t_from = _from_first(t, first, axis) * z1
    if _differentiated(t, x):
        t_from = t_from + _from_first(x, first, axis) * _cumprod_jvp(where(first, 0.0, t), x1, z1, axis)
    return where(before, t_before, t_from)


def _cumprod_vjp(gz: Tensor, x: Tensor, z: Tensor, axis: int) -> Tensor:
    if not bool((x._data == 0).any()):  # a branch on the values, not gradient math on arrays
        return _apply(Cumsum, gz * z, axis, True) / x
    before, first, x1, z1 = _first_zero(x, axis)
    g_before = _apply(Cumsum, gz * z, axis, True) / where(before, x, 1.0)
    g_first = _apply(Cumsum, gz * z1, axis, True)
    g_after = 0.0
    if _differentiated(gz, x):
        g_after = _from_first(x, first, axis) * _cumprod_vjp(gz, x1, z1, axis)
    return where(before, g_before, where(first, g_first, g_after))


def _first_zero(x: Tensor, axis: int) -> tuple:
    """(before, first, x1, z1) for Cumprod's derivatives: the positions before each slice's first zero, that zero,
    x with it taken as 1, and the cumprod of that."""
    zero = x == 0
    seen = _apply(Cumsum, zero, axis, False)  # zeros up to and including each position
    first = zero & (seen == 1)
    x1 = where(first, 1.0, x)
    return seen == 0, first, x1, _apply(Cumprod, x1, axis)


def _from_first(v: Tensor, first: Tensor, axis: int) -> Tensor:
    """v at each slice's first zero, from that position on along `axis` (0 before it), differentiably."""
    return _apply(Cumsum, where(first, v, 0.0), axis, False)


def _differentiated(*ts) -> bool:
    """Whether a derivative computed from the Tensors `ts` will itself be differentiated: one of them is in the
    graph (grad mode on) or carries a tangent (forward AD)."""
    for t in ts:
        if (MODE.grad and t._requires_grad) or (MODE.fw and is_dual(t)):
            return True
    return False


def cumsum(input: Tensor, dim, *, dtype=None) -> Tensor:
    """Cumulative sum along `dim`; bool and integer inputs accumulate in int64."""
    x = _check(input, "cumsum")
    if dtype is not None:
        x = x.to(dtype)
    return _apply(Cumsum, x, normalize_dim(dim, x._data.ndim, "cumsum"), False)


def cumprod(input: Tensor, dim, *, dtype=None) -> Tensor:
    """Cumulative product along `dim`; bool and integer inputs accumulate in int64."""
    x = _check(input, "cumprod")
    if dtype is not None:
        x = x.to(dtype)
    return _apply(Cumprod, x, normalize_dim(dim, x._data.ndim, "cumprod"))


# ---------------------------------------------------------------------- logical reductions and counts
@traced
def _logical(x: Tensor, dim, keepdim: bool, op: str) -> Tensor:
    a = x._data
    r = _as_array(getattr(a, op)(axis=_axes(dim, a.ndim, op, empty_is_all=False), keepdims=keepdim))
    return make(r.astype(np.uint8) if a.dtype == np.uint8 else r)  # PyTorch keeps uint8 for uint8 input


def all(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether every element over `dim` is nonzero (bool; uint8 for uint8 input)."""
    return _logical(_check(input, "all"), dim, keepdim, "all")


def any(input: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """Whether any element over `dim` is nonzero (bool; uint8 for uint8 input)."""
    return _logical(_check(input, "any"), dim, keepdim, "any")


@traced
def count_nonzero(input: Tensor, dim=None) -> Tensor:
    """Number of nonzero elements over `dim` (int or tuple; all when None), as int64."""
    a = _check(input, "count_nonzero")._data
    axes = _axes(dim, a.ndim, "count_nonzero")
    return make(_as_array(array_module(a).count_nonzero(a, axis=axes) if axes else (a != 0)).astype(_INT64, copy=False))


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(
    globals(),
    functions=__all__,
    methods=[n for n in __all__ if n != "return_types"])
