"""Sorting and selection: sort, argsort, msort, topk, kthvalue, median, nanmedian, mode.

Every op here is two steps: an index rule (`Indices`, never differentiable) that picks, for each
slice along `dim`, the positions of the values it returns, and a gather at those positions
(`reduce.TakeAt`, as max(dim) uses) whose derivative scatters the incoming gradient back to the same
positions (`reduce.PutAt`), and the other way round, so double backward works. The order of values is
NumPy's stable sort with NaN as the largest value, as PyTorch's: equal values keep their original order
(descending too).
"""
from __future__ import annotations

import numpy as np

from ..backend import array_module
from .._tensor import Tensor, make, normalize_dim
from ..autograd.function import Op, dispatch
from ..autograd.grad_mode import MODE
from . import reduce
from .reduce import KeepDims, TakeAt, _apply, _check, _nonempty, _result_type, gather_scatter, return_types
from .registry import Exports
from .. import _dtype as dt

__all__ = ["sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "mode"]

_INT64 = np.dtype(np.int64)

for _name in ("sort", "topk", "kthvalue", "median", "nanmedian", "mode"):
    setattr(return_types, _name, _result_type(_name))  # ember.return_types.<name>, picklable like max's


# ---------------------------------------------------------------------- index rules (on raw arrays)
def _order(a, axis: int, descending: bool):
    """Stable argsort of `a` along `axis` (int64), NaN largest. Descending: sort the reversed slice
    ascending and reverse the result, so equal values still come out in their original order."""
    xp = array_module(a)
    if not descending:
        return xp.argsort(a, axis=axis, kind="stable").astype(_INT64, copy=False)
    n = a.shape[axis]
    rev = xp.flip(xp.argsort(xp.flip(a, axis), axis=axis, kind="stable"), axis)
    return (n - 1 - rev).astype(_INT64, copy=False)


def _top(a, axis: int, k: int, largest: bool):
    """Indices of the k largest (smallest) values along `axis`, ordered as sort's first k would be. For a
    small k, a partition (O(n)) picks the candidates and only they are sorted: among values equal to the
    k-th, which ones are kept is then the partition's choice (PyTorch leaves it unspecified too)."""
    n = a.shape[axis]
    xp = array_module(a)
    if not 0 < k <= n // 8 or not hasattr(xp, "argpartition"):
        return _order(a, axis, largest)[(slice(None),) * axis + (slice(0, k),)]
    part = xp.argpartition(a, n - k if largest else k - 1, axis=axis)
    cand = part[(slice(None),) * axis + (slice(n - k, n) if largest else slice(0, k),)]
    cand.sort(axis=axis)  # (in their original order, so the stable sort below keeps ties in that order)
    o = _order(xp.take_along_axis(a, cand, axis), axis, largest)
    return xp.take_along_axis(cand, o, axis).astype(_INT64, copy=False)


def _at(order, pos, axis: int):
    """order[..., pos, ...] along `axis` for a per-slice position `pos` (shape of order, size 1 at axis)."""
    return array_module(order).take_along_axis(order, pos.astype(_INT64, copy=False), axis)


def _median_pos(a, axis: int, ignore_nan: bool):
    """Position in the ascending stable order of each slice's lower median. With NaN present: the first
    NaN (median) or the lower median of the non-NaN values (nanmedian; position 0 when all are NaN)."""
    n = a.shape[axis]
    xp = array_module(a)
    valid = (a == a).sum(axis=axis, keepdims=True)  # non-NaN count per slice; NaNs sort last, in order
    if ignore_nan:
        return xp.maximum(valid - 1, 0) // 2
    return xp.where(valid < n, valid, (n - 1) // 2)


def _mode_index(a, axis: int):
    """Index of each slice's most frequent value (ties: the smallest value), at its last occurrence.

    In the ascending stable order a run of equal values ends at that value's last occurrence; the
    length-so-far of a run first reaches the longest length at the end of the first longest run."""
    xp = array_module(a)
    o = _order(a, axis, False)
    s = xp.moveaxis(xp.take_along_axis(a, o, axis), axis, -1)
    n = s.shape[-1]
    j = xp.arange(n)
    starts = xp.ones(s.shape, bool)
    starts[..., 1:] = s[..., 1:] != s[..., :-1]  # NaN != NaN: each NaN is a run of its own
    run_start = xp.maximum.accumulate(xp.where(starts, j, 0), axis=-1)
    length = j - run_start + 1
    end = xp.argmax(length == length.max(axis=-1, keepdims=True), axis=-1)
    return _at(o, xp.expand_dims(end, axis), axis)


class Indices(Op):
    """The int64 positions that a sorting or selection `rule` picks along `axis` (no derivative: the result
    is an index). Rules: 'sort' (arg: descending), 'topk' (arg: (k, largest)), 'kth' (arg: k, 1-based),
    'median' / 'nanmedian' (arg unused), 'mode'. Reductions keep `axis` as size 1."""

    saves_inputs = False

    def forward(self, a, rule, axis, arg):
        if rule == "sort":
            return _order(a, axis, arg)
        if rule == "topk":
            k, largest = arg
            return _top(a, axis, k, largest)
        if rule == "mode":
            return _mode_index(a, axis)
        xp = array_module(a)
        if rule in ("median", "nanmedian") and hasattr(xp, "argpartition") and not (
                dt.is_float(a.dtype) and bool(xp.isnan(a).any())):
            # no NaN: the lower median is the ((n-1)//2)-th smallest, which a partition finds in O(n) (which one
            # of several equal values it picks is the partition's choice, as it is PyTorch's)
            k = (a.shape[axis] - 1) // 2
            return xp.argpartition(a, k, axis=axis)[(slice(None),) * axis + (slice(k, k + 1),)].astype(_INT64, copy=False)
        o = _order(a, axis, False)
        xp = array_module(a)
        if rule == "kth":
            pos = xp.full(o.shape[:axis] + (1,) + o.shape[axis + 1:], arg - 1, _INT64)
        elif not dt.is_float(a.dtype):
            pos = xp.full(o.shape[:axis] + (1,) + o.shape[axis + 1:], (a.shape[axis] - 1) // 2, _INT64)
        else:
            pos = _median_pos(a, axis, rule == "nanmedian")
        return _at(o, pos, axis)

    def jvp(self, t, a, rule, axis, arg):
        return None  # an index carries no tangent

    def backward(self, gz):
        raise RuntimeError("Indices: an index has no derivative")  # never recorded (applied with grad mode off)


def _indices(x: Tensor, rule: str, axis: int, arg=None) -> Tensor:
    """Indices(x) for `rule`, applied with grad mode off so the result never requires grad."""
    prev = MODE.grad
    MODE.grad = False  # an index never requires grad
    try:
        return dispatch(object.__new__(Indices), (x, rule, axis, arg), (x._data, rule, axis, arg))
    finally:
        MODE.grad = prev


# ---------------------------------------------------------------------- median of every element
class MedianAll(Op):
    """z = the lower median of all elements (NaN if any is NaN; nanmedian: of the non-NaN ones);
    dz/dx = gz split evenly among the elements equal to z (NaN counting as equal to a NaN z), as PyTorch."""

    saves_output = True

    def forward(self, x, ignore_nan):
        flat = x.reshape(-1)
        if flat.size == 0:
            return np.asarray(np.nan if dt.is_float(x.dtype) else np.iinfo(x.dtype).min, x.dtype)  # (as PyTorch)
        o = _order(flat, 0, False)
        pos = int(_median_pos(flat, 0, ignore_nan)[0]) if dt.is_float(x.dtype) else (flat.size - 1) // 2
        return flat[o[pos]]

    def jvp(self, t, x, ignore_nan):
        # the mean tangent of the elements equal to z; NaN where z is NaN (none equal it), as PyTorch's
        return reduce.sum(t[0] * self._share(x, False))

    def backward(self, gz, x, ignore_nan):
        return gz * self._share(x, True)

    def _share(self, x: Tensor, nan_hits: bool) -> Tensor:
        """dz/dx: 1/k at the k elements equal to z (with nan_hits, NaN counting as equal to a NaN z), 0 elsewhere."""
        z = self.output()
        hit = ((x == z) | ((x != x) & (z != z)) if nan_hits else x == z).to(x.dtype)
        return hit / reduce.sum(hit)


# ---------------------------------------------------------------------- argument checks
def _k(k, op: str) -> int:
    """k as an int; a float or bool k is PyTorch's TypeError."""
    if isinstance(k, bool) or not hasattr(k, "__index__"):
        raise TypeError(f"{op}(): argument 'k' (position 2) must be int, not {type(k).__name__}")
    return k.__index__()


def _no_bool(x: Tensor, op: str) -> None:
    """PyTorch's CPU kernels of topk, kthvalue and (nan)median refuse bool input (sort and mode accept it)."""
    if x._data.dtype.kind == "b":
        if op == "topk":
            raise RuntimeError("topk(): topk does not support bool dtypes on CPU; convert the input with .long() first")
        raise NotImplementedError(f'{op}(): "{op}_cpu" not implemented for \'Bool\'; convert the input with .long() first')


def _as_1d(x: Tensor) -> Tensor:
    """A 0-d tensor as shape (1,) (PyTorch treats it as one slice of one element)."""
    return _apply(KeepDims, x, (1,))


def _as_0d(t: Tensor) -> Tensor:
    """A one-element result back as 0-d (the result of a 0-d input)."""
    return _apply(KeepDims, t, ())


def _select(x: Tensor, rule: str, dim, arg, keepdim: bool, op: str, result):
    """(values, indices) of a reduction that picks one element per slice along `dim`."""
    axis = normalize_dim(dim, x._data.ndim, op)
    if x._data.ndim == 0:
        v, i = _select(_as_1d(x), rule, 0, arg, False, op, result)
        return result(v, i)
    _nonempty(x, (axis,), op, False)
    if rule == "kth" and not 1 <= arg <= x._data.shape[axis]:
        raise RuntimeError(f"{op}(): selected number k out of range for dimension {axis} "
                           f"(k={arg}, but the dimension has size {x._data.shape[axis]})")
    idx = _indices(x, rule, axis, arg)
    values = gather_scatter(TakeAt, x, idx, axis, keepdim)
    return result(values, idx if keepdim else _apply(KeepDims, idx, values.shape))


# ---------------------------------------------------------------------- the API
def sort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> tuple[Tensor, Tensor]:
    """Sorted values along `dim` and their int64 positions in input: `return_types.sort(values, indices)`.

    The sort is always stable (equal values keep their original order, also descending), NaN is the
    largest value; dvalues/dinput puts each gradient back at its index."""
    x = _check(input, "sort")
    axis = normalize_dim(dim, x._data.ndim, "sort")
    if x._data.ndim == 0:
        v, i = sort(_as_1d(x), 0, descending)
        return return_types.sort(_as_0d(v), _as_0d(i))
    idx = _indices(x, "sort", axis, bool(descending))
    return return_types.sort(gather_scatter(TakeAt, x, idx, axis, True), idx)


def argsort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Tensor:
    """The int64 indices that sort `input` along `dim` (sort(...).indices: stable, NaN largest)."""
    x = _check(input, "argsort")
    axis = normalize_dim(dim, x._data.ndim, "argsort")
    if x._data.ndim == 0:
        return _as_0d(_indices(_as_1d(x), "sort", 0, bool(descending)))
    return _indices(x, "sort", axis, bool(descending))


def msort(input: Tensor) -> Tensor:
    """input sorted along dim 0 (sort(input, 0).values)."""
    return sort(_check(input, "msort"), 0).values


def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Tensor]:
    """The k largest (largest=False: smallest) values along `dim` and their indices:
    `return_types.topk(values, indices)`. Values come out ordered (largest first, or smallest first) with
    ties in their original order, also when sorted=False (any order is allowed then); NaN is the largest."""
    x = _check(input, "topk")
    k = _k(k, "topk")
    axis = normalize_dim(dim, x._data.ndim, "topk")
    _no_bool(x, "topk")
    n = x._data.shape[axis] if x._data.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk(): selected index k out of range (k={k}, but dimension {axis} has size {n})")
    if x._data.ndim == 0:  # (PyTorch returns the element for k = 0 as well as k = 1)
        v, i = topk(_as_1d(x), 1, 0, largest)
        return return_types.topk(_as_0d(v), _as_0d(i))
    idx = _indices(x, "topk", axis, (k, bool(largest)))
    return return_types.topk(gather_scatter(TakeAt, x, idx, axis, True), idx)


def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """The k-th smallest value (k counts from 1) along `dim` and its index: `return_types.kthvalue`.
    Among equal values the index is the k-th in their original order; NaN is the largest."""
    x = _check(input, "kthvalue")
    k = _k(k, "kthvalue")
    _no_bool(x, "kthvalue")
    return _select(x, "kth", dim, k, keepdim, "kthvalue", return_types.kthvalue)


def _median(input, dim, keepdim: bool, op: str):
    """median and nanmedian (op): of all elements without dim, else per slice with its index."""
    x = _check(input, op)
    _no_bool(x, op)
    if dim is None:
        if keepdim:
            raise TypeError(f"{op}(): keepdim=True needs a dim; {op}(input) reduces over every element")
        return _apply(MedianAll, x, op == "nanmedian")
    return _select(x, op, dim, None, keepdim, op, getattr(return_types, op))


def median(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """median(input): the lower of the two middle values of all elements, a 0-d tensor (NaN if any is NaN;
    its gradient is split evenly among the elements equal to it). median(input, dim, keepdim): the lower
    median of each slice and its index, `return_types.median` (the first NaN where a slice has one)."""
    return _median(input, dim, keepdim, "median")


def nanmedian(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """median ignoring NaN: the lower median of the non-NaN values (NaN where a slice is all NaN).
    nanmedian(input) gives a 0-d tensor; nanmedian(input, dim, keepdim) gives `return_types.nanmedian`."""
    return _median(input, dim, keepdim, "nanmedian")


def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> tuple[Tensor, Tensor]:
    """The most frequent value along `dim` (ties: the smallest) and the index of its last occurrence:
    `return_types.mode(values, indices)`. NaN never equals NaN, so each NaN counts once."""
    x = _check(input, "mode")
    return _select(x, "mode", dim, None, keepdim, "mode", return_types.mode)


# ---------------------------------------------------------------------- the API this module adds (bound by ops/__init__.py)
EXPORTS = Exports(globals(), functions=__all__, methods=__all__)
